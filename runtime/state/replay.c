/* Recovery: the WAL replayed into the state's live slices when it opens.
 * OPEN frames start slices, COMMIT frames carry the blocks, records and
 * unit progress of one group commit (applied whole, or not at all when
 * torn), SEAL and DONE frames move slices on. See wal_impl.h for the frames;
 * replaypend.c decodes the frames that wait for a COMMIT.
 *
 * Thread: the opening thread, before anything else uses the state.
 */
#include "state/replay.h"
#include "state/unitrec_impl.h"
#include "state/state_impl.h"

#include "state/streamed.h"
#include "state/replay_impl.h"
#include "state/slice.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

/* A slice whose frames are seen but whose SLICE frame was in a segment
 * already collected: either it is DONE later in the log, or (a streamed
 * slice) a restatement names it later. Until then it is a ghost; one left
 * at the end of replay is corruption. NULL on allocation failure. */
static sk_slice *ghost(replay *r, uint64_t id, uint64_t seg, int streamed)
{
    sk_slice *s = st_slice_new(id, "?", 1, NULL, SK_SLICE_DATA, 0);
    if (!s || st_live_add(r->st, s)) {
        st_slice_free(s);
        return NULL;
    }
    s->ghost = s->announced = 1;
    s->streamed = streamed;
    s->first_seg = s->announce_seg = seg;
    return s;
}

/* The STREAM entries of a commit: each streamed slice's durable length
 * (in the sink, and for a parted slice in all). */
static int apply_streams(replay *r)
{
    for (size_t i = 0; i < r->npst; i++) {
        pend_stream *q = &r->pst[i];
        sk_slice *s = st_live_find(r->st, q->id);
        if (!s && !(s = ghost(r, q->id, r->seg, 1)))
            return SKIPPR_NOMEM;
        if (!s->streamed || q->total < q->records || q->total < q->len) {
            sk_error("WAL corrupt: a STREAM entry names slice %" PRIu64
                     ", which is not an open streamed slice", q->id);
            return SKIPPR_CORRUPT;
        }
        st_drop_tails(s, q->len); /* parts took them */
        st_drop_stages(s, q->len);
        s->durable_len = s->pushed = q->len;
        s->durable_total = q->total;
        s->records = q->records;
        s->bytes = q->total - q->records;
        s->out_crc = q->crc;
        s->crc_known = 1;
    }
    return SKIPPR_OK;
}

/* The NOTE frames of a commit. */
static int apply_notes(replay *r)
{
    for (size_t i = 0; i < r->npn; i++) {
        pend_note *q = &r->pn[i];
        sk_slice *s = st_live_find(r->st, q->id);
        if (!s && !(s = ghost(r, q->id, r->seg, 1)))
            return SKIPPR_NOMEM;
        if (q->replace)
            skippr_buf_reset(&s->notes);
        int rc = skippr_buf_append(&s->notes, q->p, q->n);
        if (rc)
            return rc;
        s->notes_rec = s->notes.len;
    }
    return SKIPPR_OK;
}

/* The STAGE frames of a commit, after its STREAM entries: pieces new to
 * their slice are added and the TAIL frames they cover retire. One that
 * starts before the slice's bytes end is known already (a restatement),
 * or a part took it (what a part left of it is in a TAIL frame now). */
static int apply_stages(replay *r)
{
    for (size_t i = 0; i < r->npg; i++) {
        pend_stage *q = &r->pg[i];
        sk_slice *s = st_live_find(r->st, q->id);
        if (!s && !(s = ghost(r, q->id, r->seg, 1)))
            return SKIPPR_NOMEM;
        s->staged_ever = 1;
        /* A ghost's earlier frames were collected (it is DONE later in
         * the log): its pieces do not add up, and are never read. */
        if (s->ghost)
            continue;
        uint64_t end = s->durable_len + s->staged;
        if (q->off < end)
            continue;
        if (q->off != end) {
            sk_error("WAL corrupt: a STAGE frame of slice %" PRIu64 " at %"
                     PRIu64 " where its bytes reach %" PRIu64, q->id, q->off,
                     end);
            return SKIPPR_CORRUPT;
        }
        if (st_add_stage(s, q->off, q->len, q->tag))
            return SKIPPR_NOMEM;
        st_drop_tails(s, q->off + q->len);
    }
    return SKIPPR_OK;
}

/* A ghost's restatement: it gets its key back. */
static int unghost(sk_slice *s, const pend_slice *q)
{
    if (st_slice_name(s, q->key, q->klen, &q->tag))
        return SKIPPR_NOMEM;
    s->kind = q->kind;
    s->opened_at = q->opened_at;
    s->ghost = 0;
    s->streamed = s->durable_announced = s->crc_known = 1;
    return SKIPPR_OK;
}

/* The SLICE frames a COMMIT makes count: new slices go live; a
 * restatement moves a live one to its segment. */
