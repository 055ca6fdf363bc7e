/* The write-ahead log: segments, appends, syncs and rotation (the frame
 * format, and the state shared with walread.c: wal_impl.h).
 *
 * DURABILITY. Appends are buffered; sk_wal_sync() writes and fsyncs. A new
 * segment's folder entry is fsynced before its first frame is relied on.
 * A failed fsync is fatal.
 *
 * DIRECT I/O. The active segment is written with O_DIRECT where the file
 * system takes it: the log is written once and read back only after a
 * crash (or for a spilled tail), so copying it through the page cache
 * costs CPU and evicts pages worth keeping (on the bench's S3 -> S3 run,
 * the kernel's copy into fresh page-cache pages was 10 to 16% of all
 * CPU). A direct write covers whole DIO_ALIGN blocks: the last, partial
 * block goes out padded with zeros and is written again, with more frames
 * in it, by the next write. So the newest segment may end in fewer than
 * DIO_ALIGN zero bytes after its last frame, which replay cuts as it cuts
 * a torn tail. Before the log moves to a new segment the active one is cut
 * to its exact length and fsynced, and a replay that cuts padding fsyncs
 * too, so an older segment never ends in padding: zeros there are
 * corruption like any other invalid frame. Where O_DIRECT is refused
 * (tmpfs, or a write the file system will not align), the segment is
 * written through the page cache as before.
 */
#include "state/wal.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/crc32c.h"
#include "base/fault.h"
#include "base/fsio.h"
#include "state/wal_impl.h"

static int trim_padding(sk_wal *w, const char *path);

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* Room for one more segment in segs and sizes. */
static int segs_grow(sk_wal *w)
{
    if (w->nsegs >= MAX_SEGS) {
        sk_error("WAL folder %s holds more than %d segments", w->dir,
                 MAX_SEGS);
        return SKIPPR_RANGE;
    }
    if (skippr_array_grow(&w->segs, w->nsegs, &w->segs_cap, sizeof *w->segs,
                          16) ||
        skippr_array_grow(&w->sizes, w->nsegs, &w->sizes_cap, sizeof *w->sizes,
                          16))
        return SKIPPR_NOMEM;
    return SKIPPR_OK;
}

static int list_segments(sk_wal *w)
{
    DIR *d = opendir(w->dir);
    if (!d) {
        sk_error("open WAL folder %s: %s", w->dir, strerror(errno));
        return SKIPPR_IO;
    }
    struct dirent *e;
    w->nsegs = 0;
    while ((e = readdir(d))) {
        uint64_t n;
        char tail[8];
        if (sscanf(e->d_name, "wal-%16" SCNx64 ".%7s", &n, tail) == 2 &&
            strcmp(tail, "log") == 0 && strlen(e->d_name) == 24) {
            int rc = segs_grow(w);
            if (rc) {
                closedir(d);
                return rc;
            }
            w->segs[w->nsegs++] = n;
        }
    }
    closedir(d);
    if (w->nsegs > 1)
        qsort(w->segs, w->nsegs, sizeof *w->segs, cmp_u64);
    for (size_t i = 0; i < w->nsegs; i++) {
        char path[PATH_MAX];
        struct stat st;
        seg_path(w, w->segs[i], path, sizeof path);
        w->sizes[i] = stat(path, &st) == 0 ? (uint64_t)st.st_size : 0;
    }
    return SKIPPR_OK;
}

int sk_wal_open(const char *dir, sk_wal **out)
{
    int rc = SKIPPR_NOMEM;
    sk_wal *w = sk_calloc(1, sizeof *w);
    if (!w)
        goto fail;
    w->fd = -1;
    w->wbuf = sk_malloc_aligned(DIO_ALIGN, WRITE_BUF);
    w->dir = sk_strdup(dir);
    if (!w->dir || !w->wbuf)
        goto fail;
    rc = sk_io_mkdir_p(dir, 0755);
    if (rc)
        goto fail;
    rc = list_segments(w);
    if (rc)
        goto fail;
    w->active = w->nsegs ? w->segs[w->nsegs - 1] + 1 : 1;
    w->next_seq = 1;
    *out = w;
    w = NULL; /* handed to the caller */
fail:
    if (w)
        sk_wal_close(w);
    return rc;
}

