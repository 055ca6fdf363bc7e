#include "state/state.h"
#include "state/unitrec_impl.h"
#include "state/state_impl.h"

#include <assert.h>
#include <inttypes.h>
#include <string.h>
#include <time.h>
#include <zstd.h>

#include "base/crc32c.h"
#include "base/fault.h"
#include "state/slice.h"


/* ---- writing ------------------------------------------------------------ */

sk_slice *sk_state_slice(sk_state *st, const char *name, size_t nlen,
                         uint64_t hash, const sk_slice_tag *tag, uint8_t kind)
{
    if (kind == SK_SLICE_DATA) {
        const char *ident = name;
        size_t ilen = nlen;
        if (tag && tag->form != SK_FORM_LINES &&
            (hash = st_ident(st, name, nlen, tag, &ident, &ilen), !ident))
            return NULL;
        sk_slice *s = sk_map_get(&st->open_by_key, ident, ilen, hash);
        if (s)
            return s;
    } else {
        for (size_t i = 0; i < st->nlive; i++)
            if (st->live[i]->kind == kind &&
                st->live[i]->state == SK_SLICE_OPEN)
                return st->live[i];
    }
    sk_slice *s = st_slice_new(st->next_slice_id, name, nlen, tag, kind,
                               (int64_t)time(NULL));
    if (!s)
        return NULL;
    s->crc_known = kind == SK_SLICE_DATA;
    s->streamed = kind == SK_SLICE_DATA &&
                  (st->grow.stream_forms >> s->tag.form & 1u) &&
                  !(s->tag.form == SK_FORM_XML && s->tag.root);
    if (st_live_add(st, s)) {
        st_slice_free(s);
        return NULL;
    }
    if (kind == SK_SLICE_DATA &&
        sk_map_put(&st->open_by_key, s->key, s->ident_len, s->key_hash, s)) {
        st_live_remove(st, s);
        st_slice_free(s);
        return NULL;
    }
    st->next_slice_id++;
    return s;
}

/* Compress n bytes into st->zbuf; returns the compressed size, or 0 when
 * it cannot (then the block is written plain). */
static size_t compress_block(sk_state *st, const void *p, size_t n)
{
    if (!st->zctx && !(st->zctx = ZSTD_createCCtx()))
        return 0;
    size_t bound = ZSTD_compressBound(n);
    skippr_buf_reset(&st->zbuf);
    if (skippr_buf_reserve(&st->zbuf, bound))
        return 0;
    size_t zn = ZSTD_compressCCtx(st->zctx, st->zbuf.data, bound, p, n,
                                  st->zstd_level);
    return ZSTD_isError(zn) ? 0 : zn;
}

static int write_block(sk_state *st, sk_slice *s)
{
    int rc;
    if (s->streamed) {
        /* Its buffer is the caller's to put (sk_state_due_puts); one left
         * here would be lost from the object. */
        if (st_parted(st, s) || !s->open_block.len || !s->durable_announced)
            return SKIPPR_OK;
        sk_error("state: a streamed slice's buffer was not put before "
                 "the flush (sk_state_due_puts)");
        return SKIPPR_INVAL;
    }
    if (s->open_nrec == 0)
        return SKIPPR_OK;
    if (!s->announced && (rc = st_announce(st, s)))
        return rc;
    uint8_t h[16];
    sk_put_u64(h, s->id);
    sk_put_u32(h + 8, s->open_nrec);
    sk_put_u32(h + 12, (uint32_t)s->open_block.len);
    sk_iov parts[] = {{h, 12}, {s->open_block.data, s->open_block.len}};
    int type = SK_WAL_BLOCK;
    if (st->zstd_level > 0) {
        /* Compressed when that is smaller; plain otherwise. */
        size_t zn = compress_block(st, s->open_block.data,
                                   s->open_block.len);
        if (zn > 0 && zn < s->open_block.len) {
            type = SK_WAL_BLOCKZ;
            parts[0].n = 16;
            parts[1] = (sk_iov){st->zbuf.data, zn};
        }
    }
    sk_wal_pos pos;
    if ((rc = sk_wal_append(st->wal, type, parts, 2, &pos)))
        return rc;
    if ((rc = st_add_block(s, pos)))
        return rc;
    st->open_block_bytes -= s->open_block.len;
    skippr_buf_reset(&s->open_block);
    s->open_nrec = 0;
    /* Keep a block-sized buffer for reuse; give back larger ones. */
    if (s->open_block.cap > 2 * st->block_bytes)
        st_release_block(st, s);
    return SKIPPR_OK;
}

