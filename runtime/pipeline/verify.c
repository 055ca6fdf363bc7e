/* `skipprd verify`'s digests of both sides: see verify.h. */
#include "pipeline/verify.h"

#include <string.h>

#include "verify/objkey.h"

struct pl_verify {
    char *prefix;           /* the sink's objects are under it */
    int side;               /* PL_VERIFY_SOURCE or _SINK */
    sk_partitions *parts[2]; /* each side's, by partition */
    sk_digest dead;         /* the source's records dead-lettered */
    sk_partitions *drill;   /* drilling: the partitions that differ */
    sk_recset *recs;        /* ... and their records, one by one */
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
    sk_partitions_free(v->drill);
    sk_recset_free(v->recs);
    sk_free(v->prefix);
    sk_free(v);
}

void pl_verify_side(pl_verify *v, int side)
{
    v->side = side;
}

int pl_verify_side_of(const pl_verify *v)
{
    return v->side;
}

/* What the sink's object id is, and the partition its records go under
 * (*part, *plen: its folders, or "" for an object in none). */
static sk_obj_kind sink_partition(const pl_verify *v, const char *id,
                                  const char **part, size_t *plen)
{
    sk_obj_kind k = sk_obj_classify(v->prefix, NULL, id, part, plen);
    if (!*part) {
        *part = "";
        *plen = 0;
    }
    return k;
}

/* Drilling: whether partition key[0..klen) is one that differs. */
static int drilled(const pl_verify *v, const char *key, size_t klen)
{
    return sk_partitions_get(v->drill, key, klen) != NULL;
}

int pl_verify_listed(pl_verify *v, const char *id)
{
    int counting = !v->recs; /* drilling reads them all again */
    if (v->side == PL_VERIFY_SOURCE) {
        v->units += counting;
        return 1;
    }
    const char *part;
    size_t plen;
    uint64_t *n = &v->objects.outside; /* read: under no partition */
    sk_obj_kind k = sink_partition(v, id, &part, &plen);
    if (k == SK_OBJ_OUTSIDE)
        return 0; /* not the sink's: listed as it starts alike */
    if (k == SK_OBJ_DATA)
        n = &v->objects.data;
    else if (k == SK_OBJ_DEAD)
        n = &v->objects.dead;
    else if (k == SK_OBJ_OWN)
        n = &v->objects.own;
    else if (k == SK_OBJ_PARTIAL)
        n = &v->objects.partial;
    *n += counting;
    if (k != SK_OBJ_DATA && k != SK_OBJ_LOOSE)
        return 0;
    /* drilling: only the objects of the partitions that differ */
    return !v->recs || drilled(v, part, plen);
}

/* One record of unit at offset, in partition key[0..klen), whose
 * partition the caller has checked when drilling: kept, or into the
 * partition's digest. */
static int one(pl_verify *v, const char *unit, uint64_t offset,
               const char *key, size_t klen, const uint8_t *rec, size_t n)
{
    sk_record_hash h = sk_record_hash_of(rec, n);
    if (v->recs)
        return sk_recset_add(v->recs, v->side, h, key, klen, unit, offset);
    sk_digest *d = sk_partitions_at(v->parts[v->side], key, klen);
    if (!d)
        return SKIPPR_NOMEM;
    sk_digest_add(d, h, n);
    return SKIPPR_OK;
}

int pl_verify_group(pl_verify *v, const char *unit, uint64_t base,
                    const char *key, size_t klen, const uint8_t *buf,
                    const rec_out *recs, const group *g)
{
    /* the source's under the partition routing gave (key), the sink's
     * under their object's folders */
    if (v->side == PL_VERIFY_SINK)
        sink_partition(v, unit, &key, &klen);
    if (v->recs && !drilled(v, key, klen))
        return SKIPPR_OK;
    int rc = SKIPPR_OK;
    for (uint32_t r = g->first; !rc && r != NO_REC; r = recs[r].next)
        rc = one(v, unit, base + recs[r].start, key, klen,
                 buf + recs[r].start, recs[r].end - recs[r].start);
    return rc;
}

int pl_verify_dead(pl_verify *v, const char *unit, uint64_t offset,
                   const uint8_t *rec, size_t len)
{
    if (v->side == PL_VERIFY_SOURCE) {
        if (!v->recs)
            sk_digest_add(&v->dead, sk_record_hash_of(rec, len), len);
        return SKIPPR_OK;
    }
    /* In the sink, a record the framer refuses is still a record there. */
    const char *key;
    size_t klen;
    sink_partition(v, unit, &key, &klen);
    if (v->recs && !drilled(v, key, klen))
        return SKIPPR_OK;
    return one(v, unit, offset, key, klen, rec, len);
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

/* The partitions that do not match, into v->drill (sk_partitions_fn). */
static int differing(const char *key, size_t klen, const sk_digest *a,
                     const sk_digest *b, void *ud)
{
    pl_verify *v = ud;
    if (a && b && sk_digest_equal(a, b))
        return SKIPPR_OK;
    return sk_partitions_at(v->drill, key, klen) ? SKIPPR_OK : SKIPPR_NOMEM;
}

int pl_verify_drill(pl_verify *v, size_t max)
{
    if (!(v->drill = sk_partitions_new()) || !(v->recs = sk_recset_new(max)))
        return SKIPPR_NOMEM;
    return sk_partitions_pair(v->parts[0], v->parts[1], differing, v);
}

int pl_verify_records(pl_verify *v, size_t keep, sk_rec_report *r)
{
    return sk_recset_compare(v->recs, keep, r);
}
