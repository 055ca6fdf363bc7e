/* Streamed slices: data slices whose object grows in the sink while they
 * are open (sk_grow_config), so the WAL holds their progress and never
 * their bytes. What moves when:
 *   append   object bytes (record, newline) gather in the slice's buffer;
 *            a full buffer is due to go to the sink (the append says so
 *            and the caller puts it), once the slice's SLICE frame is
 *            durable (before that the buffer grows)
 *   flush    SLICE frames of new streamed slices, one fsync, then every
 *            due buffer is put: by the caller (sk_state_due_puts,
 *            sk_state_pushed; streamed.h gives the order)
 *   commit   the caller syncs the sink, then a STREAM frame with each
 *            grown slice's length, records and CRC, then the COMMIT
 *   rotate   each open streamed slice is restated in the new segment, so
 *            that old segments can go
 * Parted slices (part_bytes > 0: an S3 multipart upload) differ: a
 * put is a part, durable when it returns, so bytes wait in memory until
 * there are part_bytes of them; at a commit, whatever no part holds yet
 * goes into TAIL frames after the STREAM frame, and the sink's notes of
 * new parts into NOTE frames before it. A spill then frees the memory;
 * the next part reads the tail back. A put hands over whole parts and
 * retires every TAIL frame of the slice; what is left over stays in
 * memory until the next commit saves it again (replay retires every
 * TAIL frame before the length a STREAM entry gives the sink).
 * See docs/EXACTLY_ONCE.md for the crash cases.
 *
 * Thread: the pipeline thread, like the rest of the state.
 */
#include "state/streamed.h"
#include "state/state_impl.h"

#include <assert.h>
#include <inttypes.h>
#include <string.h>

#include "base/fault.h"
#include "state/slice.h"

int st_parted(const sk_state *st, const sk_slice *s)
{
    return s->streamed && st->grow.part_bytes > 0;
}

static uint64_t unput(const sk_slice *s)
{
    return s->mem_off + s->open_block.len - s->pushed;
}

int sk_state_spilled(const sk_state *st, const sk_slice *s)
{
    return st_parted(st, s) && s->mem_off != s->pushed;
}

int sk_state_copy_next(const sk_slice *s, sk_stage_piece *p)
{
    if (!s->nstaged || s->stage_off[0] != s->pushed ||
        s->stage_len[0] < SKIPPR_COPY_MIN_BYTES)
        return 0;
    *p = (sk_stage_piece){s->stage_off[0], s->stage_len[0], s->stage_tag[0]};
    return 1;
}

void sk_state_copied(sk_state *st, sk_slice *s)
{
    assert(s->nstaged && s->stage_off[0] == s->pushed);
    s->pushed += s->stage_len[0];
    st_drop_stages(s, s->pushed);
    if (s->mem_off < s->pushed) { /* memory lets go of the piece's bytes */
        size_t k = (size_t)SK_MIN(s->pushed - s->mem_off,
                                  (uint64_t)s->open_block.len);
        memmove(s->open_block.data, s->open_block.data + k,
                s->open_block.len - k);
        s->open_block.len -= k;
        st->open_block_bytes -= k;
        s->mem_off += k;
    }
}

int sk_state_unspill_begin(sk_state *st, const sk_slice *s, skippr_buf *b)
{
    skippr_buf_init(b, SK_WAL_MAX_PAYLOAD - 64);
    return sk_bufpool_reserve(&st->pool, b, (size_t)unput(s),
                              st->open_block_cap);
}

int sk_state_unspill_end(sk_state *st, sk_slice *s, skippr_buf *b, int rc)
{
    if (!rc && b->len != s->mem_off - s->pushed)
        rc = SKIPPR_CORRUPT;
    if (!rc) /* then what memory holds */
        rc = skippr_buf_append(b, s->open_block.data, s->open_block.len);
    if (rc) {
        sk_bufpool_release(&st->pool, b, st->open_block_cap);
        return rc;
    }
    st->open_block_cap += b->cap;
    st->open_block_bytes += s->mem_off - s->pushed;
    st_release_block(st, s);
    s->open_block = *b;
    s->mem_off = s->pushed;
    return SKIPPR_OK;
}