static int commit_slices(replay *r)
{
    sk_state *st = r->st;
    for (size_t i = 0; i < r->nps; i++) {
        pend_slice *q = &r->ps[i];
        sk_slice *s = st_live_find(st, q->id);
        if (s) {
            /* a restatement: the slice needs only this segment now (and
             * those of a parted slice's TAIL frames) */
            if (s->ghost && q->streamed && unghost(s, q))
                return SKIPPR_NOMEM;
            s->staged_ever |= q->staged;
            s->announce_seg = q->seg;
            if (s->streamed)
                s->first_seg = s->nblocks ? SK_MIN(s->blocks[0].seg, q->seg)
                                          : q->seg;
            continue;
        }
        s = st_slice_new(q->id, q->key, q->klen, &q->tag, q->kind,
                         q->opened_at);
        if (!s || st_live_add(st, s)) {
            st_slice_free(s);
            return SKIPPR_NOMEM;
        }
        s->announced = 1;
        s->streamed = s->durable_announced = s->crc_known = q->streamed;
        s->staged_ever = q->staged;
        s->first_seg = s->announce_seg = q->seg;
        if (q->id > r->max_id)
            r->max_id = q->id;
    }
    return SKIPPR_OK;
}

static int apply_commit(replay *r, const uint8_t *p, size_t len)
{
    sk_state *st = r->st;
    const uint8_t *end = p + len;
    /* Frames that this COMMIT makes count. */
    int src = commit_slices(r);
    if (src)
        return src;
    /* A commit's NOTE and STREAM frames come before its TAIL frames. */
    src = apply_notes(r);
    if (!src)
        src = apply_streams(r);
    if (!src)
        src = apply_stages(r);
    if (src)
        return src;
    for (size_t i = 0; i < r->npb; i++) {
        pend_block *b = &r->pb[i];
        sk_slice *s = st_live_find(st, b->id);
        /* The slice's first frames were in a segment that garbage
         * collection deleted, which it does only once the slice is DONE:
         * its DONE frame must follow (or, streamed, a restatement). */
        if (!s && !(s = ghost(r, b->id, b->pos.seg, b->tail)))
            return SKIPPR_NOMEM;
        if (b->tail) {
            if (!s->streamed)
                return SKIPPR_CORRUPT;
            if (st_add_tail(s, b->pos, b->off))
                return SKIPPR_NOMEM;
            continue;
        }
        if (st_add_block(s, b->pos))
            return SKIPPR_NOMEM;
        s->records += b->nrec;
        s->bytes += b->bytes;
    }
    st_pend_clear(r);

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
        if (st_rd_str(&p, end, &id, &il) || st_rd_str(&p, end, &ver, &vl) ||
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

/* A SEAL frame at pos: the live slice it names is sealed to its object. */
static int apply_seal(sk_state *st, sk_wal_pos pos, const uint8_t *p,
                      size_t len)
{
    const uint8_t *end = p + len, *k;
    size_t kl;
    const uint8_t *q = p + 8;
    if (len < 8 || st_rd_str(&q, end, &k, &kl) || end - q < 20)
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

/* A DONE frame: the slice it names is gone. */
static int apply_done(sk_state *st, const uint8_t *p, size_t len)
{
    if (len < 8)
        return SKIPPR_CORRUPT;
    sk_slice *s = st_live_find(st, sk_get_u64(p));
    if (s) {
        st_live_remove(st, s);
        st_slice_free(s);
    }
    return SKIPPR_OK;
}

static int replay_cb(void *ud, sk_wal_pos pos, int type, const uint8_t *p,
                     size_t len)
{
    replay *r = ud;
    if (pos.seg != r->seg) {
        /* Uncommitted frames of the previous segment never count. */
        int drc = st_pend_drop(r);
        if (drc)
            return drc;
        r->seg = pos.seg;
    }
    switch (type) {
    case SK_WAL_SLICE:
    case SK_WAL_SLICE_V1:
        return st_pend_slice(r, type, pos, p, len);
    case SK_WAL_STREAM:
        return st_pend_streams(r, p, len);
    case SK_WAL_TAIL:
        return st_pend_tail(r, pos, p, len);
    case SK_WAL_NOTE:
        return st_pend_note(r, p, len);
    case SK_WAL_STAGE:
        return st_pend_stage(r, p, len);
    case SK_WAL_BLOCK:
    case SK_WAL_BLOCKZ:
        return st_pend_block(r, type, pos, p, len);
    case SK_WAL_COMMIT:
        return apply_commit(r, p, len);
    case SK_WAL_SEAL:
        return apply_seal(r->st, pos, p, len);
    case SK_WAL_DONE:
        return apply_done(r->st, p, len);
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
        rc = st_pend_drop(&r);
    st_pend_clear(&r);
    sk_free(r.ps);
    sk_free(r.pb);
    sk_free(r.pst);
    sk_free(r.pn);
    sk_free(r.pg);
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
    if (r.v1)
        sk_info("state %s: %zu slice frames of an older skipprd (tags as "
                "text in the key) read and upgraded; slices are written "
                "with typed tags from now on", st->dir, r.v1);
    /* Reopen OPEN slices for appends; a parted slice's buffer starts after
     * its tail. */
    for (size_t i = 0; i < st->nlive; i++) {
        sk_slice *s = st->live[i];
        s->recovered = 1;
        if (s->streamed) {
            s->walled = s->durable_total - s->durable_len - s->staged;
            s->mem_off = s->durable_total;
        }
        if (s->state == SK_SLICE_OPEN && s->kind == SK_SLICE_DATA &&
            (rc = sk_map_put(&st->open_by_key, s->key, s->ident_len,
                             s->key_hash, s)))
            return rc;
    }
    return SKIPPR_OK;
}
