/* Recovery: the WAL replayed into the state's live slices when it opens.
 * OPEN frames start slices, COMMIT frames carry the blocks, records and
 * unit progress of one group commit (applied whole, or not at all when
 * torn), SEAL and DONE frames move slices on. See wal.c for the frames.
 *
 * Thread: the opening thread, before anything else uses the state.
 */
#include "state/replay.h"

#include "state/grow.h"
#include "state/slice.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

typedef struct pend_slice {
    uint64_t id;
    char *key; /* the partition */
    size_t klen;
    sk_slice_tag tag; /* its root in root */
    char *root;
    uint8_t kind;
    int64_t opened_at;
    uint64_t seg;
    int streamed;
    int staged;
} pend_slice;

typedef struct pend_stream {
    uint64_t id;
    uint64_t len, total, records;
    uint32_t crc;
} pend_stream;

typedef struct pend_block {
    uint64_t id;
    sk_wal_pos pos;
    uint64_t nrec, bytes;
    int tail;     /* a TAIL frame: bytes at object offset off */
    uint64_t off;
} pend_block;

typedef struct pend_stage {
    uint64_t id, off, len, tag;
} pend_stage;

typedef struct pend_note {
    uint64_t id;
    int replace;
    uint8_t *p;
    size_t n;
} pend_note;

typedef struct replay {
    sk_state *st;
    uint64_t seg;
    pend_slice *ps;
    size_t nps, ps_cap;
    pend_block *pb;
    size_t npb, pb_cap;
    pend_stream *pst;
    size_t npst, pst_cap;
    pend_note *pn;
    size_t npn, pn_cap;
    pend_stage *pg;
    size_t npg, pg_cap;
    sk_slice **orph; /* streamed slices announced, never committed */
    size_t norph, orph_cap;
    uint64_t max_id;
    size_t v1; /* SLICE_V1 frames read: an older state, upgraded */
} replay;

static void pend_clear(replay *r)
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
static int pend_drop(replay *r)
{
    for (size_t i = 0; i < r->nps; i++) {
        pend_slice *q = &r->ps[i];
        if (!q->streamed)
            continue;
        sk_slice *s = st_slice_new(q->id, q->key, q->klen, &q->tag,
                                   SK_SLICE_DATA, q->opened_at);
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

/* A STREAM frame's entries, pending until its COMMIT. */
static int pend_streams(replay *r, const uint8_t *p, size_t len)
{
    if (len < 4 || (len - 4) / SK_STREAM_ENTRY != sk_get_u32(p) ||
        (len - 4) % SK_STREAM_ENTRY != 0)
        return SKIPPR_CORRUPT;
    for (const uint8_t *e = p + 4; e < p + len; e += SK_STREAM_ENTRY) {
        if (sk_array_grow(&r->pst, r->npst, &r->pst_cap, sizeof *r->pst, 64))
            return SKIPPR_NOMEM;
        r->pst[r->npst++] = (pend_stream){
            sk_get_u64(e), sk_get_u64(e + 8), sk_get_u64(e + 16),
            sk_get_u64(e + 24), sk_get_u32(e + 32)};
    }
    return SKIPPR_OK;
}

/* A TAIL frame, pending as a block is. */
static int pend_tail(replay *r, sk_wal_pos pos, const uint8_t *p, size_t len)
{
    if (len < 16)
        return SKIPPR_CORRUPT;
    if (sk_array_grow(&r->pb, r->npb, &r->pb_cap, sizeof *r->pb, 64))
        return SKIPPR_NOMEM;
    r->pb[r->npb++] = (pend_block){.id = sk_get_u64(p), .pos = pos,
                                   .bytes = len - 16, .tail = 1,
                                   .off = sk_get_u64(p + 8)};
    return SKIPPR_OK;
}

/* A NOTE frame: its bytes are copied, pending until its COMMIT. */
static int pend_note_frame(replay *r, const uint8_t *p, size_t len)
{
    if (len < 9)
        return SKIPPR_CORRUPT;
    if (sk_array_grow(&r->pn, r->npn, &r->pn_cap, sizeof *r->pn, 16))
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
static int pend_slice_frame(replay *r, int type, sk_wal_pos pos,
                            const uint8_t *p, size_t len)
{
    const uint8_t *end = p + len, *k, *q = p + 8, *root = NULL;
    size_t kl, rl = 0;
    if (len < 8 || rd_str(&q, end, &k, &kl) || end - q < 9)
        return SKIPPR_CORRUPT;
    const uint8_t *t = q + 9; /* the typed tag: form, header id, root */
    if (type == SK_WAL_SLICE) {
        const uint8_t *rp = t + 9;
        if (end - t < 9 || t[0] > SK_FORM_XML ||
            rd_str(&rp, end, &root, &rl) || rl > SK_SLICE_ROOT_MAX)
            return SKIPPR_CORRUPT;
    }
    if (sk_array_grow(&r->ps, r->nps, &r->ps_cap, sizeof *r->ps, 16))
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
    case SK_WAL_SLICE:
    case SK_WAL_SLICE_V1:
        return pend_slice_frame(r, type, pos, p, len);
    case SK_WAL_STREAM:
        return pend_streams(r, p, len);
    case SK_WAL_TAIL:
        return pend_tail(r, pos, p, len);
    case SK_WAL_NOTE:
        return pend_note_frame(r, p, len);
    case SK_WAL_STAGE:
        if (len != 32)
            return SKIPPR_CORRUPT;
        if (sk_array_grow(&r->pg, r->npg, &r->pg_cap, sizeof *r->pg, 16))
            return SKIPPR_NOMEM;
        r->pg[r->npg++] = (pend_stage){sk_get_u64(p), sk_get_u64(p + 8),
                                       sk_get_u64(p + 16),
                                       sk_get_u64(p + 24)};
        return SKIPPR_OK;
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
        r->pb[r->npb++] = (pend_block){.id = sk_get_u64(p), .pos = pos,
                                       .nrec = nrec,
                                       .bytes = part - 4 * nrec};
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
