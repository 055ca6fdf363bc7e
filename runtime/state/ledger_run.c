#include "state/ledger_run.h"
#include "state/unitrec_impl.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/crc32c.h"
#include "base/fsio.h"
#include "base/varint.h"

#define RUN_MAGIC "SKLRUN02"    /* blocks in columns */
#define RUN_MAGIC_V1 "SKLRUN01" /* blocks of whole records, still read */
#define END_MAGIC "SKLRUNEN"
#define BLOCK_RAW (64u * 1024u) /* a block is cut past this */
/* plus one largest record and the column lengths */
#define RAW_MAX (BLOCK_RAW + 3u * 65536u + 32u)
#define FOOTER_FIXED 64u
#define FOOTER_MAX (FOOTER_FIXED + 2u * SK_RUN_ID_MAX)
#define INDEX_MAX ((uint64_t)1 << 30) /* 1 GiB: ~12 billion records */

static size_t shared_len(const char *a, size_t an, const char *b, size_t bn)
{
    size_t n = an < bn ? an : bn, i = 0;
    while (i < n && a[i] == b[i])
        i++;
    return i;
}

/* ---- meta --------------------------------------------------------------- */

void sk_run_meta_free(sk_run_meta *m)
{
    sk_free(m->first);
    sk_free(m->last);
    m->first = m->last = NULL;
}

static int corrupt(const char *path, const char *what)
{
    sk_error("ledger run %s: %s; the file is damaged", path, what);
    return SKIPPR_CORRUPT;
}

int sk_run_read_meta(const char *path, sk_run_meta *m)
{
    memset(m, 0, sizeof *m);
    int fd = -1, rc = sk_io_open(path, O_RDONLY, 0, &fd);
    if (rc)
        return rc;
    uint8_t *f = NULL;
    uint8_t t[16];
    off_t end = lseek(fd, 0, SEEK_END);
    size_t got = 0;
    if (end < 8 + 4 + 16 ||
        (rc = sk_io_pread_all(fd, t, 16, end - 16, &got, path)) ||
        got != 16 || memcmp(t + 8, END_MAGIC, 8) != 0) {
        rc = rc ? rc : corrupt(path, "no end mark");
        goto out;
    }
    size_t flen = sk_get_u32(t);
    if (flen < FOOTER_FIXED || flen > FOOTER_MAX ||
        (off_t)flen > end - 16 - 12) {
        rc = corrupt(path, "bad footer length");
        goto out;
    }
    if (!(f = sk_malloc(flen))) {
        rc = SKIPPR_NOMEM;
        goto out;
    }
    if ((rc = sk_io_pread_all(fd, f, flen, end - 16 - (off_t)flen, &got,
                              path)))
        goto out;
    if (got != flen || sk_crc32c(0, f, flen) != sk_get_u32(t + 4)) {
        rc = corrupt(path, "bad footer");
        goto out;
    }
    m->lo = sk_get_u64(f);
    m->hi = sk_get_u64(f + 8);
    m->next_slice_id = sk_get_u64(f + 16);
    m->count = sk_get_u64(f + 24);
    m->done = sk_get_u64(f + 32);
    m->level = sk_get_u32(f + 40);
    size_t a = sk_get_u16(f + 44), b = sk_get_u16(f + 46);
    m->index_off = sk_get_u64(f + 48);
    m->index_n = sk_get_u32(f + 56);
    m->index_len = sk_get_u32(f + 60);
    if (FOOTER_FIXED + a + b != flen || (m->count > 0) != (a > 0 && b > 0) ||
        m->index_len < 4 || m->index_len > INDEX_MAX ||
        m->index_off + m->index_len > (uint64_t)end) {
        rc = corrupt(path, "bad footer ids");
        goto out;
    }
    if (m->count > 0 &&
        (!(m->first = sk_strndup((const char *)f + FOOTER_FIXED, a)) ||
         !(m->last = sk_strndup((const char *)f + FOOTER_FIXED + a, b)))) {
        sk_run_meta_free(m);
        rc = SKIPPR_NOMEM;
    }
out:
    sk_free(f);
    close(fd);
    return rc;
}