/* Whether s's buffer goes to the sink at a flush. */
static int due_put(const sk_state *st, const sk_slice *s)
{
    if (!s->durable_announced || s->state != SK_SLICE_OPEN)
        return 0;
    if (st_parted(st, s))
        return unput(s) >= st->grow.part_bytes;
    return s->open_block.len > 0;
}

/* Before the sink gets a streamed slice's first byte, its SLICE frame is
 * durable, so that a crash before the next commit leaves a growing object
 * that recovery can name and remove. One fsync for all new ones. */
int st_announce_streams(sk_state *st)
{
    int any = 0;
    for (size_t i = 0; i < st->nlive; i++) {
        sk_slice *s = st->live[i];
        if (!s->streamed || s->durable_announced || s->open_block.len == 0)
            continue;
        int rc = st_announce(st, s);
        if (rc)
            return rc;
        any = 1;
    }
    if (!any)
        return SKIPPR_OK;
    int rc = sk_wal_sync(st->wal);
    if (rc)
        return rc;
    for (size_t i = 0; i < st->nlive; i++)
        if (st->live[i]->streamed && st->live[i]->announced)
            st->live[i]->durable_announced = 1;
    return SKIPPR_OK;
}

/* Give back most of a parted slice's buffer after its parts went: what
 * is left is copied into one twice its size. On allocation failure it
 * keeps the big one. */
static void shrink_block(sk_state *st, sk_slice *s)
{
    skippr_buf b;
    skippr_buf_init(&b, SK_WAL_MAX_PAYLOAD - 64);
    if (sk_bufpool_reserve(&st->pool, &b,
                           SK_MAX(2 * s->open_block.len, (size_t)4096),
                           st->open_block_cap) ||
        skippr_buf_append(&b, s->open_block.data, s->open_block.len)) {
        sk_bufpool_release(&st->pool, &b, st->open_block_cap);
        return;
    }
    st->open_block_cap += b.cap;
    st_release_block(st, s);
    s->open_block = b;
}

uint64_t sk_state_put_len(const sk_state *st, const sk_slice *s)
{
    if (!st_parted(st, s))
        return s->open_block.len;
    uint64_t pb = st->grow.part_bytes;
    return s->open_block.len / pb * pb;
}

/* s's buffer (a parted slice's whole parts) is in the sink now. A parted
 * slice's buffer is given back down to twice what is left, unless keep: a
 * slice that filled a part as records came will fill the next one, and
 * growing a buffer from a page to a part again for every part costs a
 * copy per doubling (and, under ASan, that much quarantined memory). The
 * budget still bounds what is kept: flushes under pressure do not keep. */
void st_pushed(sk_state *st, sk_slice *s, int keep)
{
    if (st_parted(st, s)) {
        /* The rest stays in memory, saved again by the next commit: the
         * TAIL frames that held it go with those the parts took. */
        uint64_t k = sk_state_put_len(st, s);
        size_t rest = s->open_block.len - (size_t)k;
        memmove(s->open_block.data, s->open_block.data + k, rest);
        s->open_block.len = rest;
        s->pushed += k;
        st->open_block_bytes -= k;
        st_drop_tails(s, UINT64_MAX);
        st_drop_stages(s, UINT64_MAX);
        s->walled = 0;
        s->mem_off = s->pushed;
        if (!rest)
            st_release_block(st, s);
        else if (s->open_block.cap > 4 * SK_MAX(rest, (size_t)4096) &&
                 (!keep || s->open_block.cap > 2 * st->grow.part_bytes))
            shrink_block(st, s);
        return;
    }
    s->pushed += s->open_block.len;
    st->open_block_bytes -= s->open_block.len;
    skippr_buf_reset(&s->open_block);
    s->open_nrec = 0;
    st->grow_unsynced = 1;
    if (s->open_block.cap > 2 * st->block_bytes)
        st_release_block(st, s);
}

int sk_state_announce(sk_state *st)
{
    return st_announce_streams(st);
}

int sk_state_due_puts(sk_state *st, sk_slice ***out, size_t *n)
{
    *out = NULL;
    *n = 0;
    sk_slice **v = sk_calloc(st->nlive ? st->nlive : 1, sizeof *v);
    if (!v)
        return SKIPPR_NOMEM;
    for (size_t i = 0; i < st->nlive; i++) {
        sk_slice *s = st->live[i];
        if (s->streamed && due_put(st, s))
            v[(*n)++] = s;
    }
    *out = v;
    return SKIPPR_OK;
}

