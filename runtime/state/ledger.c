#include "state/ledger.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/common.h"
#include "base/crc32c.h"
#include "base/fsio.h"

#define HDR_MAGIC "SKLEDG01"
#define END_MAGIC "SKLEDEND"
#define MAX_PAYLOAD (2u * 65536u + 64u)

struct sk_ledger {
    char *path;
    uint64_t next_slice_id;
    uint64_t file_count;
    sk_map recent;
    /* streaming cursor over the file */
    FILE *rf;
    uint64_t read_count;
    sk_unit_rec cur;
    int cur_valid;
    uint8_t *pbuf;
};

static void rec_free(sk_unit_rec *r)
{
    if (!r)
        return;
    sk_free(r->id);
    sk_free(r->version);
}

/* Decode a payload into r (allocating id/version). */
static int decode(const uint8_t *p, size_t n, sk_unit_rec *r)
{
    if (n < 2)
        return SKIPPR_CORRUPT;
    size_t il = sk_get_u16(p);
    if (n < 2 + il + 2)
        return SKIPPR_CORRUPT;
    size_t vl = sk_get_u16(p + 2 + il);
    if (n != 2 + il + 2 + vl + 8 + 8 + 4)
        return SKIPPR_CORRUPT;
    char *id = sk_strndup((const char *)p + 2, il);
    char *ver = sk_strndup((const char *)p + 4 + il, vl);
    if (!id || !ver) {
        sk_free(id);
        sk_free(ver);
        return SKIPPR_NOMEM;
    }
    const uint8_t *q = p + 4 + il + vl;
    rec_free(r);
    r->id = id;
    r->version = ver;
    r->size = (int64_t)sk_get_u64(q);
    r->offset = (int64_t)sk_get_u64(q + 8);
    r->flags = sk_get_u32(q + 16);
    r->dirty = 0;
    return SKIPPR_OK;
}

static size_t encode(const sk_unit_rec *r, uint8_t *p)
{
    size_t il = strlen(r->id), vl = strlen(r->version);
    sk_put_u16(p, (uint16_t)il);
    memcpy(p + 2, r->id, il);
    sk_put_u16(p + 2 + il, (uint16_t)vl);
    memcpy(p + 4 + il, r->version, vl);
    uint8_t *q = p + 4 + il + vl;
    sk_put_u64(q, (uint64_t)r->size);
    sk_put_u64(q + 8, (uint64_t)r->offset);
    sk_put_u32(q + 16, r->flags);
    return 4 + il + vl + 20;
}

static void cursor_close(sk_ledger *l)
{
    if (l->rf)
        fclose(l->rf);
    l->rf = NULL;
    l->cur_valid = 0;
}

/* Open the file and read its header. Missing file = empty ledger. */
static int cursor_open(sk_ledger *l)
{
    cursor_close(l);
    l->rf = fopen(l->path, "rb");
    if (!l->rf) {
        if (errno == ENOENT) {
            l->file_count = 0;
            return SKIPPR_OK;
        }
        sk_error("open ledger %s: %s", l->path, strerror(errno));
        return SKIPPR_IO;
    }
    uint8_t h[28];
    if (fread(h, 1, sizeof h, l->rf) != sizeof h ||
        memcmp(h, HDR_MAGIC, 8) != 0 ||
        sk_crc32c(0, h, 24) != sk_get_u32(h + 24)) {
        sk_error("ledger %s: bad header; the file is damaged", l->path);
        cursor_close(l);
        return SKIPPR_CORRUPT;
    }
    l->next_slice_id = sk_get_u64(h + 8);
    l->file_count = sk_get_u64(h + 16);
    l->read_count = 0;
    return SKIPPR_OK;
}

/* Advance to the next file record; cur_valid = 0 at the end. */
static int cursor_step(sk_ledger *l)
{
    l->cur_valid = 0;
    if (!l->rf || l->read_count == l->file_count)
        return SKIPPR_OK;
    uint8_t lb[4];
    if (fread(lb, 1, 4, l->rf) != 4)
        goto bad;
    uint32_t n = sk_get_u32(lb);
    if (n > MAX_PAYLOAD || fread(l->pbuf, 1, (size_t)n + 4, l->rf) != n + 4 ||
        sk_crc32c(0, l->pbuf, n) != sk_get_u32(l->pbuf + n))
        goto bad;
    int rc = decode(l->pbuf, n, &l->cur);
    if (rc)
        return rc;
    l->read_count++;
    l->cur_valid = 1;
    return SKIPPR_OK;
bad:
    sk_error("ledger %s: damaged record %llu", l->path,
             (unsigned long long)l->read_count);
    return SKIPPR_CORRUPT;
}