/* ---- cursor ------------------------------------------------------------- */

int sk_run_cursor_open(sk_run_cursor *c, const char *path, ZSTD_DCtx *dctx)
{
    sk_run_cursor_close(c);
    c->path = path;
    c->dctx = dctx;
    c->f = fopen(path, "rb");
    if (!c->f) {
        sk_error("open ledger run %s: %s", path, strerror(errno));
        return SKIPPR_IO;
    }
    uint8_t h[8];
    if (fread(h, 1, 8, c->f) != 8)
        return corrupt(path, "bad magic");
    if (memcmp(h, RUN_MAGIC, 8) == 0)
        c->columns = 1;
    else if (memcmp(h, RUN_MAGIC_V1, 8) == 0)
        c->columns = 0;
    else
        return corrupt(path, "bad magic");
    return SKIPPR_OK;
}

int sk_run_cursor_seek(sk_run_cursor *c, const char *path,
                       const sk_run_meta *m, ZSTD_DCtx *dctx, const char *id)
{
    int rc = sk_run_cursor_open(c, path, dctx);
    if (rc || m->index_n == 0)
        return rc;
    uint8_t *ix = sk_malloc(m->index_len);
    if (!ix)
        return SKIPPR_NOMEM;
    uint64_t best = 8; /* the first block */
    if (fseeko(c->f, (off_t)m->index_off, SEEK_SET) != 0 ||
        fread(ix, 1, m->index_len, c->f) != m->index_len ||
        sk_crc32c(0, ix, m->index_len - 4) !=
            sk_get_u32(ix + m->index_len - 4)) {
        sk_free(ix);
        return corrupt(path, "bad block index");
    }
    /* Entries are in id order: the last whose first id is <= id. A linear
     * pass over the index (about 40 KiB a million records) is cheaper than
     * building a table to bisect. */
    size_t pos = 0, end = m->index_len - 4;
    for (uint32_t i = 0; i < m->index_n; i++) {
        if (end - pos < 10) {
            sk_free(ix);
            return corrupt(path, "bad block index");
        }
        uint64_t off = sk_get_u64(ix + pos);
        size_t kl = sk_get_u16(ix + pos + 8);
        if (kl > end - pos - 10) {
            sk_free(ix);
            return corrupt(path, "bad block index");
        }
        size_t idl = strlen(id), n = kl < idl ? kl : idl;
        int cmp = memcmp(ix + pos + 10, id, n);
        if (cmp > 0 || (cmp == 0 && kl > idl))
            break; /* this block starts after id */
        best = off;
        pos += 10 + kl;
    }
    sk_free(ix);
    if (fseeko(c->f, (off_t)best, SEEK_SET) != 0)
        return corrupt(path, "block index points past the file");
    return SKIPPR_OK;
}

void sk_run_cursor_close(sk_run_cursor *c)
{
    if (c->f)
        fclose(c->f);
    c->f = NULL;
    c->raw_len = c->pos = c->ipos = c->vpos = 0;
    c->mend = c->iend = c->vend = 0;
    c->left_in_block = c->in_block = 0;
    c->read = 0;
    c->valid = c->ended = 0;
}

/* Free the cursor's buffers too (after sk_run_cursor_close). */
static void cursor_free(sk_run_cursor *c)
{
    sk_run_cursor_close(c);
    sk_free(c->stored);
    sk_free(c->raw);
    sk_free(c->rec.id);
    sk_free(c->rec.version);
    memset(c, 0, sizeof *c);
}

static int grow(uint8_t **p, size_t *cap, size_t n)
{
    if (n <= *cap)
        return 0;
    uint8_t *q = sk_realloc(*p, n);
    if (!q)
        return -1;
    *p = q;
    *cap = n;
    return 0;
}

