/* What an object in the sink is, by its key (objkey.c): `skipprd verify`
 * reads the sink's objects under its prefix and needs, for each, whether
 * it holds records (and of which partition) or is something else skippr
 * keeps there. The key layout is DESIGN.md's:
 * {prefix}/{partition}/{name}, where the partition is one or more folders
 * (ns/p_x=v/p_year=YYYY/...), dead letters go under {prefix}/_errors/,
 * and skippr's own files (claims, probes) under {prefix}/_skippr/.
 *
 * Owns: nothing (views into the key). Thread: any.
 */
#ifndef SK_VERIFY_OBJKEY_H
#define SK_VERIFY_OBJKEY_H

#include <stddef.h>

typedef enum sk_obj_kind {
    SK_OBJ_DATA,    /* records of the partition its folders name */
    SK_OBJ_DEAD,    /* dead letters, or their .meta.jsonl sidecar */
    SK_OBJ_OWN,     /* skippr's own: a claim, a probe, a staging piece */
    SK_OBJ_PARTIAL, /* a growing object's temporary file (.NAME.tmp-ID) */
    SK_OBJ_LOOSE,   /* under the prefix, in no partition folder */
    SK_OBJ_OUTSIDE  /* not under the prefix (a sibling that starts alike) */
} sk_obj_kind;

/* The kind of the object at key, for a sink whose objects are under
 * prefix (NULL or "": the whole namespace; a trailing '/' is allowed),
 * and whose staging pieces, if any, are under staging (NULL: none). A
 * DATA object's partition is *part (*plen bytes of key). */
sk_obj_kind sk_obj_classify(const char *prefix, const char *staging,
                            const char *key, const char **part,
                            size_t *plen);

#endif