int sk_ledger_open(const char *path, sk_ledger **out)
{
    int rc = SKIPPR_NOMEM;
    sk_ledger *l = sk_calloc(1, sizeof *l);
    if (!l)
        goto out;
    sk_map_init(&l->recent);
    l->path = sk_strdup(path);
    l->pbuf = sk_malloc(MAX_PAYLOAD + 4);
    l->next_slice_id = 1;
    if (!l->path || !l->pbuf || (rc = cursor_open(l)))
        goto out;
    *out = l;
    l = NULL; /* handed to the caller */
out:
    if (l)
        sk_ledger_close(l);
    return rc;
}

void sk_ledger_close(sk_ledger *l)
{
    if (!l)
        return;
    cursor_close(l);
    size_t it = 0;
    sk_unit_rec *r;
    while ((r = sk_map_next(&l->recent, &it))) {
        rec_free(r);
        sk_free(r);
    }
    sk_map_free(&l->recent);
    rec_free(&l->cur);
    sk_free(l->pbuf);
    sk_free(l->path);
    sk_free(l);
}

uint64_t sk_ledger_next_slice_id(const sk_ledger *l) { return l->next_slice_id; }

uint64_t sk_ledger_count(const sk_ledger *l)
{
    return l->file_count + l->recent.live;
}

uint64_t sk_ledger_file_count(const sk_ledger *l) { return l->file_count; }
uint64_t sk_ledger_recent_count(const sk_ledger *l) { return l->recent.live; }

int sk_ledger_lookup(sk_ledger *l, const char *id, const sk_unit_rec **out)
{
    size_t n = strlen(id);
    sk_unit_rec *r = sk_map_get(&l->recent, id, n, sk_hash_fast(id, n));
    if (r) {
        *out = r;
        return SKIPPR_OK;
    }
    *out = NULL;
    if (l->file_count == 0)
        return SKIPPR_OK;
    int rc;
    /* At the end of the stream, an id past the last one read is not in
     * the file: answer without reading it all again (new units list after
     * every finished one, so this is the common case of a growing
     * archive). */
    if (l->rf && !l->cur_valid && l->read_count == l->file_count &&
        l->read_count > 0 && strcmp(l->cur.id, id) < 0)
        return SKIPPR_OK;
    /* Going backwards restarts the stream. */
    if (!l->rf || (l->cur_valid && strcmp(l->cur.id, id) > 0) ||
        (!l->cur_valid && l->read_count == l->file_count)) {
        if ((rc = cursor_open(l)) || (rc = cursor_step(l)))
            return rc;
    } else if (!l->cur_valid && (rc = cursor_step(l))) {
        return rc;
    }
    while (l->cur_valid && strcmp(l->cur.id, id) < 0)
        if ((rc = cursor_step(l)))
            return rc;
    if (l->cur_valid && strcmp(l->cur.id, id) == 0)
        *out = &l->cur;
    return SKIPPR_OK;
}

sk_unit_rec *sk_ledger_touch(sk_ledger *l, const char *id,
                             const char *version, int64_t size)
{
    size_t n = strlen(id);
    uint64_t h = sk_hash_fast(id, n);
    sk_unit_rec *r = sk_map_get(&l->recent, id, n, h);
    if (r)
        return r;
    if (n > 65535 || strlen(version) > 65535)
        return NULL;
    r = sk_calloc(1, sizeof *r);
    if (!r)
        return NULL;
    r->id = sk_strdup(id);
    r->version = sk_strdup(version);
    r->size = size;
    if (!r->id || !r->version || sk_map_put(&l->recent, r->id, n, h, r)) {
        rec_free(r);
        sk_free(r);
        return NULL;
    }
    return r;
}