static int load_block(sk_run_cursor *c)
{
    uint8_t h[16];
    if (fread(h, 1, 4, c->f) != 4)
        return corrupt(c->path, "cut before its end");
    size_t s = sk_get_u32(h);
    if (s == 0) {
        c->ended = 1;
        return SKIPPR_OK;
    }
    if (fread(h + 4, 1, 12, c->f) != 12)
        return corrupt(c->path, "cut block header");
    size_t r = sk_get_u32(h + 4);
    uint32_t n = sk_get_u32(h + 8);
    if (s > ZSTD_compressBound(RAW_MAX) || r > RAW_MAX || n == 0)
        return corrupt(c->path, "bad block header");
    /* Buffers grow to the largest block read: about 64 KiB each. */
    if (grow(&c->stored, &c->stored_cap, s) || grow(&c->raw, &c->raw_cap, r))
        return SKIPPR_NOMEM;
    if (fread(c->stored, 1, s, c->f) != s ||
        sk_crc32c(0, c->stored, s) != sk_get_u32(h + 12))
        return corrupt(c->path, "bad block");
    size_t got = ZSTD_decompressDCtx(c->dctx, c->raw, r, c->stored, s);
    if (ZSTD_isError(got) || got != r)
        return corrupt(c->path, "block does not decompress");
    c->raw_len = r;
    c->pos = 0;
    c->left_in_block = c->in_block = n;
    c->mend = c->iend = c->vend = r; /* one stream of whole records */
    if (c->columns) {
        uint64_t ml, il;
        if (sk_get_varint(c->raw, r, &c->pos, &ml) ||
            sk_get_varint(c->raw, r, &c->pos, &il) || ml > r - c->pos ||
            il > r - c->pos - ml)
            return corrupt(c->path, "bad block columns");
        c->mend = c->pos + (size_t)ml;
        c->ipos = c->iend = c->mend;
        c->iend += (size_t)il;
        c->vpos = c->iend;
    }
    return SKIPPR_OK;
}

/* Replace the first `keep` bytes' tail of *s (capacity *cap) with add. */
static int set_tail(char **s, size_t *cap, size_t keep, const uint8_t *add,
                  size_t n)
{
    if (keep + n + 1 > *cap) {
        size_t nc = keep + n + 1 < 64 ? 64 : (keep + n + 1) * 2;
        char *t = sk_realloc(*s, nc);
        if (!t)
            return SKIPPR_NOMEM;
        *s = t;
        *cap = nc;
    }
    memcpy(*s + keep, add, n);
    (*s)[keep + n] = '\0';
    return SKIPPR_OK;
}

/* The positions of a record's three parts in the block: in a v2 block,
 * the id's and the version's added bytes come from their own columns; in
 * a v1 block everything follows in one stream (all three are c->pos). */
static size_t *id_pos(sk_run_cursor *c)
{
    return c->columns ? &c->ipos : &c->pos;
}

static size_t *ver_pos(sk_run_cursor *c)
{
    return c->columns ? &c->vpos : &c->pos;
}

/* The next n added bytes at *pos (below end) onto the first keep bytes
 * of *s. */
static int take_tail(sk_run_cursor *c, size_t *pos, size_t end, char **s,
                     size_t *cap, uint64_t keep, uint64_t n)
{
    if (n > end - *pos)
        return corrupt(c->path, "bad record");
    int rc = set_tail(s, cap, (size_t)keep, c->raw + *pos, (size_t)n);
    *pos += (size_t)n;
    return rc;
}

