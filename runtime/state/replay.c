/* Recovery: the WAL replayed into the state's live slices when it opens.
 * OPEN frames start slices, COMMIT frames carry the blocks, records and
 * unit progress of one group commit (applied whole, or not at all when
 * torn), SEAL and DONE frames move slices on. See wal.c for the frames.
 *
 * Thread: the opening thread, before anything else uses the state.
 */
#include "state/state_impl.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

typedef struct pend_slice {
    uint64_t id;
    char *key;
    size_t klen;
    uint8_t kind;
    int64_t opened_at;
    uint64_t seg;
    int streamed;
} pend_slice;

typedef struct pend_stream {
    uint64_t id;
    uint64_t len, records;
    uint32_t crc;
} pend_stream;

typedef struct pend_block {
    uint64_t id;
    sk_wal_pos pos;
    uint64_t nrec, bytes;
} pend_block;

typedef struct replay {
    sk_state *st;
    uint64_t seg;
    pend_slice *ps;
    size_t nps, ps_cap;
    pend_block *pb;
    size_t npb, pb_cap;
    pend_stream *pst;
    size_t npst, pst_cap;
    sk_slice **orph; /* streamed slices announced, never committed */
    size_t norph, orph_cap;
    uint64_t max_id;
} replay;

static void pend_clear(replay *r)
{
    for (size_t i = 0; i < r->nps; i++)
        sk_free(r->ps[i].key);
    r->nps = r->npb = r->npst = 0;
}

/* The pending frames will never count (no COMMIT followed them): a
 * streamed slice among them may have left a growing object in the sink. */
static int pend_drop(replay *r)
{
    for (size_t i = 0; i < r->nps; i++) {
        pend_slice *q = &r->ps[i];
        if (!q->streamed)
            continue;
        sk_slice *s = st_slice_new(q->id, q->key, q->klen, SK_SLICE_DATA,
                                   q->opened_at);
        if (!s || sk_array_grow(&r->orph, r->norph, &r->orph_cap,
                                sizeof *r->orph, 8)) {
            st_slice_free(s);
            return SKIPPR_NOMEM;
        }
        s->streamed = 1;
        r->orph[r->norph++] = s;
    }
    pend_clear(r);
    return SKIPPR_OK;
}

/* The STREAM entries of a commit: each streamed slice's durable length. */
static int apply_streams(replay *r)
{
    for (size_t i = 0; i < r->npst; i++) {
        pend_stream *q = &r->pst[i];
        sk_slice *s = st_live_find(r->st, q->id);
        if (!s) {
            /* Its SLICE frame was in a segment collected after the slice
             * was DONE, which must follow (a ghost, as for blocks). */
            s = st_slice_new(q->id, "?", 1, SK_SLICE_DATA, 0);
            if (!s || st_live_add(r->st, s)) {
                st_slice_free(s);
                return SKIPPR_NOMEM;
            }
            s->ghost = s->announced = s->streamed = 1;
            s->first_seg = r->seg;
        }
        if (!s->streamed || q->len < q->records) {
            sk_error("WAL corrupt: a STREAM entry names slice %" PRIu64
                     ", which is not an open streamed slice", q->id);
            return SKIPPR_CORRUPT;
        }
        s->durable_len = s->pushed = q->len;
        s->records = q->records;
        s->bytes = q->len - q->records;
        s->out_crc = q->crc;
        s->crc_known = 1;
    }
    return SKIPPR_OK;
}

static int rd_str(const uint8_t **p, const uint8_t *end, const uint8_t **s,
                  size_t *n)
{
    if (end - *p < 4)
        return -1;
    uint32_t l = sk_get_u32(*p);
    if ((size_t)(end - *p - 4) < l)
        return -1;
    *s = *p + 4;
    *n = l;
    *p += 4 + l;
    return 0;
}

