/* The write-ahead log.
 *
 * FILES. The WAL folder holds segments named wal-NNNNNNNNNNNNNNNN.log (16
 * hex digits, increasing). A segment is a sequence of frames with nothing
 * before, between or after them.
 *
 * FRAME. All integers little-endian.
 *
 *   offset size  field
 *        0    4  magic 0x31574B53 ("SKW1")
 *        4    1  type (wal.h: SLICE_V1, BLOCK, COMMIT, SEAL, DONE, BLOCKZ,
 *                 STREAM, TAIL, NOTE, STAGE, SLICE)
 *        5    1  format version, 1
 *        6    2  reserved, 0
 *        8    8  sequence number: previous frame's + 1, across segments
 *       16    4  payload length L, at most 2^30
 *       20    4  CRC32C of bytes 0..19 followed by the payload
 *       24    L  payload
 *
 * A frame is valid when its magic, version, length bound and CRC hold and
 * its sequence number follows the previous valid frame's. Replay reads each
 * segment from its start and stops a segment at its first invalid frame.
 * If that happens in the newest segment and no valid frame follows anywhere
 * after it, it is a torn tail from a crash: the segment is truncated there
 * and fsynced. Anywhere else it is corruption: replay fails and names the
 * segment and offset, so that nothing is ever skipped silently.
 *
 * PAYLOADS (n: u64 slice id; str: u32 length then bytes). The frames'
 * meaning is state.c's and replay.c's; their layout is written down here.
 *   SLICE   (type 11) n, str partition (the object's name), u8 kind (0
 *           data, 1 dead letters; plus 0x80 for a streamed slice, whose
 *           object grows in the sink, and 0x40 once such a slice has had
 *           staging pieces), u64 opened_at (unix seconds), then the tag
 *           that sets the slice apart from others of its partition: u8
 *           form (state/types.h: 0 JSON lines, 1 multi-line JSON, 2 CSV
 *           rows, 3 XML elements), u64 header id (CSV: the header row's;
 *           XML: the prolog's), str XML root name. A streamed slice's
 *           SLICE frame is fsynced before the sink gets a byte of it, and
 *           written again at the start of each new segment while the
 *           slice is open (the restatement).
 *   SLICE_V1 (type 1, read only) n, str partition, for a tagged slice
 *           then a NUL and the tag as text (state/v1tag.c), u8 kind, u64
 *           opened_at: read as SLICE. Older skipprd refuse type 11.
 *   BLOCK   n, u32 record count, then per record: u32 length, bytes
 *   BLOCKZ  n, u32 record count, u32 length R of the records part, then
 *           one zstd frame that decompresses to exactly that part (R
 *           bytes: per record u32 length, bytes). Written instead of BLOCK
 *           when the pipeline sets wal_zstd_level and compression helps;
 *           it counts exactly as a BLOCK does.
 *   COMMIT  u64 next slice id, u32 unit count, then per unit: str id,
 *           str version, i64 size, i64 offset, u32 flags (ledger.h
 *           SK_UNIT_*: 1 done, 2 inflated, 4 in a top-level array, 8 CSV,
 *           16 XML), u8 reserved (0). Blocks of the commit come before
 *           it in the segment (see WHICH FRAMES COUNT).
 *   SEAL    n, str object key, u64 object bytes, u64 records, u32 crc32c
 *   DONE    n
 *   STREAM  u32 count, then per streamed slice: n, u64 object bytes the
 *           sink holds durably (its sync() ran before this frame was
 *           written, or, for a parted slice, its parts were uploaded),
 *           u64 object bytes in all (for a parted slice, the rest are in
 *           its TAIL frames; else the same), u64 records, u32 crc32c of
 *           all those bytes. Written just before a COMMIT, for the slices
 *           that grew since the last one (and restated ones); counts as a
 *           BLOCK does. An entry whose sink bytes grew retires every TAIL
 *           frame of the slice before that offset.
 *   TAIL    n, u64 object offset, then bytes of a parted slice's object
 *           that no part holds yet. Written after the commit's STREAM
 *           frame; counts as a BLOCK does.
 *   NOTE    n, u8 flags (1: replaces the slice's earlier notes, a
 *           restatement), then the sink's notes of new parts (grow_note:
 *           an upload id, part numbers and ETags), which a reopen after a
 *           crash gets back. Written before the commit's STREAM frame.
 *   STAGE   n, u64 object offset, u64 length, u64 tag (part of the
 *           piece's name, unique per piece stored): those bytes of a parted
 *           slice, which TAIL frames held, are now a staging piece in the
 *           sink (stage_put returned before this frame was written); it
 *           retires the slice's TAIL frames before offset + length.
 *           Written again at the start of each new segment while the
 *           piece is needed; counts as a BLOCK does.
 *
 * WHICH FRAMES COUNT. SLICE, BLOCK and STREAM frames count only when a
 * COMMIT frame follows them in the same segment: a crash between appending
 * blocks and the group commit's fsync must not resurrect them, and every
 * replay starts
 * a new segment, so uncommitted frames of an old segment never gain a
 * COMMIT. SEAL and DONE frames are written only after a commit and count
 * wherever they are valid. Segments are deleted oldest first, and only below
 * the oldest segment any unfinished slice uses; so a BLOCK whose SLICE frame
 * is gone belongs to a slice whose DONE frame follows later in the log.
 * A streamed slice's SLICE frame that no COMMIT follows names a growing
 * object a crash left behind: recovery removes it.
 * (These rules are applied by the replay's consumer, state/replay.c; this
 * file only guarantees frame validity.)
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
#include "state/remote.h"

#define WAL_MAGIC 0x31574B53u
#define WAL_VERSION 1
#define WRITE_BUF (4u << 20) /* a multiple of DIO_ALIGN */
#define DIO_ALIGN 4096u      /* offset, length and address of direct writes */
#define MAX_SEGS 65536
#define REBASE_AFTER 256 /* stored objects of a segment before a copy */

