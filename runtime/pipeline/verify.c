/* `skipprd verify`'s digests of both sides: see verify.h. */
#include "pipeline/verify.h"

#include <string.h>

#include "verify/objkey.h"

struct pl_verify {
    char *prefix;           /* the sink's objects are under it */
    int side;               /* PL_VERIFY_SOURCE or _SINK */
    sk_partitions *parts[2]; /* each side's, by partition */
    sk_digest dead;         /* the source's records dead-lettered */
    uint64_t units;         /* source units listed */
    pl_verify_objects objects;
};

pl_verify *pl_verify_new(const char *prefix)
{
    pl_verify *v = sk_calloc(1, sizeof *v);
    if (!v)
        return NULL;
    v->prefix = sk_strdup(prefix ? prefix : "");
    v->parts[0] = sk_partitions_new();
    v->parts[1] = sk_partitions_new();
    if (!v->prefix || !v->parts[0] || !v->parts[1]) {
        pl_verify_free(v);
        return NULL;
    }
    return v;
}

void pl_verify_free(pl_verify *v)
{
    if (!v)
        return;
    sk_partitions_free(v->parts[0]);
    sk_partitions_free(v->parts[1]);
    sk_free(v->prefix);
    sk_free(v);
}

void pl_verify_side(pl_verify *v, int side)
{
    v->side = side;
}

int pl_verify_listed(pl_verify *v, const char *id)
{
    if (v->side == PL_VERIFY_SOURCE) {
        v->units++;
        return 1;
    }
    const char *part;
    size_t plen;
    switch (sk_obj_classify(v->prefix, NULL, id, &part, &plen)) {
    case SK_OBJ_DATA:
        v->objects.data++;
        return 1;
    case SK_OBJ_DEAD:
        v->objects.dead++;
        return 0;
    case SK_OBJ_OWN:
        v->objects.own++;
        return 0;
    case SK_OBJ_PARTIAL:
        v->objects.partial++;
        return 0;
    case SK_OBJ_OUTSIDE:
        break;
    }
    v->objects.outside++;
    return 1; /* its records count, under no partition */
}

/* The digest records of unit go into on this side: the source's under
 * the partition routing gave (key), the sink's under their object's
 * folders ("" for an object in none). NULL on allocation failure. */
static sk_digest *digest_for(pl_verify *v, const char *unit,
                             const char *key, size_t klen)
{
    if (v->side == PL_VERIFY_SINK) {
        key = "";
        klen = 0;
        sk_obj_classify(v->prefix, NULL, unit, &key, &klen);
        if (!key) {
            key = "";
            klen = 0;
        }
    }
    return sk_partitions_at(v->parts[v->side], key, klen);
}

int pl_verify_group(pl_verify *v, const char *unit, const char *key,
                    size_t klen, const uint8_t *buf, const rec_out *recs,
                    const group *g)
{
    sk_digest *d = digest_for(v, unit, key, klen);
    if (!d)
        return SKIPPR_NOMEM;
    for (uint32_t r = g->first; r != NO_REC; r = recs[r].next) {
        size_t n = recs[r].end - recs[r].start;
        sk_digest_add(d, sk_record_hash_of(buf + recs[r].start, n), n);
    }
    return SKIPPR_OK;
}

int pl_verify_dead(pl_verify *v, const char *unit, const uint8_t *rec,
                   size_t len)
{
    sk_record_hash h = sk_record_hash_of(rec, len);
    if (v->side == PL_VERIFY_SOURCE) {
        sk_digest_add(&v->dead, h, len);
        return SKIPPR_OK;
    }
    /* In the sink, a record the framer refuses is still a record there. */
    sk_digest *d = digest_for(v, unit, NULL, 0);
    if (!d)
        return SKIPPR_NOMEM;
    sk_digest_add(d, h, len);
    return SKIPPR_OK;
}

pl_verify_objects pl_verify_sink_objects(const pl_verify *v)
{
    return v->objects;
}

sk_digest pl_verify_dead_letters(const pl_verify *v)
{
    return v->dead;
}

uint64_t pl_verify_units(const pl_verify *v)
{
    return v->units;
}

int pl_verify_compare(const pl_verify *v, size_t keep, sk_verify_result *r)
{
    return sk_verify_compare(v->parts[0], v->parts[1], keep, r);
}