int sk_state_append(sk_state *st, sk_slice *s, const void *rec, size_t len)
{
    int rc = sk_state_append_raw(st, s, rec, len);
    if ((rc == SKIPPR_OK || rc == SK_STATE_PUT_NOW) && s->crc_known) {
        s->out_crc = sk_crc32c(s->out_crc, rec, len);
        s->out_crc = sk_crc32c(s->out_crc, "\n", 1);
    }
    return rc;
}

void sk_state_fold_crc(sk_slice *s, uint32_t crc, uint32_t xpow)
{
    if (s->crc_known)
        s->out_crc = sk_crc32c_combine_x(s->out_crc, crc, xpow);
}

int sk_state_append_raw(sk_state *st, sk_slice *s, const void *rec,
                        size_t len)
{
    assert(s->state == SK_SLICE_OPEN);
    if (len > SK_WAL_MAX_PAYLOAD / 2)
        return SKIPPR_RANGE;
    if (s->streamed)
        return st_append_streamed(st, s, rec, len);
    uint8_t l[4];
    sk_put_u32(l, (uint32_t)len);
    /* A record that does not fit the block's buffer goes to the next
     * block, so the buffer keeps its size: block_bytes (or the pool's
     * class above it), taken once per slice. Growing by doubling would
     * copy for every block. The memory budget counts this capacity, not
     * just the bytes held. */
    int rc;
    if (s->open_nrec && s->open_block.len + 4 + len > s->open_block.cap &&
        (rc = write_block(st, s)))
        return rc;
    if (s->open_block.cap < s->open_block.len + 4 + len &&
        (rc = st_block_reserve(st, s, SK_MAX(st->block_bytes, 4 + len))))
        return rc;
    memcpy(s->open_block.data + s->open_block.len, l, 4);
    memcpy(s->open_block.data + s->open_block.len + 4, rec, len);
    s->open_block.len += 4 + len;
    s->open_nrec++;
    s->records++;
    s->bytes += len;
    st->open_block_bytes += 4 + len;
    if (s->open_block.len >= st->block_bytes)
        return write_block(st, s);
    return SKIPPR_OK;
}

int sk_state_flush_blocks(sk_state *st, int release)
{
    /* Due buffers of streamed slices went with the caller's puts
     * (sk_state_due_puts); those not announced yet are now, and must go
     * at the next flush. */
    int arc = st_announce_streams(st);
    if (arc)
        return arc;
    for (size_t i = 0; i < st->nlive; i++) {
        int rc = write_block(st, st->live[i]);
        if (rc)
            return rc;
        /* a parted slice's buffer holds its tail: sk_state_spill() */
        if (release && !st_parted(st, st->live[i]))
            st_release_block(st, st->live[i]);
    }
    return SKIPPR_OK;
}

int sk_state_commit(sk_state *st)
{
    return sk_state_commit_as(st, 1);
}

int sk_state_commit_as(sk_state *st, int durable)
{
    int rc = sk_state_flush_blocks(st, 0);
    if (!rc)
        rc = st_record_streams(st);
    if (rc)
        return rc;
    skippr_buf b;
    skippr_buf_init(&b, SK_WAL_MAX_PAYLOAD);
    uint8_t h[12] = {0}; /* filled in once the count is known */
    uint32_t n = 0;
    rc = skippr_buf_append(&b, h, sizeof h);
    size_t it = 0;
    sk_unit_rec *u;
    while (!rc && (u = sk_ledger_recent_next(st->ledger, &it))) {
        if (!u->dirty)
            continue;
        uint8_t num[21];
        uint8_t len[4];
        size_t il = strlen(u->id), vl = strlen(u->version);
        sk_put_u32(len, (uint32_t)il);
        rc = skippr_buf_append(&b, len, 4);
        if (!rc)
            rc = skippr_buf_append(&b, u->id, il);
        sk_put_u32(len, (uint32_t)vl);
        if (!rc)
            rc = skippr_buf_append(&b, len, 4);
        if (!rc)
            rc = skippr_buf_append(&b, u->version, vl);
        sk_put_u64(num, (uint64_t)u->size);
        sk_put_u64(num + 8, (uint64_t)u->offset);
        sk_put_u32(num + 16, u->flags);
        num[20] = 0;
        if (!rc)
            rc = skippr_buf_append(&b, num, sizeof num);
        n++;
    }
    if (!rc && n == 0 && !sk_wal_unsynced(st->wal)) {
        skippr_buf_free(&b); /* nothing new: no frame, no fsync */
        return SKIPPR_OK;
    }
    if (!rc) {
        sk_put_u64(b.data, st->next_slice_id);
        sk_put_u32(b.data + 8, n);
        sk_iov part = {b.data, b.len};
        rc = sk_wal_append(st->wal, SK_WAL_COMMIT, &part, 1, NULL);
    }
    skippr_buf_free(&b);
    if (rc)
        return rc;
    sk_crashpoint("commit");
    if ((rc = durable ? sk_wal_sync(st->wal) : sk_wal_writeback(st->wal)))
        return rc;
    it = 0;
    while ((u = sk_ledger_recent_next(st->ledger, &it)))
        u->dirty = 0;
    for (size_t i = 0; i < st->nlive; i++) {
        sk_slice *s = st->live[i];
        if (s->streamed && s->state == SK_SLICE_OPEN) {
            s->durable_len = s->pushed;
            s->durable_total = s->pushed + s->staged + s->walled;
            s->restate = 0;
        }
    }
    return SKIPPR_OK;
}

