/* Recovery's pending frames: SLICE, BLOCK, STREAM, TAIL, NOTE and STAGE
 * frames count only when a COMMIT follows them in their segment
 * (wal_impl.h), so replay decodes each into a pending list here, and
 * replay.c applies the lists at the COMMIT or drops them at a segment's
 * end. */
#include <inttypes.h>
#include <string.h>

#include "state/replay_impl.h"
#include "state/state_impl.h"
#include "state/slice.h"

void st_pend_clear(replay *r)
{
    for (size_t i = 0; i < r->nps; i++) {
        sk_free(r->ps[i].key);
        sk_free(r->ps[i].root);
    }
    for (size_t i = 0; i < r->npn; i++)
        sk_free(r->pn[i].p);
    r->nps = r->npb = r->npst = r->npn = r->npg = 0;
}

/* The pending frames will never count (no COMMIT followed them): a
 * streamed slice among them may have left a growing object in the sink. */
int st_pend_drop(replay *r)
{
    for (size_t i = 0; i < r->nps; i++) {
        pend_slice *q = &r->ps[i];
        if (!q->streamed)
            continue;
        sk_slice *s = st_slice_new(q->id, q->key, q->klen, &q->tag,
                                   SK_SLICE_DATA, q->opened_at);
        if (!s || skippr_array_grow(&r->orph, r->norph, &r->orph_cap,
                                    sizeof *r->orph, 8)) {
            st_slice_free(s);
            return SKIPPR_NOMEM;
        }
        s->streamed = 1;
        r->orph[r->norph++] = s;
    }
    st_pend_clear(r);
    return SKIPPR_OK;
}

/* A STREAM frame's entries, pending until its COMMIT. */
int st_pend_streams(replay *r, const uint8_t *p, size_t len)
{
    if (len < 4 || (len - 4) / SK_STREAM_ENTRY != sk_get_u32(p) ||
        (len - 4) % SK_STREAM_ENTRY != 0)
        return SKIPPR_CORRUPT;
    for (const uint8_t *e = p + 4; e < p + len; e += SK_STREAM_ENTRY) {
        if (skippr_array_grow(&r->pst, r->npst, &r->pst_cap, sizeof *r->pst,
                              64))
            return SKIPPR_NOMEM;
        r->pst[r->npst++] = (pend_stream){
            sk_get_u64(e), sk_get_u64(e + 8), sk_get_u64(e + 16),
            sk_get_u64(e + 24), sk_get_u32(e + 32)};
    }
    return SKIPPR_OK;
}

/* A TAIL frame, pending as a block is. */
int st_pend_tail(replay *r, sk_wal_pos pos, const uint8_t *p, size_t len)
{
    if (len < 16)
        return SKIPPR_CORRUPT;
    if (skippr_array_grow(&r->pb, r->npb, &r->pb_cap, sizeof *r->pb, 64))
        return SKIPPR_NOMEM;
    r->pb[r->npb++] = (pend_block){.id = sk_get_u64(p), .pos = pos,
                                   .bytes = len - 16, .tail = 1,
                                   .off = sk_get_u64(p + 8)};
    return SKIPPR_OK;
}

/* A NOTE frame: its bytes are copied, pending until its COMMIT. */
int st_pend_note(replay *r, const uint8_t *p, size_t len)
{
    if (len < 9)
        return SKIPPR_CORRUPT;
    if (skippr_array_grow(&r->pn, r->npn, &r->pn_cap, sizeof *r->pn, 16))
        return SKIPPR_NOMEM;
    uint8_t *c = sk_malloc(len - 9 ? len - 9 : 1);
    if (!c)
        return SKIPPR_NOMEM;
    memcpy(c, p + 9, len - 9);
    r->pn[r->npn++] = (pend_note){sk_get_u64(p), p[8] & 1, c, len - 9};
    return SKIPPR_OK;
}