struct sk_wal {
    char *dir;
    uint64_t *segs; /* sorted live segment numbers */
    uint64_t *sizes;
    size_t nsegs;
    size_t segs_cap, sizes_cap; /* grown together, up to MAX_SEGS */
    int fd;         /* active segment, -1 before the first append */
    uint64_t active;
    uint64_t active_size; /* including buffered bytes */
    uint64_t next_seq;
    uint8_t *wbuf;        /* WRITE_BUF bytes at a DIO_ALIGN address */
    size_t wlen;          /* bytes of frames in wbuf */
    uint64_t wbuf_off;    /* segment offset of wbuf[0] */
    uint64_t written;     /* segment bytes of frames written out */
    int direct;           /* the active segment is open O_DIRECT */
    int readonly; /* replay repairs nothing */
    int unsynced; /* frames appended since the last sync */
    sk_remote *remote; /* where synced bytes go too (remote.h); not owned */
    uint64_t mseg, moff; /* the bytes stored there end here */
    uint32_t mpieces;    /* objects stored of mseg since its last copy */
};

static void seg_path(const sk_wal *w, uint64_t seg, char *out, size_t cap)
{
    sk_wal_segment_path(w->dir, seg, out, cap);
}

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
    if (sk_array_grow(&w->segs, w->nsegs, &w->segs_cap, sizeof *w->segs,
                      16) ||
        sk_array_grow(&w->sizes, w->nsegs, &w->sizes_cap, sizeof *w->sizes,
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

/* Checks the frame at buf[off..len). Returns its total size, or 0. */
static size_t frame_ok(const uint8_t *buf, size_t len, size_t off,
                       uint64_t want_seq, int check_seq)
{
    if (len - off < SK_WAL_HEADER)
        return 0;
    const uint8_t *h = buf + off;
    if (sk_get_u32(h) != WAL_MAGIC || h[5] != WAL_VERSION)
        return 0;
    uint32_t plen = sk_get_u32(h + 16);
    if (plen > SK_WAL_MAX_PAYLOAD || plen > len - off - SK_WAL_HEADER)
        return 0;
    uint32_t crc = sk_crc32c(0, h, 20);
    crc = sk_crc32c(crc, h + SK_WAL_HEADER, plen);
    if (crc != sk_get_u32(h + 20))
        return 0;
    if (check_seq && sk_get_u64(h + 8) != want_seq)
        return 0;
    return SK_WAL_HEADER + plen;
}

/* Is there any valid frame at or after off? (Torn tail vs corruption.) */
static int valid_frame_after(const uint8_t *buf, size_t len, size_t off)
{
    for (size_t i = off; i + SK_WAL_HEADER <= len; i++)
        if (buf[i] == 0x53 && frame_ok(buf, len, i, 0, 0))
            return 1;
    return 0;
}

/* Are buf[off..len) the zeros a direct write pads its last block with? */
static int is_padding(const uint8_t *buf, size_t len, size_t off)
{
    if (len - off >= DIO_ALIGN)
        return 0;
    for (size_t i = off; i < len; i++)
        if (buf[i])
            return 0;
    return 1;
}

static int read_whole(const char *path, uint8_t **data, size_t *len)
{
    int fd;
    int rc = sk_io_open(path, O_RDONLY, 0, &fd);
    if (rc)
        return rc;
    struct stat st;
    if (fstat(fd, &st) != 0) {
        close(fd);
        return SKIPPR_IO;
    }
    size_t n = (size_t)st.st_size;
    uint8_t *buf = sk_malloc(n ? n : 1);
    if (!buf) {
        close(fd);
        return SKIPPR_NOMEM;
    }
    size_t got;
    rc = sk_io_pread_all(fd, buf, n, 0, &got, path);
    close(fd);
    if (rc) {
        sk_free(buf);
        return rc;
    }
    *data = buf;
    *len = got;
    return SKIPPR_OK;
}

int sk_wal_replay(sk_wal *w, sk_wal_cb cb, void *ud)
{
    uint64_t seq = 0;
    int have_seq = 0;
    for (size_t s = 0; s < w->nsegs; s++) {
        char path[PATH_MAX];
        seg_path(w, w->segs[s], path, sizeof path);
        uint8_t *buf = NULL;
        size_t len = 0;
        int rc = read_whole(path, &buf, &len);
        if (rc)
            return rc;
        size_t off = 0;
        while (off < len) {
            /* The first frame after a deleted segment sets the sequence. */
            size_t fl = frame_ok(buf, len, off, seq + 1, have_seq);
            if (!fl)
                break;
            const uint8_t *h = buf + off;
            seq = sk_get_u64(h + 8);
            have_seq = 1;
            rc = cb(ud, (sk_wal_pos){w->segs[s], off}, h[4],
                    h + SK_WAL_HEADER, sk_get_u32(h + 16));
            if (rc) {
                sk_free(buf);
                return rc;
            }
            off += fl;
        }
        if (off < len && frame_ok(buf, len, off, 0, 0)) {
            /* A whole frame, but not the next in sequence: frames went
             * missing before it (a damaged older segment), which no crash
             * can cause. */
            sk_error("WAL corrupt: segment %s has frame %" PRIu64 " at "
                     "offset %zu where frame %" PRIu64 " should follow; "
                     "frames are missing before it. Keep a copy of the state "
                     "folder for inspection.", path,
                     sk_get_u64(buf + off + 8), off, seq + 1);
            sk_free(buf);
            return SKIPPR_CORRUPT;
        }
        if (off < len) {
            int last = s + 1 == w->nsegs;
            if (!last || valid_frame_after(buf, len, off + 1)) {
                sk_error("WAL corrupt: segment %s has an invalid frame at "
                         "offset %zu, and valid frames follow it. Refusing "
                         "to skip them. Keep a copy of the state folder for "
                         "inspection before removing the damaged segment.",
                         path, off);
                sk_free(buf);
                return SKIPPR_CORRUPT;
            }
            if (w->readonly) {
                sk_free(buf);
                break;
            }
            if (is_padding(buf, len, off))
                sk_debug("WAL: cut %zu bytes of padding from %s at offset "
                         "%zu", len - off, path, off);
            else
                sk_info("WAL: cut a torn tail of %zu bytes from %s at "
                        "offset %zu", len - off, path, off);
            int fd;
            rc = sk_io_open(path, O_WRONLY, 0, &fd);
            if (!rc) {
                if (ftruncate(fd, (off_t)off) != 0) {
                    sk_error("truncate %s: %s", path, strerror(errno));
                    rc = SKIPPR_IO;
                } else {
                    rc = sk_io_fsync(fd, path);
                }
                close(fd);
            }
            if (rc) {
                sk_free(buf);
                return rc;
            }
            w->sizes[s] = off;
        }
        sk_free(buf);
    }
    w->next_seq = seq + 1;
    w->active = w->nsegs ? w->segs[w->nsegs - 1] + 1 : 1;
    return SKIPPR_OK;
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

int sk_wal_replay_readonly(sk_wal *w, sk_wal_cb cb, void *ud)
{
    w->readonly = 1;
    return sk_wal_replay(w, cb, ud);
}

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

int sk_wal_read(sk_wal *w, sk_wal_pos pos, skippr_buf *payload, int *type)
{
    char path[PATH_MAX];
    seg_path(w, pos.seg, path, sizeof path);
    int fd;
    int rc = sk_io_open(path, O_RDONLY, 0, &fd);
    if (rc)
        return rc;
    uint8_t h[SK_WAL_HEADER];
    size_t got;
    rc = sk_io_pread_all(fd, h, sizeof h, (off_t)pos.off, &got, path);
    if (rc || got != sizeof h || sk_get_u32(h) != WAL_MAGIC) {
        close(fd);
        sk_error("WAL corrupt: no frame at %s offset %" PRIu64, path, pos.off);
        return rc ? rc : SKIPPR_CORRUPT;
    }
    uint32_t plen = sk_get_u32(h + 16);
    skippr_buf_reset(payload);
    rc = skippr_buf_reserve(payload, plen);
    if (!rc)
        rc = sk_io_pread_all(fd, payload->data, plen,
                             (off_t)(pos.off + SK_WAL_HEADER), &got, path);
    close(fd);
    if (rc)
        return rc;
    uint32_t crc = sk_crc32c(sk_crc32c(0, h, 20), payload->data, got);
    if (got != plen || crc != sk_get_u32(h + 20)) {
        sk_error("WAL corrupt: frame at %s offset %" PRIu64 " fails its "
                 "checksum on read-back", path, pos.off);
        return SKIPPR_CORRUPT;
    }
    payload->len = plen;
    if (type)
        *type = h[4];
    return SKIPPR_OK;
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