int sk_run_cursor_step(sk_run_cursor *c)
{
    c->valid = 0;
    if (!c->f || c->ended)
        return SKIPPR_OK;
    int rc;
    if (c->left_in_block == 0) {
        if ((rc = load_block(c)) || c->ended)
            return rc;
    }
    int first = c->left_in_block == c->in_block;
    uint64_t ish, ian, vsh, van, size, off, flags;
    const uint8_t *p = c->raw;
    if (sk_get_varint(p, c->mend, &c->pos, &ish) ||
        sk_get_varint(p, c->mend, &c->pos, &ian))
        return corrupt(c->path, "bad record");
    size_t id_keep = c->rec.id ? strlen(c->rec.id) : 0;
    if ((first && ish) || ish > id_keep || ish + ian > SK_RUN_ID_MAX ||
        ish + ian == 0)
        return corrupt(c->path, "bad record id");
    if ((rc = take_tail(c, id_pos(c), c->iend, &c->rec.id, &c->id_cap, ish,
                        ian)))
        return rc;
    if (sk_get_varint(p, c->mend, &c->pos, &vsh) ||
        sk_get_varint(p, c->mend, &c->pos, &van))
        return corrupt(c->path, "bad record");
    size_t ver_keep = c->rec.version && !first ? strlen(c->rec.version) : 0;
    if (vsh > ver_keep || vsh + van > SK_RUN_ID_MAX)
        return corrupt(c->path, "bad record version");
    if ((rc = take_tail(c, ver_pos(c), c->vend, &c->rec.version, &c->ver_cap,
                        vsh, van)))
        return rc;
    if (sk_get_varint(p, c->mend, &c->pos, &size) ||
        sk_get_varint(p, c->mend, &c->pos, &off) ||
        sk_get_varint(p, c->mend, &c->pos, &flags) || flags > UINT32_MAX)
        return corrupt(c->path, "bad record");
    c->rec.size = sk_unzigzag(size);
    c->rec.offset = sk_unzigzag(off);
    c->rec.flags = (uint32_t)flags;
    c->rec.dirty = 0;
    if (--c->left_in_block == 0) {
        if (c->pos != c->mend ||
            (c->columns && (c->ipos != c->iend || c->vpos != c->vend)))
            return corrupt(c->path, "block longer than its records");
        c->pos = 0; /* the next block starts afresh */
    }
    c->read++;
    c->valid = 1;
    return SKIPPR_OK;
}

/* ---- writer ------------------------------------------------------------- */

int sk_run_writer_open(sk_run_writer *w, const char *path, uint64_t lo,
                       uint64_t hi, uint32_t level, uint64_t next_slice_id)
{
    memset(w, 0, sizeof *w);
    w->fd = -1;
    skippr_buf_init(&w->raw, RAW_MAX);
    skippr_buf_init(&w->ids, RAW_MAX);
    skippr_buf_init(&w->vers, RAW_MAX);
    skippr_buf_init(&w->block, RAW_MAX);
    skippr_buf_init(&w->stored, ZSTD_compressBound(RAW_MAX) + 16);
    skippr_buf_init(&w->index, INDEX_MAX);
    w->off = 8;
    w->meta = (sk_run_meta){.lo = lo, .hi = hi, .next_slice_id = next_slice_id,
                            .level = level};
    if (snprintf(w->path, sizeof w->path, "%s", path) >=
            (int)sizeof w->path ||
        snprintf(w->tmp, sizeof w->tmp, "%s.tmp", path) >=
            (int)sizeof w->tmp)
        return SKIPPR_INVAL;
    if (!(w->cctx = ZSTD_createCCtx()))
        return SKIPPR_NOMEM;
    int rc = sk_io_open(w->tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC,
                        0644, &w->fd);
    return rc ? rc : sk_io_write_all(w->fd, RUN_MAGIC, 8, w->tmp);
}

/* Bytes the block holds so far, in its three columns. */
static size_t block_len(const sk_run_writer *w)
{
    return w->raw.len + w->ids.len + w->vers.len;
}

/* The block's raw bytes, its columns after their lengths:
 *   varint numbers' length M, varint ids' length I,
 *   numbers (M bytes: each record's varints), ids (I bytes: the id bytes
 *   each adds), versions (the rest: the version bytes each adds).
 * Alike bytes together compress better than whole records one after
 * another: 23.6 bytes a unit instead of 26.2 for Firehose names and
 * nanosecond mtimes. */