/* A version 1 SLICE frame's key: its partition and tag (v1tag.c). */
static int v1_key(pend_slice *q)
{
    size_t nlen;
    sk_slice_tag t;
    if (st_v1_key(q->key, q->klen, &nlen, &t)) {
        sk_error("WAL corrupt: slice %" PRIu64 " has a tag this skipprd "
                 "does not know", q->id);
        return SKIPPR_CORRUPT;
    }
    if (t.root_len && !(q->root = sk_strndup(t.root, t.root_len)))
        return SKIPPR_NOMEM;
    t.root = q->root;
    q->tag = t;
    q->klen = nlen;
    return SKIPPR_OK;
}

/* A SLICE frame (wal.c): pending until its COMMIT. A version 1 frame is
 * read into the same fields. */
int st_pend_slice(replay *r, int type, sk_wal_pos pos, const uint8_t *p,
                  size_t len)
{
    const uint8_t *end = p + len, *k, *q = p + 8, *root = NULL;
    size_t kl, rl = 0;
    if (len < 8 || st_rd_str(&q, end, &k, &kl) || end - q < 9)
        return SKIPPR_CORRUPT;
    const uint8_t *t = q + 9; /* the typed tag: form, header id, root */
    if (type == SK_WAL_SLICE) {
        const uint8_t *rp = t + 9;
        if (end - t < 9 || t[0] > SK_FORM_XML ||
            st_rd_str(&rp, end, &root, &rl) || rl > SK_SLICE_ROOT_MAX)
            return SKIPPR_CORRUPT;
    }
    if (skippr_array_grow(&r->ps, r->nps, &r->ps_cap, sizeof *r->ps, 16))
        return SKIPPR_NOMEM;
    pend_slice *ps = &r->ps[r->nps];
    *ps = (pend_slice){
        .id = sk_get_u64(p),
        .key = sk_strndup((const char *)k, kl),
        .klen = kl,
        .kind = (uint8_t)(q[0] & ~(SK_SLICE_STREAMED | SK_SLICE_STAGED)),
        .opened_at = (int64_t)sk_get_u64(q + 1),
        .seg = pos.seg,
        .streamed = (q[0] & SK_SLICE_STREAMED) != 0,
        .staged = (q[0] & SK_SLICE_STAGED) != 0};
    r->nps++; /* pend_clear frees its key and root */
    if (rl && !(ps->root = sk_strndup((const char *)root, rl)))
        return SKIPPR_NOMEM;
    if (!ps->key)
        return SKIPPR_NOMEM;
    if (type == SK_WAL_SLICE) {
        ps->tag = (sk_slice_tag){.form = (sk_slice_form)t[0],
                                 .header_id = sk_get_u64(t + 1),
                                 .root = ps->root, .root_len = rl};
        return SKIPPR_OK;
    }
    r->v1++;
    return v1_key(ps);
}

/* A STAGE frame: a staging piece, pending its commit. */
int st_pend_stage(replay *r, const uint8_t *p, size_t len)
{
    if (len != 32)
        return SKIPPR_CORRUPT;
    if (skippr_array_grow(&r->pg, r->npg, &r->pg_cap, sizeof *r->pg, 16))
        return SKIPPR_NOMEM;
    r->pg[r->npg++] = (pend_stage){sk_get_u64(p), sk_get_u64(p + 8),
                                   sk_get_u64(p + 16), sk_get_u64(p + 24)};
    return SKIPPR_OK;
}

/* A BLOCK or BLOCKZ frame at pos: its records, pending their commit. */
int st_pend_block(replay *r, int type, sk_wal_pos pos, const uint8_t *p,
                  size_t len)
{
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
    if (skippr_array_grow(&r->pb, r->npb, &r->pb_cap, sizeof *r->pb, 64))
        return SKIPPR_NOMEM;
    r->pb[r->npb++] = (pend_block){.id = sk_get_u64(p), .pos = pos,
                                   .nrec = nrec, .bytes = part - 4 * nrec};
    return SKIPPR_OK;
}
