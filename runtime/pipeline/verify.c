/* `skipprd verify`'s digests of both sides: see verify.h. */
#include "pipeline/verify.h"

#include <string.h>

#include "verify/objkey.h"

#define SINCE_FLUSH 65536 /* mark records held in memory, at most */

struct pl_verify {
    char *prefix;           /* the sink's objects are under it */
    int side;               /* PL_VERIFY_SOURCE or _SINK */
    sk_partitions *parts[2]; /* each side's, by partition */
    sk_digest dead;         /* the source's records dead-lettered */
    sk_partitions *drill;   /* drilling: the partitions that differ */
    sk_recset *recs;        /* ... and their records, one by one */
    uint64_t units;         /* source units listed */
    pl_verify_objects objects;
    /* incremental: pl_verify_since */
    sk_ledger *copied, *seen[2];
    const sk_partitions *open;
    pl_verify_since_counts since;
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

/* Whether a ledger's record r (NULL: none) is u as listed: the same
 * version and size. */
static int same_unit(const sk_unit_rec *r, const skippr_unit *u)
{
    if (!r || sk_unit_size(r) != u->size)
        return 0;
    return strcmp(sk_unit_version(r), u->version ? u->version : "") == 0;
}

/* Incremental, side s: whether to read u, which it records as read in
 * the mark; drilling, whether the mark holds it. */
static int since_listed(pl_verify *v, int s, const skippr_unit *u, int *rc)
{
    const sk_unit_rec *r = NULL;
    if (s == PL_VERIFY_SOURCE && !v->recs) {
        if ((*rc = sk_ledger_lookup(v->copied, u->id, &r)))
            return 0;
        if (!r || !(sk_unit_flags(r) & SK_UNIT_DONE) || !same_unit(r, u)) {
            v->since.waiting++; /* the copy has not finished it */
            return 0;
        }
    }
    if ((*rc = sk_ledger_lookup(v->seen[s], u->id, &r)))
        return 0;
    if (v->recs) /* drilling: what the digests hold */
        return same_unit(r, u);
    if (same_unit(r, u)) {
        v->since.before[s]++;
        return 0;
    }
    v->since.changed[s] += r != NULL;
    if (r && s == PL_VERIFY_SINK)
        return 0; /* its records were counted as they were */
    sk_unit_rec *w = sk_ledger_touch(v->seen[s], u->id,
                                     u->version ? u->version : "", u->size);
    if (!w) {
        *rc = SKIPPR_NOMEM;
        return 0;
    }
    sk_unit_progress(w, u->size, SK_UNIT_DONE, 0);
    /* a first verify of a large archive: the mark's records go to its
     * runs now and then, not all held in memory */
    v->units += s == PL_VERIFY_SOURCE;
    if (++v->since.fresh[s] % SINCE_FLUSH == 0)
        *rc = sk_ledger_compact(v->seen[s], 0);
    return !*rc;
}

int pl_verify_listed(pl_verify *v, const skippr_unit *u, int *rc)
{
    int counting = !v->recs; /* drilling reads them all again */
    *rc = SKIPPR_OK;
    if (v->side == PL_VERIFY_SOURCE) {
        if (v->seen[0])
            return since_listed(v, PL_VERIFY_SOURCE, u, rc);
        v->units += counting;
        return 1;
    }
    const char *part;
    size_t plen;
    uint64_t *n = &v->objects.outside; /* read: under no partition */
    sk_obj_kind k = sink_partition(v, u->id, &part, &plen);
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
    if (v->recs && !drilled(v, part, plen))
        return 0;
    return v->seen[1] ? since_listed(v, PL_VERIFY_SINK, u, rc) : 1;
}

void pl_verify_since(pl_verify *v, sk_ledger *copied, sk_ledger *seen[2],
                     const sk_partitions *open)
{
    v->copied = copied;
    v->seen[0] = seen[0];
    v->seen[1] = seen[1];
    v->open = open;
}

pl_verify_since_counts pl_verify_since_counts_of(const pl_verify *v)
{
    return v->since;
}

void pl_verify_absorb(pl_verify *v, uint64_t units, pl_verify_objects o,
                      sk_digest dead)
{
    v->units += units;
    v->objects.data += o.data;
    v->objects.dead += o.dead;
    v->objects.own += o.own;
    v->objects.partial += o.partial;
    v->objects.outside += o.outside;
    sk_digest_merge(&v->dead, &dead);
}

sk_partitions *pl_verify_parts(pl_verify *v, int side)
{
    return v->parts[side ? 1 : 0];
}

/* One record of unit at offset, in partition key[0..klen), whose
 * partition the caller has checked when drilling: kept, or (a dead
 * letter read in the sink) into the partition's digest. */
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
    if (!v->recs) { /* the group's digest, made as it was framed */
        sk_digest *d = sk_partitions_at(v->parts[v->side], key, klen);
        if (!d)
            return SKIPPR_NOMEM;
        sk_digest_merge(d, &g->digest);
        return SKIPPR_OK;
    }
    if (!drilled(v, key, klen))
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
    return sk_verify_compare(v->parts[0], v->parts[1], v->open, keep, r);
}

/* The partitions that do not match, into v->drill (sk_partitions_fn). */
static int differing(const char *key, size_t klen, const sk_digest *a,
                     const sk_digest *b, void *ud)
{
    pl_verify *v = ud;
    if ((a && b && sk_digest_equal(a, b)) ||
        (v->open && sk_partitions_get(v->open, key, klen)))
        return SKIPPR_OK; /* matches, or is judged once it has landed */
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