void sk_state_pushed(sk_state *st, sk_slice *const *v, size_t n)
{
    for (size_t i = 0; i < n; i++)
        st_pushed(st, v[i], 0);
}

void sk_state_pushed_one(sk_state *st, sk_slice *s)
{
    st_pushed(st, s, 1);
}

int sk_state_sink_unsynced(const sk_state *st)
{
    return st->grow_unsynced;
}

void sk_state_sink_synced(sk_state *st)
{
    st->grow_unsynced = 0;
}

/* A streamed slice buffers object bytes: the record and its newline. A
 * full block is due to go to the sink (the caller puts it: streamed.h,
 * SK_STATE_PUT_*); before the slice's SLICE frame is durable the buffer
 * grows instead (the memory budget bounds it: the pipeline then flushes,
 * which announces and puts). */
int st_append_streamed(sk_state *st, sk_slice *s, const void *rec,
                       size_t len)
{
    skippr_buf *b = &s->open_block;
    int rc;
    int parted = st_parted(st, s);
    /* A full buffer goes to the sink first: a block, or a parted slice's
     * whole parts (so that it holds at most about a part; flushes under
     * memory pressure put many slices' parts at once, in parallel). */
    uint64_t full = parted ? st->grow.part_bytes : st->block_bytes;
    if (b->len && b->len + len + 1 > b->cap && b->cap >= full &&
        (!parted || b->len >= full) && s->durable_announced)
        return SK_STATE_PUT_FIRST;
    if (b->cap < b->len + len + 1) {
        /* From a page up to a block by doubling: thousands of slices of
         * a few records each must not hold a block of memory apiece. A
         * parted slice doubles towards a part, then takes a part and an
         * eighth in one step, room for the part and the record that
         * crosses its end; it keeps that size from part to part (see
         * st_pushed). Until its SLICE frame is durable it may have to
         * grow on, a part at a time. */
        size_t cap0 = b->cap;
        size_t grown = SK_MAX((size_t)4096, 2 * cap0);
        size_t pb = (size_t)st->grow.part_bytes;
        if (!parted)
            grown = SK_MIN(grown, (size_t)st->block_bytes);
        else if (cap0 > pb)
            grown = cap0 + pb;
        else if (grown > pb / 2)
            grown = pb + pb / 8;
        if ((rc = st_block_reserve(st, s, SK_MAX(grown, b->len + len + 1))))
            return rc;
    }
    memcpy(b->data + b->len, rec, len);
    b->data[b->len + len] = '\n';
    b->len += len + 1;
    if (!parted) /* a parted slice's buffer is not records but bytes */
        s->open_nrec++;
    s->records++;
    s->bytes += len;
    st->open_block_bytes += len + 1;
    if (!parted && b->len >= st->block_bytes && s->durable_announced)
        return SK_STATE_PUT_NOW;
    if (parted && b->len >= st->grow.part_bytes) {
        /* A part is ready: it goes now rather than waiting for a flush to
         * announce the slice, so that the buffer stays about a part. One
         * fsync per slice that grows this big. */
        if (!s->durable_announced) {
            if ((!s->announced && (rc = st_announce(st, s))) ||
                (rc = sk_wal_sync(st->wal)))
                return rc;
            s->durable_announced = 1;
        }
        return SK_STATE_PUT_NOW;
    }
    return SKIPPR_OK;
}

/* NOTE frames: the sink's notes of parted slices' new parts (all of them
 * for a restated slice). */
static int record_notes(sk_state *st)
{
    for (size_t i = 0; i < st->nlive; i++) {
        sk_slice *s = st->live[i];
        size_t from = s->notes_replace ? 0 : s->notes_rec;
        if (!st_parted(st, s) || s->notes.len == from)
            continue;
        uint8_t h[9];
        sk_put_u64(h, s->id);
        h[8] = s->notes_replace ? 1 : 0;
        sk_iov parts[] = {{h, sizeof h},
                          {s->notes.data + from, s->notes.len - from}};
        int rc = sk_wal_append(st->wal, SK_WAL_NOTE, parts, 2, NULL);
        if (rc)
            return rc;
        s->notes_rec = s->notes.len;
        s->notes_replace = 0;
    }
    return SKIPPR_OK;
}