sk_unit_rec *sk_ledger_recent_next(sk_ledger *l, size_t *it)
{
    return sk_map_next(&l->recent, it);
}

static int cmp_rec(const void *a, const void *b)
{
    const sk_unit_rec *x = *(sk_unit_rec *const *)a;
    const sk_unit_rec *y = *(sk_unit_rec *const *)b;
    return strcmp(x->id, y->id);
}

static int write_rec(int fd, const sk_unit_rec *r, uint8_t *buf,
                     const char *path)
{
    size_t n = encode(r, buf + 4);
    sk_put_u32(buf, (uint32_t)n);
    sk_put_u32(buf + 4 + n, sk_crc32c(0, buf + 4, n));
    return sk_io_write_all(fd, buf, n + 8, path);
}

int sk_ledger_compact(sk_ledger *l, uint64_t next_slice_id)
{
    int rc = SKIPPR_NOMEM;
    int fd = -1;
    char tmp[PATH_MAX];
    snprintf(tmp, sizeof tmp, "%s.tmp", l->path);
    size_t nrecent = l->recent.live, k = 0;
    sk_unit_rec **sorted = sk_calloc(nrecent ? nrecent : 1, sizeof *sorted);
    uint8_t *wbuf = sk_malloc(MAX_PAYLOAD + 8);
    sk_buf out;
    sk_buf_init(&out, 1u << 20);
    if (!sorted || !wbuf)
        goto out;
    size_t it = 0;
    sk_unit_rec *r;
    while ((r = sk_map_next(&l->recent, &it)))
        sorted[k++] = r;
    qsort(sorted, k, sizeof *sorted, cmp_rec);

    rc = sk_io_open(tmp, O_WRONLY | O_CREAT | O_TRUNC, 0644, &fd);
    if (rc)
        goto out;
    uint8_t h[28];
    memcpy(h, HDR_MAGIC, 8);
    sk_put_u64(h + 8, next_slice_id);
    sk_put_u64(h + 16, 0); /* patched below */
    sk_put_u32(h + 24, 0);
    if ((rc = sk_io_write_all(fd, h, sizeof h, tmp)))
        goto out;
    /* Merge the sorted recent records with the file stream. */
    if ((rc = cursor_open(l)) || (rc = cursor_step(l)))
        goto out;
    uint64_t count = 0;
    size_t i = 0;
    while (i < k || l->cur_valid) {
        int c = !l->cur_valid ? 1
                : i == k      ? -1
                              : strcmp(l->cur.id, sorted[i]->id);
        const sk_unit_rec *w = c < 0 ? &l->cur : sorted[i];
        if ((rc = write_rec(fd, w, wbuf, tmp)))
            goto out;
        count++;
        if (c <= 0 && (rc = cursor_step(l)))
            goto out;
        if (c >= 0)
            i++;
    }
    uint8_t t[16];
    memcpy(t, END_MAGIC, 8);
    sk_put_u64(t + 8, count);
    if ((rc = sk_io_write_all(fd, t, sizeof t, tmp)))
        goto out;
    sk_put_u64(h + 16, count);
    sk_put_u32(h + 24, sk_crc32c(0, h, 24));
    if (pwrite(fd, h, sizeof h, 0) != (ssize_t)sizeof h) {
        sk_error("write %s: %s", tmp, strerror(errno));
        rc = SKIPPR_IO_WRITE;
        goto out;
    }
    if ((rc = sk_io_fsync(fd, tmp)))
        goto out;
    close(fd);
    fd = -1;
    cursor_close(l);
    if ((rc = sk_io_rename(tmp, l->path)))
        goto out;
    l->next_slice_id = next_slice_id;
    /* Finished units now live in the file only. */
    for (size_t j = 0; j < k; j++) {
        r = sorted[j];
        if (r->flags & SK_UNIT_DONE) {
            size_t n = strlen(r->id);
            sk_map_del(&l->recent, r->id, n, sk_hash_fast(r->id, n));
            rec_free(r);
            sk_free(r);
        }
    }
    rc = cursor_open(l);
out:
    if (fd >= 0)
        close(fd);
    sk_buf_free(&out);
    sk_free(wbuf);
    sk_free(sorted);
    return rc;
}