static int apply_commit(replay *r, const uint8_t *p, size_t len)
{
    sk_state *st = r->st;
    const uint8_t *end = p + len;
    /* Frames that this COMMIT makes count. */
    for (size_t i = 0; i < r->nps; i++) {
        pend_slice *q = &r->ps[i];
        sk_slice *s = st_live_find(st, q->id);
        if (s) {
            /* a restatement: the slice needs only this segment now */
            if (s->streamed && s->nblocks == 0)
                s->first_seg = q->seg;
            continue;
        }
        s = st_slice_new(q->id, q->key, q->klen, q->kind, q->opened_at);
        if (!s || st_live_add(st, s)) {
            st_slice_free(s);
            return SKIPPR_NOMEM;
        }
        s->announced = 1;
        s->streamed = s->durable_announced = s->crc_known = q->streamed;
        s->first_seg = q->seg;
        if (q->id > r->max_id)
            r->max_id = q->id;
    }
    for (size_t i = 0; i < r->npb; i++) {
        sk_slice *s = st_live_find(st, r->pb[i].id);
        if (!s) {
            /* The slice's first frames were in a segment that garbage
             * collection deleted, which it does only once the slice is
             * DONE: its DONE frame must follow. Track it as a ghost until
             * then; a ghost left at the end of replay is corruption. */
            s = st_slice_new(r->pb[i].id, "?", 1, SK_SLICE_DATA, 0);
            if (!s || st_live_add(st, s)) {
                st_slice_free(s);
                return SKIPPR_NOMEM;
            }
            s->ghost = 1;
            s->announced = 1;
            s->first_seg = r->pb[i].pos.seg;
        }
        if (st_add_block(s, r->pb[i].pos))
            return SKIPPR_NOMEM;
        s->records += r->pb[i].nrec;
        s->bytes += r->pb[i].bytes;
    }
    int src = apply_streams(r);
    if (src)
        return src;
    pend_clear(r);

    if (len < 12)
        return SKIPPR_CORRUPT;
    uint64_t next = sk_get_u64(p);
    if (next > st->next_slice_id)
        st->next_slice_id = next;
    uint32_t n = sk_get_u32(p + 8);
    p += 12;
    for (uint32_t i = 0; i < n; i++) {
        const uint8_t *id, *ver;
        size_t il, vl;
        if (rd_str(&p, end, &id, &il) || rd_str(&p, end, &ver, &vl) ||
            end - p < 21 || il > 65535 || vl > 65535)
            return SKIPPR_CORRUPT;
        char idb[65536], verb[65536];
        memcpy(idb, id, il);
        idb[il] = '\0';
        memcpy(verb, ver, vl);
        verb[vl] = '\0';
        sk_unit_rec *u = sk_ledger_touch(st->ledger, idb, verb, 0);
        if (!u)
            return SKIPPR_NOMEM;
        if (strcmp(u->version, verb) != 0) {
            char *v = sk_strdup(verb);
            if (!v)
                return SKIPPR_NOMEM;
            sk_free(u->version);
            u->version = v;
        }
        u->size = (int64_t)sk_get_u64(p);
        u->offset = (int64_t)sk_get_u64(p + 8);
        u->flags = sk_get_u32(p + 16);
        p += 21;
    }
    return SKIPPR_OK;
}