/* Where parted slice s's bytes after its staging pieces start, and where
 * its bytes end. */
static uint64_t unstaged_from(const sk_slice *s)
{
    return s->pushed + s->staged;
}

static uint64_t bytes_end(const sk_slice *s)
{
    return s->mem_off + s->open_block.len;
}

int sk_state_tails_to_stage(sk_state *st, sk_slice ***out, size_t *n)
{
    *out = NULL;
    *n = 0;
    if (!st->grow.stages || !st->grow.wal_budget)
        return SKIPPR_OK;
    sk_slice **v = sk_calloc(st->nlive ? st->nlive : 1, sizeof *v);
    if (!v)
        return SKIPPR_NOMEM;
    /* Tails get half the disk budget: the rest is for retired frames
     * until their segment goes, and the ledger. */
    uint64_t disk = sk_wal_disk_bytes(st->wal);
    for (size_t i = 0; i < st->nlive; i++) {
        sk_slice *s = st->live[i];
        if (!st_parted(st, s) || s->state != SK_SLICE_OPEN)
            continue;
        uint64_t need = bytes_end(s) - (unstaged_from(s) + s->walled);
        if (!need)
            continue;
        if (disk + need > st->grow.wal_budget / 2)
            v[(*n)++] = s;
        else
            disk += need;
    }
    *out = v;
    return SKIPPR_OK;
}

int sk_state_read_unstaged(sk_state *st, const sk_slice *s, skippr_buf *out,
                           skippr_buf *scratch)
{
    uint64_t from = unstaged_from(s);
    int rc = SKIPPR_OK;
    if (s->mem_off > from) /* what memory no longer has */
        rc = sk_state_read_tail(st, s, from, s->mem_off, out, scratch);
    uint64_t skip = from > s->mem_off ? from - s->mem_off : 0;
    if (!rc && skip < s->open_block.len)
        rc = skippr_buf_append(out, s->open_block.data + skip,
                               s->open_block.len - (size_t)skip);
    return rc;
}

/* TAIL frames: each parted slice's bytes that are in neither a part nor
 * an earlier TAIL frame nor a staging piece (those that would not fit the
 * disk budget the caller staged first: sk_state_tails_to_stage). */
static int record_tails(sk_state *st)
{
    for (size_t i = 0; i < st->nlive; i++) {
        sk_slice *s = st->live[i];
        if (!st_parted(st, s) || s->state != SK_SLICE_OPEN)
            continue;
        uint64_t from = s->pushed + s->staged + s->walled; /* >= mem_off */
        uint64_t end = s->mem_off + s->open_block.len;
        if (end == from)
            continue;
        uint8_t h[16];
        sk_put_u64(h, s->id);
        sk_put_u64(h + 8, from);
        sk_iov parts[] = {{h, sizeof h},
                          {s->open_block.data + (from - s->mem_off),
                           (size_t)(end - from)}};
        sk_wal_pos pos;
        int rc = sk_wal_append(st->wal, SK_WAL_TAIL, parts, 2, &pos);
        if (!rc)
            rc = st_add_tail(s, pos, from);
        if (rc)
            return rc;
        s->walled += end - from;
    }
    return SKIPPR_OK;
}

void sk_state_spill(sk_state *st)
{
    for (size_t i = 0; i < st->nlive; i++) {
        sk_slice *s = st->live[i];
        if (!st_parted(st, s) || !s->open_block.len ||
            s->mem_off + s->open_block.len !=
                s->pushed + s->staged + s->walled)
            continue;
        s->mem_off += s->open_block.len;
        st->open_block_bytes -= s->open_block.len;
        skippr_buf_reset(&s->open_block);
        s->open_nrec = 0;
        st_release_block(st, s);
    }
}

/* The STAGE frame of s's piece i. */
static int write_stage(sk_state *st, const sk_slice *s, size_t i)
{
    uint8_t b[32];
    sk_put_u64(b, s->id);
    sk_put_u64(b + 8, s->stage_off[i]);
    sk_put_u64(b + 16, s->stage_len[i]);
    sk_put_u64(b + 24, s->stage_tag[i]);
    sk_iov part = {b, sizeof b};
    return sk_wal_append(st->wal, SK_WAL_STAGE, &part, 1, NULL);
}

