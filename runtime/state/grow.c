/* Streamed slices: data slices whose object grows in the sink while they
 * are open (sk_grow_hooks), so the WAL holds their progress and never
 * their bytes. What moves when:
 *   append   object bytes (record, newline) gather in the slice's buffer;
 *            a full buffer is put to the sink, once the slice's SLICE
 *            frame is durable (before that the buffer grows)
 *   flush    SLICE frames of new streamed slices, one fsync, then every
 *            buffer is put (st_announce_streams, st_push_block)
 *   commit   the sink's sync(), then a STREAM frame with each grown
 *            slice's length, records and CRC, then the COMMIT
 *   rotate   each open streamed slice is restated in the new segment, so
 *            that old segments can go
 * See docs/EXACTLY_ONCE.md for the crash cases.
 *
 * Thread: the pipeline thread, like the rest of the state.
 */
#include "state/state_impl.h"

#include <assert.h>
#include <string.h>

#include "base/fault.h"

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

/* Hand a streamed slice's buffered object bytes to the sink (once its
 * SLICE frame is durable; until then they wait in memory). */
int st_push_block(sk_state *st, sk_slice *s)
{
    if (s->open_block.len == 0 || !s->durable_announced)
        return SKIPPR_OK;
    int rc = st->grow.put(st->grow.ud, s, s->open_block.data,
                          s->open_block.len);
    if (rc)
        return rc;
    st_pushed(st, s);
    return SKIPPR_OK;
}

/* s's buffer is in the sink now. */
void st_pushed(sk_state *st, sk_slice *s)
{
    s->pushed += s->open_block.len;
    st->open_block_bytes -= s->open_block.len;
    sk_buf_reset(&s->open_block);
    s->open_nrec = 0;
    st->grow_unsynced = 1;
    if (s->open_block.cap > 2 * st->block_bytes)
        st_release_block(st, s);
}

/* Every streamed slice's buffer to the sink at once (a flush): through
 * grow.put_all when there is one, which may put them in parallel, each
 * slice still from one thread. On failure nothing more is recorded; the
 * run stops and recovery cuts the objects back. */
int st_push_all(sk_state *st)
{
    if (!st->grow.put_all) {
        for (size_t i = 0; i < st->nlive; i++)
            if (st->live[i]->streamed) {
                int rc = st_push_block(st, st->live[i]);
                if (rc)
                    return rc;
            }
        return SKIPPR_OK;
    }
    sk_slice **v = sk_calloc(st->nlive ? st->nlive : 1, sizeof *v);
    if (!v)
        return SKIPPR_NOMEM;
    size_t n = 0;
    for (size_t i = 0; i < st->nlive; i++) {
        sk_slice *s = st->live[i];
        if (s->streamed && s->durable_announced && s->open_block.len)
            v[n++] = s;
    }
    int rc = n ? st->grow.put_all(st->grow.ud, v, n) : SKIPPR_OK;
    for (size_t i = 0; i < n && !rc; i++)
        st_pushed(st, v[i]);
    sk_free(v);
    return rc;
}

/* A streamed slice buffers object bytes: the record and its newline. A
 * full block goes to the sink; before the slice's SLICE frame is durable
 * the buffer grows instead (the memory budget bounds it: the pipeline then
 * flushes, which announces and pushes). */
int st_append_streamed(sk_state *st, sk_slice *s, const void *rec,
                       size_t len)
{
    sk_buf *b = &s->open_block;
    int rc;
    if (b->len && b->len + len + 1 > b->cap && b->cap >= st->block_bytes &&
        s->durable_announced && (rc = st_push_block(st, s)))
        return rc;
    if (b->cap < b->len + len + 1) {
        /* From a page up to a block by doubling: thousands of slices of
         * a few records each must not hold a block of memory apiece. */
        size_t cap0 = b->cap;
        size_t want = SK_MAX(SK_MIN(SK_MAX((size_t)4096, 2 * cap0),
                                    (size_t)st->block_bytes),
                             b->len + len + 1);
        rc = sk_buf_reserve_exact(b, want);
        st->open_block_cap += b->cap - cap0;
        if (rc)
            return rc;
    }
    memcpy(b->data + b->len, rec, len);
    b->data[b->len + len] = '\n';
    b->len += len + 1;
    s->open_nrec++;
    s->records++;
    s->bytes += len;
    st->open_block_bytes += len + 1;
    if (b->len >= st->block_bytes && s->durable_announced)
        return st_push_block(st, s);
    return SKIPPR_OK;
}

/* What the sink holds of streamed slices is made durable (its sync()),
 * then recorded: a STREAM frame with each grown or restated slice's
 * length, records and CRC, which the COMMIT after it makes count. */
int st_record_streams(sk_state *st)
{
    if (st->grow_unsynced) {
        sk_crashpoint("stream_sync");
        int rc = st->grow.sync(st->grow.ud);
        if (rc)
            return rc;
        st->grow_unsynced = 0;
    }
    sk_buf b;
    sk_buf_init(&b, SK_WAL_MAX_PAYLOAD);
    uint8_t cnt[4] = {0};
    uint32_t n = 0;
    int rc = sk_buf_append(&b, cnt, sizeof cnt);
    for (size_t i = 0; i < st->nlive && !rc; i++) {
        sk_slice *s = st->live[i];
        if (!s->streamed || s->state != SK_SLICE_OPEN ||
            (s->pushed == s->durable_len && !s->restate))
            continue;
        /* Every record appended is pushed: flush_blocks ran. */
        assert(s->open_block.len == 0 || !s->durable_announced);
        uint8_t e[28];
        sk_put_u64(e, s->id);
        sk_put_u64(e + 8, s->pushed);
        sk_put_u64(e + 16, s->records);
        sk_put_u32(e + 24, s->out_crc);
        rc = sk_buf_append(&b, e, sizeof e);
        n++;
    }
    if (!rc && n) {
        sk_put_u32(b.data, n);
        sk_iov part = {b.data, b.len};
        rc = sk_wal_append(st->wal, SK_WAL_STREAM, &part, 1, NULL);
    }
    sk_buf_free(&b);
    return rc;
}

int sk_state_forget(sk_state *st, sk_slice *s)
{
    assert(s->state == SK_SLICE_OPEN && s->streamed && s->records == 0);
    int rc = s->announced ? st_write_done(st, s->id) : SKIPPR_OK;
    if (rc)
        return rc;
    sk_map_del(&st->open_by_key, s->key, s->key_len, s->key_hash);
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
    }
    return rc;
}