/* The records part of a BLOCKZ frame in scratch, decompressed into z. */
static int inflate_block(const sk_slice *s, const skippr_buf *scratch, skippr_buf *z)
{
    if (scratch->len < 16)
        return SKIPPR_CORRUPT;
    size_t want = sk_get_u32(scratch->data + 12);
    skippr_buf_reset(z);
    if (skippr_buf_reserve(z, want ? want : 1))
        return SKIPPR_NOMEM;
    size_t got = ZSTD_decompress(z->data, want, scratch->data + 16,
                                 scratch->len - 16);
    if (ZSTD_isError(got) || got != want) {
        sk_error("WAL block for slice %" PRIu64 " does not decompress: %s",
                 s->id, ZSTD_isError(got) ? ZSTD_getErrorName(got)
                                          : "wrong length");
        return SKIPPR_CORRUPT;
    }
    z->len = got;
    return SKIPPR_OK;
}

int sk_state_foreach_record(sk_state *st, const sk_slice *s, skippr_buf *scratch,
                            sk_record_fn fn, void *ud)
{
    skippr_buf z; /* decompressed records of a BLOCKZ frame */
    skippr_buf_init(&z, SK_WAL_MAX_PAYLOAD);
    int rc = SKIPPR_OK;
    for (size_t i = 0; i < s->nblocks && !rc; i++) {
        int type = 0;
        if ((rc = sk_wal_read(st->wal, s->blocks[i], scratch, &type)))
            break;
        if (scratch->len < 12 || sk_get_u64(scratch->data) != s->id) {
            sk_error("WAL block for slice %" PRIu64 " is malformed", s->id);
            rc = SKIPPR_CORRUPT;
            break;
        }
        uint32_t n = sk_get_u32(scratch->data + 8);
        const uint8_t *p = scratch->data + 12, *end = scratch->data +
                                                       scratch->len;
        if (type == SK_WAL_BLOCKZ) {
            if ((rc = inflate_block(s, scratch, &z)))
                break;
            p = z.data;
            end = z.data + z.len;
        }
        for (uint32_t k = 0; k < n && !rc; k++) {
            if (end - p < 4 || (size_t)(end - p - 4) < sk_get_u32(p)) {
                sk_error("WAL block for slice %" PRIu64 " is malformed",
                         s->id);
                rc = SKIPPR_CORRUPT;
                break;
            }
            uint32_t l = sk_get_u32(p);
            rc = fn(ud, p + 4, l);
            p += 4 + l;
        }
    }
    skippr_buf_free(&z);
    return rc;
}

typedef struct sum_ctx {
    uint64_t bytes;
    uint32_t crc;
    int dead;
    uint64_t n;
} sum_ctx;

static int sum_record(void *ud, const uint8_t *rec, size_t len)
{
    sum_ctx *c = ud;
    /* Dead-letter slices hold (meta, bytes) pairs; the object holds bytes. */
    if (c->dead && (c->n++ % 2) == 0)
        return SKIPPR_OK;
    c->crc = sk_crc32c(c->crc, rec, len);
    c->crc = sk_crc32c(c->crc, "\n", 1);
    c->bytes += len + 1;
    return SKIPPR_OK;
}