static int replay_cb(void *ud, sk_wal_pos pos, int type, const uint8_t *p,
                     size_t len)
{
    replay *r = ud;
    sk_state *st = r->st;
    const uint8_t *end = p + len;
    if (pos.seg != r->seg) {
        /* Uncommitted frames of the previous segment never count. */
        int drc = pend_drop(r);
        if (drc)
            return drc;
        r->seg = pos.seg;
    }
    switch (type) {
    case SK_WAL_SLICE: {
        const uint8_t *k;
        size_t kl;
        const uint8_t *q = p + 8;
        if (len < 8 || rd_str(&q, end, &k, &kl) || end - q < 9)
            return SKIPPR_CORRUPT;
        if (sk_array_grow(&r->ps, r->nps, &r->ps_cap, sizeof *r->ps, 16))
            return SKIPPR_NOMEM;
        char *key = sk_strndup((const char *)k, kl);
        if (!key)
            return SKIPPR_NOMEM;
        r->ps[r->nps++] = (pend_slice){
            .id = sk_get_u64(p),
            .key = key,
            .klen = kl,
            .kind = (uint8_t)(q[0] & ~SK_SLICE_STREAMED),
            .opened_at = (int64_t)sk_get_u64(q + 1),
            .seg = pos.seg,
            .streamed = (q[0] & SK_SLICE_STREAMED) != 0};
        return SKIPPR_OK;
    }
    case SK_WAL_STREAM: {
        if (len < 4 || (len - 4) / 28 != sk_get_u32(p) ||
            (len - 4) % 28 != 0)
            return SKIPPR_CORRUPT;
        for (const uint8_t *e = p + 4; e < end; e += 28) {
            if (sk_array_grow(&r->pst, r->npst, &r->pst_cap,
                              sizeof *r->pst, 64))
                return SKIPPR_NOMEM;
            r->pst[r->npst++] = (pend_stream){
                sk_get_u64(e), sk_get_u64(e + 8), sk_get_u64(e + 16),
                sk_get_u32(e + 24)};
        }
        return SKIPPR_OK;
    }
    case SK_WAL_BLOCK:
    case SK_WAL_BLOCKZ: {
        if (len < 12)
            return SKIPPR_CORRUPT;
        uint64_t nrec = sk_get_u32(p + 8);
        uint64_t part = len - 12; /* the records part: u32 length, bytes */
        if (type == SK_WAL_BLOCKZ) {
            if (len < 16)
                return SKIPPR_CORRUPT;
            part = sk_get_u32(p + 12);
        }
        if (part < 4 * nrec)
            return SKIPPR_CORRUPT;
        if (sk_array_grow(&r->pb, r->npb, &r->pb_cap, sizeof *r->pb, 64))
            return SKIPPR_NOMEM;
        r->pb[r->npb++] = (pend_block){sk_get_u64(p), pos, nrec,
                                       part - 4 * nrec};
        return SKIPPR_OK;
    }
    case SK_WAL_COMMIT:
        return apply_commit(r, p, len);
    case SK_WAL_SEAL: {
        const uint8_t *k;
        size_t kl;
        const uint8_t *q = p + 8;
        if (len < 8 || rd_str(&q, end, &k, &kl) || end - q < 20)
            return SKIPPR_CORRUPT;
        sk_slice *s = st_live_find(st, sk_get_u64(p));
        if (!s)
            return SKIPPR_OK; /* its frames were collected already */
        sk_free(s->object_key);
        s->object_key = sk_strndup((const char *)k, kl);
        if (!s->object_key)
            return SKIPPR_NOMEM;
        s->object_bytes = sk_get_u64(q);
        s->object_crc = sk_get_u32(q + 16);
        s->state = SK_SLICE_SEALED;
        if (pos.seg < s->first_seg)
            s->first_seg = pos.seg;
        return SKIPPR_OK;
    }
    case SK_WAL_DONE: {
        if (len < 8)
            return SKIPPR_CORRUPT;
        sk_slice *s = st_live_find(st, sk_get_u64(p));
        if (s) {
            st_live_remove(st, s);
            st_slice_free(s);
        }
        return SKIPPR_OK;
    }
    default:
        sk_error("WAL: unknown frame type %d at segment %" PRIu64
                 " offset %" PRIu64, type, pos.seg, pos.off);
        return SKIPPR_CORRUPT;
    }
}

/* Replay the WAL of st (read-only when st->readonly) into its live
 * slices; then check that no slice has blocks without a start, and make
 * the OPEN ones findable by key for appends. */
int st_replay(sk_state *st)
{
    replay r = {0};
    int rc;
    r.st = st;
    r.seg = UINT64_MAX;
    if (st->readonly)
        rc = sk_wal_replay_readonly(st->wal, replay_cb, &r);
    else
        rc = sk_wal_replay(st->wal, replay_cb, &r);
    if (!rc)
        rc = pend_drop(&r);
    pend_clear(&r);
    sk_free(r.ps);
    sk_free(r.pb);
    sk_free(r.pst);
    /* Orphans are those not live after all (not a restatement, and not
     * committed in a later segment); the list becomes the state's. */
    size_t keep = 0;
    for (size_t i = 0; i < r.norph; i++) {
        if (rc || st_live_find(st, r.orph[i]->id))
            st_slice_free(r.orph[i]);
        else
            r.orph[keep++] = r.orph[i];
    }
    st->orphans = r.orph;
    st->norphans = keep;
    if (rc) {
        if (rc != SKIPPR_CORRUPT)
            sk_error("WAL replay of %s failed: %s", st->dir,
                     skippr_status_str(rc));
        return rc;
    }
    if (r.max_id >= st->next_slice_id)
        st->next_slice_id = r.max_id + 1;
    for (size_t i = 0; i < st->nlive; i++) {
        if (st->live[i]->ghost) {
            sk_error("WAL corrupt: slice %" PRIu64 " has blocks in segment %"
                     PRIu64 " but its start is missing and it was never "
                     "completed", st->live[i]->id, st->live[i]->first_seg);
            return SKIPPR_CORRUPT;
        }
    }
    /* Reopen OPEN slices for appends. */
    for (size_t i = 0; i < st->nlive; i++) {
        sk_slice *s = st->live[i];
        if (s->state == SK_SLICE_OPEN && s->kind == SK_SLICE_DATA &&
            (rc = sk_map_put(&st->open_by_key, s->key, s->key_len,
                             s->key_hash, s)))
            return rc;
    }
    return SKIPPR_OK;
}