/* s's bytes [off, off + len), which end at its last byte, are a staging
 * piece now: its STAGE frame, and its TAIL frames retire. */
static int record_piece(sk_state *st, sk_slice *s, uint64_t off,
                        uint64_t len, uint64_t tag)
{
    int rc = st_add_stage(s, off, len, tag);
    if (!rc)
        rc = write_stage(st, s, s->nstaged - 1);
    if (rc)
        return rc;
    st_drop_tails(s, UINT64_MAX);
    s->walled = 0;
    return SKIPPR_OK;
}

int sk_state_staged(sk_state *st, sk_slice *s, uint64_t tag)
{
    assert(st_parted(st, s) && bytes_end(s) > unstaged_from(s));
    return record_piece(st, s, unstaged_from(s),
                        bytes_end(s) - unstaged_from(s), tag);
}

/* What the sink holds of streamed slices, made durable by the caller's
 * sync of the sink (sk_state_sink_synced), is recorded: a STREAM frame
 * with each grown or restated slice's length, records and CRC, which the
 * COMMIT after it makes count. */
int st_record_streams(sk_state *st)
{
    if (st->grow_unsynced) {
        /* A caller's bug, not a fault: what it did not sync may be lost. */
        sk_error("state: a commit with puts the sink has not synced "
                 "(sk_state_sink_synced)");
        return SKIPPR_INVAL;
    }
    int nrc = record_notes(st);
    if (nrc)
        return nrc;
    skippr_buf b;
    skippr_buf_init(&b, SK_WAL_MAX_PAYLOAD);
    uint8_t cnt[4] = {0};
    uint32_t n = 0;
    int rc = skippr_buf_append(&b, cnt, sizeof cnt);
    for (size_t i = 0; i < st->nlive && !rc; i++) {
        sk_slice *s = st->live[i];
        if (!s->streamed || s->state != SK_SLICE_OPEN)
            continue;
        uint64_t total = st_parted(st, s) ? s->mem_off + s->open_block.len
                                          : s->pushed;
        if (s->pushed == s->durable_len && total == s->durable_total &&
            !s->restate)
            continue;
        /* Every record appended is pushed (flush_blocks ran), or for a
         * parted slice, goes into a TAIL frame next. */
        assert(st_parted(st, s) || s->open_block.len == 0 ||
               !s->durable_announced);
        uint8_t e[SK_STREAM_ENTRY];
        sk_put_u64(e, s->id);
        sk_put_u64(e + 8, s->pushed);
        sk_put_u64(e + 16, total);
        sk_put_u64(e + 24, s->records);
        sk_put_u32(e + 32, s->out_crc);
        rc = skippr_buf_append(&b, e, sizeof e);
        n++;
    }
    if (!rc && n) {
        sk_put_u32(b.data, n);
        sk_iov part = {b.data, b.len};
        rc = sk_wal_append(st->wal, SK_WAL_STREAM, &part, 1, NULL);
    }
    skippr_buf_free(&b);
    return rc ? rc : record_tails(st);
}

int sk_state_forget(sk_state *st, sk_slice *s)
{
    assert(s->state == SK_SLICE_OPEN && s->streamed && s->records == 0);
    int rc = s->announced ? st_write_done(st, s->id) : SKIPPR_OK;
    if (rc)
        return rc;
    sk_map_del(&st->open_by_key, s->key, s->ident_len, s->key_hash);
    st_release_block(st, s);
    st_live_remove(st, s);
    st_slice_free(s);
    return SKIPPR_OK;
}

void sk_state_orphans_clear(sk_state *st)
{
    for (size_t i = 0; i < st->norphans; i++)
        st_slice_free(st->orphans[i]);
    sk_free(st->orphans);
    st->orphans = NULL;
    st->norphans = 0;
}

int sk_state_rotate(sk_state *st)
{
    int rc = sk_wal_rotate(st->wal);
    for (size_t i = 0; i < st->nlive && !rc; i++) {
        sk_slice *s = st->live[i];
        if (!s->streamed || s->state != SK_SLICE_OPEN || !s->announced)
            continue;
        rc = st_announce(st, s);
        s->restate = 1;
        s->notes_replace = s->notes.len > 0;
        for (size_t k = 0; k < s->nstaged && !rc; k++)
            rc = write_stage(st, s, k);
    }
    return rc;
}