void sk_wal_close(sk_wal *w)
{
    if (!w)
        return;
    if (w->fd >= 0) {
        /* Frames not synced are dropped, as a crash would drop them; a
         * clean close leaves the segment its exact length (best effort:
         * replay reads padding as such). */
        char path[PATH_MAX];
        seg_path(w, w->active, path, sizeof path);
        (void)trim_padding(w, path);
        close(w->fd);
    }
    sk_free(w->wbuf);
    sk_free(w->segs);
    sk_free(w->sizes);
    sk_free(w->dir);
    sk_free(w);
}

/* Stop writing the active segment directly: the file system refused a
 * direct write. What it holds stays; later writes go through the page
 * cache. */
static int leave_direct(sk_wal *w, const char *path)
{
    int fl = fcntl(w->fd, F_GETFL);
    if (fl < 0 || fcntl(w->fd, F_SETFL, fl & ~O_DIRECT) != 0) {
        sk_error("WAL segment %s: turn off O_DIRECT: %s", path,
                 strerror(errno));
        return SKIPPR_IO;
    }
    sk_debug("WAL segment %s: direct write refused; writing through the "
             "page cache", path);
    w->direct = 0;
    return SKIPPR_OK;
}

/* wbuf's frames, padded to whole blocks, written directly; the partial
 * last block stays at wbuf's start, to be written again with the frames
 * that follow it. SKIPPR_INVAL when the file system refuses the write. */
static int flush_direct(sk_wal *w, const char *path)
{
    size_t padded = (w->wlen + DIO_ALIGN - 1) & ~(size_t)(DIO_ALIGN - 1);
    memset(w->wbuf + w->wlen, 0, padded - w->wlen);
    int rc = sk_fault_hit(SK_FAULT_DIRECT)
                 ? SKIPPR_INVAL
                 : sk_io_pwrite_all(w->fd, w->wbuf, padded,
                                    (off_t)w->wbuf_off, path);
    if (rc)
        return rc;
    w->written = w->wbuf_off + w->wlen;
    size_t whole = w->wlen & ~(size_t)(DIO_ALIGN - 1);
    memmove(w->wbuf, w->wbuf + whole, w->wlen - whole);
    w->wbuf_off += whole;
    w->wlen -= whole;
    return SKIPPR_OK;
}

/* Write wbuf's frames to the active segment: directly where it can, else
 * through the page cache. A flush with nothing new writes nothing, so
 * padding once cut stays cut. */
static int flush_buf(sk_wal *w)
{
    if (w->wlen == 0 || w->wbuf_off + w->wlen == w->written)
        return SKIPPR_OK;
    char path[PATH_MAX];
    seg_path(w, w->active, path, sizeof path);
    int rc;
    if (w->direct) {
        if ((rc = flush_direct(w, path)) != SKIPPR_INVAL)
            return rc;
        if ((rc = leave_direct(w, path)))
            return rc;
    }
    rc = sk_io_pwrite_all(w->fd, w->wbuf, w->wlen, (off_t)w->wbuf_off, path);
    if (rc == SKIPPR_INVAL) {
        sk_error("write %s: invalid argument", path);
        rc = SKIPPR_IO_WRITE;
    }
    if (rc)
        return rc;
    w->wbuf_off += w->wlen;
    w->written = w->wbuf_off;
    w->wlen = 0;
    return SKIPPR_OK;
}

/* Append n bytes to wbuf, writing it out each time it fills. */
static int buffer_bytes(sk_wal *w, const void *p, size_t n)
{
    const uint8_t *s = p;
    while (n > 0) {
        if (w->wlen == WRITE_BUF) {
            int rc = flush_buf(w);
            if (rc)
                return rc;
        }
        size_t k = SK_MIN(n, (size_t)WRITE_BUF - w->wlen);
        memcpy(w->wbuf + w->wlen, s, k);
        w->wlen += k;
        s += k;
        n -= k;
    }
    return SKIPPR_OK;
}

/* The active segment's length is what its written frames hold: a direct
 * write's padding is cut when the log moves past the segment or closes.
 * Also after the segment left direct mode: a padded block written before
 * that may reach past the frames written since. */