static int block_join(sk_run_writer *w)
{
    int rc = 0;
    skippr_buf_reset(&w->block);
    sk_put_varint(&w->block, w->raw.len, &rc);
    sk_put_varint(&w->block, w->ids.len, &rc);
    if (!rc)
        rc = skippr_buf_append(&w->block, w->raw.data, w->raw.len);
    if (!rc)
        rc = skippr_buf_append(&w->block, w->ids.data, w->ids.len);
    if (!rc)
        rc = skippr_buf_append(&w->block, w->vers.data, w->vers.len);
    return rc;
}

static int flush_block(sk_run_writer *w)
{
    if (w->in_block == 0)
        return SKIPPR_OK;
    int rc = block_join(w);
    if (rc)
        return rc;
    size_t cap = ZSTD_compressBound(w->block.len);
    if ((rc = skippr_buf_reserve(&w->stored, cap + 16)))
        return rc;
    size_t s = ZSTD_compressCCtx(w->cctx, w->stored.data + 16, cap,
                                 w->block.data, w->block.len, 3);
    if (ZSTD_isError(s)) {
        sk_error("ledger run %s: %s", w->tmp, ZSTD_getErrorName(s));
        return SKIPPR_FATAL;
    }
    sk_put_u32(w->stored.data, (uint32_t)s);
    sk_put_u32(w->stored.data + 4, (uint32_t)w->block.len);
    sk_put_u32(w->stored.data + 8, w->in_block);
    sk_put_u32(w->stored.data + 12, sk_crc32c(0, w->stored.data + 16, s));
    rc = sk_io_write_all(w->fd, w->stored.data, 16 + s, w->tmp);
    w->off += 16 + s;
    skippr_buf_reset(&w->raw);
    skippr_buf_reset(&w->ids);
    skippr_buf_reset(&w->vers);
    w->in_block = 0;
    w->prev_id_len = w->prev_ver_len = 0;
    return rc;
}

/* Remember s as the previous string of the block. */
static int keep_prev(char **dst, size_t *len, size_t *cap, const char *s,
                     size_t n)
{
    int rc = set_tail(dst, cap, 0, (const uint8_t *)s, n);
    if (!rc)
        *len = n;
    return rc;
}

int sk_run_writer_add(sk_run_writer *w, const sk_unit_rec *r)
{
    size_t il = strlen(r->id), vl = strlen(r->version);
    if (il == 0 || il > SK_RUN_ID_MAX || vl > SK_RUN_ID_MAX)
        return SKIPPR_INVAL;
    if (w->meta.last && strcmp(w->meta.last, r->id) >= 0) {
        sk_error("ledger run %s: ids out of order (%s after %s)", w->tmp,
                 r->id, w->meta.last);
        return SKIPPR_FATAL;
    }
    int rc = 0;
    if (w->in_block == 0) { /* a block starts here: index it */
        uint8_t e[10];
        sk_put_u64(e, w->off);
        sk_put_u16(e + 8, (uint16_t)il);
        if ((rc = skippr_buf_append(&w->index, e, sizeof e)) ||
            (rc = skippr_buf_append(&w->index, r->id, il)))
            return rc;
        w->meta.index_n++;
    }
    size_t ish = shared_len(w->prev_id, w->prev_id_len, r->id, il);
    size_t vsh = shared_len(w->prev_ver, w->prev_ver_len, r->version, vl);
    sk_put_varint(&w->raw, ish, &rc);
    sk_put_varint(&w->raw, il - ish, &rc);
    if (!rc)
        rc = skippr_buf_append(&w->ids, r->id + ish, il - ish);
    sk_put_varint(&w->raw, vsh, &rc);
    sk_put_varint(&w->raw, vl - vsh, &rc);
    if (!rc)
        rc = skippr_buf_append(&w->vers, r->version + vsh, vl - vsh);
    sk_put_varint(&w->raw, sk_zigzag(r->size), &rc);
    sk_put_varint(&w->raw, sk_zigzag(r->offset), &rc);
    sk_put_varint(&w->raw, r->flags, &rc);
    if (rc)
        return rc;
    w->in_block++;
    if (!w->meta.first && !(w->meta.first = sk_strdup(r->id)))
        return SKIPPR_NOMEM;
    char *last = sk_strdup(r->id);
    if (!last)
        return SKIPPR_NOMEM;
    sk_free(w->meta.last);
    w->meta.last = last;
    w->meta.count++;
    if (r->flags & SK_UNIT_DONE)
        w->meta.done++;
    if (block_len(w) >= BLOCK_RAW)
        return flush_block(w);
    if ((rc = keep_prev(&w->prev_id, &w->prev_id_len, &w->prev_id_cap,
                        r->id, il)))
        return rc;
    return keep_prev(&w->prev_ver, &w->prev_ver_len, &w->prev_ver_cap,
                     r->version, vl);
}