int sk_state_seal(sk_state *st, sk_slice *s, const char *ext,
                  const void *tail, size_t tail_len)
{
    assert(s->state == SK_SLICE_OPEN && s->open_nrec == 0);
    sum_ctx c = {0, 0, s->kind == SK_SLICE_DEAD, 0};
    if (s->crc_known) {
        /* Kept while appending: no need to read the slice back. */
        c.bytes = s->bytes + s->records;
        c.crc = s->out_crc;
    } else {
        skippr_buf scratch;
        skippr_buf_init(&scratch, SK_WAL_MAX_PAYLOAD + 64);
        int rc = sk_state_foreach_record(st, s, &scratch, sum_record, &c);
        skippr_buf_free(&scratch);
        if (rc)
            return rc;
    }
    assert(!s->streamed || tail_len == 0);
    if (tail_len) {
        c.crc = sk_crc32c(c.crc, tail, tail_len);
        c.bytes += tail_len;
    }
    return sk_state_seal_as(st, s, ext, c.bytes, c.crc);
}

char *sk_state_object_key(const sk_state *st, const sk_slice *s,
                          const char *ext)
{
    return sk_asprintf("%.*s/apply-%s-%010" PRIu64 "%s", (int)s->key_len,
                       s->key, st->state_id, s->id, ext);
}

int sk_state_seal_as(sk_state *st, sk_slice *s, const char *ext,
                     uint64_t bytes, uint32_t crc)
{
    /* A streamed slice's object is what the sink durably holds (and, for
     * a parted one, its TAIL frames). */
    assert(!s->streamed || (bytes == s->durable_total &&
                            s->pushed == s->durable_len));
    assert(s->state == SK_SLICE_OPEN && s->open_nrec == 0);
    int rc;
    sum_ctx c = {bytes, crc, 0, 0};
    char *key = sk_state_object_key(st, s, ext);
    if (!key)
        return SKIPPR_NOMEM;
    uint8_t h[12], t[20];
    sk_put_u64(h, s->id);
    sk_put_u32(h + 8, (uint32_t)strlen(key));
    sk_put_u64(t, c.bytes);
    sk_put_u64(t + 8, s->records);
    sk_put_u32(t + 16, c.crc);
    sk_iov parts[] = {{h, sizeof h}, {key, strlen(key)}, {t, sizeof t}};
    sk_wal_pos pos;
    rc = sk_wal_append(st->wal, SK_WAL_SEAL, parts, 3, &pos);
    if (rc) {
        sk_free(key);
        return rc;
    }
    sk_crashpoint("seal");
    if (s->kind == SK_SLICE_DATA)
        sk_map_del(&st->open_by_key, s->key, s->ident_len, s->key_hash);
    s->object_key = key;
    s->object_bytes = c.bytes;
    s->object_crc = c.crc;
    s->state = SK_SLICE_SEALED;
    /* Sealed slices take no more records; a parted one's buffer, which
     * may hold its whole tail, is kept for its finish (released at DONE). */
    if (!(s->streamed && st->grow.part_bytes))
        st_release_block(st, s);
    return SKIPPR_OK;
}

int sk_state_done(sk_state *st, sk_slice *s)
{
    assert(s->state == SK_SLICE_SEALED);
    int rc = st_write_done(st, s->id);
    if (rc)
        return rc;
    sk_crashpoint("done");
    st->open_block_bytes -= s->open_block.len;
    st_release_block(st, s);
    st_live_remove(st, s);
    st_slice_free(s);
    return SKIPPR_OK;
}

int sk_state_compact_ledger(sk_state *st)
{
    /* What the ledger's runs will say must not be ahead of the WAL. */
    int rc = sk_state_commit(st);
    if (rc)
        return rc;
    uint64_t t0 = sk_now_ns(), held = sk_ledger_recent_count(st->ledger);
    rc = sk_ledger_compact(st->ledger, st->next_slice_id);
    sk_debug("ledger: flushed %" PRIu64 " units in %.1f ms (%zu runs, %" PRIu64
             " records)", held, (double)(sk_now_ns() - t0) / 1e6,
             sk_ledger_runs(st->ledger), sk_ledger_file_count(st->ledger));
    return rc;
}

int sk_state_gc(sk_state *st)
{
    uint64_t keep = sk_wal_active_seg(st->wal);
    for (size_t i = 0; i < st->nlive; i++)
        if (st->live[i]->first_seg < keep)
            keep = st->live[i]->first_seg;
    if (sk_wal_first_seg(st->wal) >= keep)
        return SKIPPR_OK;
    /* Progress recorded in the segments about to go must be in the
     * ledger first. */
    int rc = sk_state_compact_ledger(st);
    if (rc)
        return rc;
    sk_crashpoint("gc");
    return sk_wal_drop_before(st->wal, keep);
}