static int trim_padding(sk_wal *w, const char *path)
{
    struct stat st;
    if (fstat(w->fd, &st) != 0) {
        sk_error("stat %s: %s", path, strerror(errno));
        return SKIPPR_IO;
    }
    if ((uint64_t)st.st_size > w->written &&
        ftruncate(w->fd, (off_t)w->written) != 0) {
        sk_error("truncate %s: %s", path, strerror(errno));
        return SKIPPR_IO_WRITE;
    }
    return SKIPPR_OK;
}

static int open_active(sk_wal *w)
{
    int rc = segs_grow(w);
    if (rc)
        return rc;
    char path[PATH_MAX];
    seg_path(w, w->active, path, sizeof path);
    rc = sk_io_open_direct(path, O_WRONLY | O_CREAT | O_EXCL, 0644, &w->fd,
                           &w->direct);
    if (rc)
        return rc;
    rc = sk_io_fsync_dir(w->dir);
    if (rc) {
        close(w->fd);
        w->fd = -1;
        return rc;
    }
    w->segs[w->nsegs] = w->active;
    w->sizes[w->nsegs] = 0;
    w->nsegs++;
    w->active_size = 0;
    w->wlen = 0;
    w->wbuf_off = 0;
    w->written = 0;
    return SKIPPR_OK;
}

int sk_wal_append(sk_wal *w, int type, const sk_iov *parts, int nparts,
                  sk_wal_pos *pos_out)
{
    int rc;
    if (w->fd < 0 && (rc = open_active(w)))
        return rc;
    size_t plen = 0;
    for (int i = 0; i < nparts; i++)
        plen += parts[i].n;
    if (plen > SK_WAL_MAX_PAYLOAD)
        return SKIPPR_RANGE;
    uint8_t h[SK_WAL_HEADER];
    sk_put_u32(h, WAL_MAGIC);
    h[4] = (uint8_t)type;
    h[5] = WAL_VERSION;
    h[6] = h[7] = 0;
    sk_put_u64(h + 8, w->next_seq);
    sk_put_u32(h + 16, (uint32_t)plen);
    uint32_t crc = sk_crc32c(0, h, 20);
    for (int i = 0; i < nparts; i++)
        crc = sk_crc32c(crc, parts[i].p, parts[i].n);
    sk_put_u32(h + 20, crc);

    if (pos_out)
        *pos_out = (sk_wal_pos){w->active, w->active_size};
    size_t total = SK_WAL_HEADER + plen;
    rc = buffer_bytes(w, h, sizeof h);
    for (int i = 0; !rc && i < nparts; i++)
        rc = buffer_bytes(w, parts[i].p, parts[i].n);
    if (rc)
        return rc;
    w->next_seq++;
    w->unsynced = 1;
    w->active_size += total;
    w->sizes[w->nsegs - 1] = w->active_size;
    return SKIPPR_OK;
}

/* Store bytes [from, to) of segment seg in the remote, in chunks; *at
 * follows what is stored. */
static int mirror_range(sk_wal *w, uint64_t seg, uint64_t from, uint64_t to,
                        uint64_t *at)
{
    if (from >= to)
        return SKIPPR_OK;
    char path[PATH_MAX];
    seg_path(w, seg, path, sizeof path);
    size_t chunk = (size_t)SK_MIN(to - from, (uint64_t)WRITE_BUF);
    uint8_t *buf = sk_malloc(chunk);
    int fd = -1;
    int rc = buf ? sk_io_open(path, O_RDONLY | O_CLOEXEC, 0, &fd)
                 : SKIPPR_NOMEM;
    for (uint64_t off = from; !rc && off < to;) {
        size_t k = (size_t)SK_MIN(to - off, (uint64_t)chunk), got;
        rc = sk_io_pread_all(fd, buf, k, (off_t)off, &got, path);
        if (!rc && got != k)
            rc = SKIPPR_CORRUPT;
        if (!rc)
            rc = sk_remote_wal(w->remote, seg, off, buf, k);
        off += k;
        if (!rc)
            *at = off;
    }
    if (fd >= 0)
        close(fd);
    sk_free(buf);
    return rc;
}

/* The active segment as stored so far, again from offset 0 in a few
 * objects; the many before them are removed: a restore reads a few. */