int sk_run_writer_finish(sk_run_writer *w)
{
    int rc = flush_block(w);
    if (rc)
        return rc;
    sk_run_meta *m = &w->meta;
    uint8_t c4[4];
    sk_put_u32(c4, 0); /* no more blocks */
    if ((rc = sk_io_write_all(w->fd, c4, 4, w->tmp)))
        return rc;
    m->index_off = w->off + 4;
    sk_put_u32(c4, sk_crc32c(0, w->index.data, w->index.len));
    if ((w->index.len &&
         (rc = sk_io_write_all(w->fd, w->index.data, w->index.len, w->tmp))) ||
        (rc = sk_io_write_all(w->fd, c4, 4, w->tmp)))
        return rc;
    m->index_len = (uint32_t)w->index.len + 4;
    size_t a = m->first ? strlen(m->first) : 0;
    size_t b = m->last ? strlen(m->last) : 0;
    size_t flen = FOOTER_FIXED + a + b;
    uint8_t *f = sk_malloc(flen + 16);
    if (!f)
        return SKIPPR_NOMEM;
    uint8_t *q = f;
    sk_put_u64(q, m->lo);
    sk_put_u64(q + 8, m->hi);
    sk_put_u64(q + 16, m->next_slice_id);
    sk_put_u64(q + 24, m->count);
    sk_put_u64(q + 32, m->done);
    sk_put_u32(q + 40, m->level);
    sk_put_u16(q + 44, (uint16_t)a);
    sk_put_u16(q + 46, (uint16_t)b);
    sk_put_u64(q + 48, m->index_off);
    sk_put_u32(q + 56, m->index_n);
    sk_put_u32(q + 60, m->index_len);
    if (a)
        memcpy(q + FOOTER_FIXED, m->first, a);
    if (b)
        memcpy(q + FOOTER_FIXED + a, m->last, b);
    sk_put_u32(q + flen, (uint32_t)flen);
    sk_put_u32(q + flen + 4, sk_crc32c(0, q, flen));
    memcpy(q + flen + 8, END_MAGIC, 8);
    rc = sk_io_write_all(w->fd, f, flen + 16, w->tmp);
    sk_free(f);
    if (!rc)
        rc = sk_io_fsync(w->fd, w->tmp);
    if (rc)
        return rc;
    close(w->fd);
    w->fd = -1;
    if ((rc = sk_io_rename(w->tmp, w->path)))
        return rc;
    w->tmp[0] = '\0'; /* nothing to remove */
    return SKIPPR_OK;
}

void sk_run_writer_close(sk_run_writer *w)
{
    if (w->fd >= 0)
        close(w->fd);
    w->fd = -1;
    if (w->tmp[0])
        unlink(w->tmp);
    ZSTD_freeCCtx(w->cctx);
    w->cctx = NULL;
    skippr_buf_free(&w->raw);
    skippr_buf_free(&w->ids);
    skippr_buf_free(&w->vers);
    skippr_buf_free(&w->block);
    skippr_buf_free(&w->stored);
    skippr_buf_free(&w->index);
    sk_run_meta_free(&w->meta);
    sk_free(w->prev_id);
    sk_free(w->prev_ver);
    w->prev_id = w->prev_ver = NULL;
}

void sk_run_cursor_free(sk_run_cursor *c) { cursor_free(c); }