static int rebase(sk_wal *w)
{
    uint64_t first = sk_remote_wal_next(w->remote), at = 0;
    int rc = mirror_range(w, w->active, 0, w->moff, &at);
    if (!rc)
        rc = sk_remote_wal_rebased(w->remote, w->active, first);
    w->mpieces = (uint32_t)(sk_remote_wal_next(w->remote) - first);
    return rc;
}

int sk_wal_sync(sk_wal *w)
{
    if (w->fd < 0)
        return SKIPPR_OK;
    int rc = flush_buf(w);
    if (rc)
        return rc;
    char path[PATH_MAX];
    seg_path(w, w->active, path, sizeof path);
    rc = sk_io_fsync(w->fd, path);
    if (!rc && w->remote) {
        /* Durable means stored off the box too. A sync before the log
         * moved on stored the whole of the previous segment. */
        if (w->mseg != w->active) {
            w->mseg = w->active;
            w->moff = 0;
            w->mpieces = 0;
        }
        uint64_t from = w->moff;
        rc = mirror_range(w, w->active, w->moff, w->written, &w->moff);
        w->mpieces += w->moff > from;
        if (!rc && w->mpieces >= REBASE_AFTER)
            rc = rebase(w);
    }
    if (!rc)
        w->unsynced = 0;
    return rc;
}

int sk_wal_set_remote(sk_wal *w, sk_remote *r, int store_existing)
{
    w->remote = r;
    w->mseg = w->active;
    w->moff = 0;
    int rc = SKIPPR_OK;
    uint64_t at = 0;
    for (size_t i = 0; r && store_existing && i < w->nsegs && !rc; i++)
        rc = mirror_range(w, w->segs[i], 0, w->sizes[i], &at);
    return rc;
}

int sk_wal_writeback(sk_wal *w)
{
    if (w->fd < 0)
        return SKIPPR_OK;
    int rc = flush_buf(w);
    if (rc)
        return rc;
#if defined(SYNC_FILE_RANGE_WRITE)
    if (w->direct)
        return SKIPPR_OK; /* the device has it already */
    /* Start writing what the page cache holds; do not wait. The next
     * fsync then finds little left to do. Only a hint: errors show up at
     * that fsync. */
    (void)sync_file_range(w->fd, 0, 0, SYNC_FILE_RANGE_WRITE);
#endif
    return SKIPPR_OK;
}

int sk_wal_unsynced(const sk_wal *w) { return w->unsynced; }

uint64_t sk_wal_active_size(const sk_wal *w) { return w->active_size; }
uint64_t sk_wal_active_seg(const sk_wal *w) { return w->active; }
int sk_wal_direct(const sk_wal *w) { return w->fd >= 0 && w->direct; }

int sk_wal_rotate(sk_wal *w)
{
    if (w->fd < 0)
        return SKIPPR_OK;
    int rc = flush_buf(w);
    if (rc)
        return rc;
    char path[PATH_MAX];
    seg_path(w, w->active, path, sizeof path);
    if ((rc = trim_padding(w, path)) || (rc = sk_wal_sync(w)))
        return rc;
    close(w->fd);
    w->fd = -1;
    w->active++;
    w->active_size = 0;
    return SKIPPR_OK;
}

uint64_t sk_wal_disk_bytes(const sk_wal *w)
{
    uint64_t t = 0;
    for (size_t i = 0; i < w->nsegs; i++)
        t += w->sizes[i];
    return t;
}

int sk_wal_drop_before(sk_wal *w, uint64_t seg)
{
    int rc = SKIPPR_OK;
    size_t k = 0;
    while (k < w->nsegs && w->segs[k] < seg && w->segs[k] != w->active) {
        char path[PATH_MAX];
        seg_path(w, w->segs[k], path, sizeof path);
        rc = sk_io_unlink(path);
        if (rc)
            break;
        k++;
    }
    memmove(w->segs, w->segs + k, (w->nsegs - k) * sizeof *w->segs);
    memmove(w->sizes, w->sizes + k, (w->nsegs - k) * sizeof *w->sizes);
    w->nsegs -= k;
    /* The stored copies go after the local ones, oldest first: a restore
     * skips a segment whose first bytes are gone. */
    if (!rc && w->remote)
        rc = sk_remote_wal_drop(w->remote, seg);
    return rc;
}

uint64_t sk_wal_first_seg(const sk_wal *w)
{
    return w->nsegs ? w->segs[0] : w->active;
}
