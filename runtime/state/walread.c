/* Reading the write-ahead log: replay of every segment at open (a torn
 * tail cut, corruption refused by name) and the read-back of one frame.
 * The frame format: wal_impl.h. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/crc32c.h"
#include "base/fsio.h"
#include "state/wal_impl.h"

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

/* Cut segment s (at path) to its first off bytes, and fsync it. */
static int cut_tail(sk_wal *w, size_t s, const char *path, size_t off,
                    size_t len, int padding)
{
    if (padding)
        sk_debug("WAL: cut %zu bytes of padding from %s at offset %zu",
                 len - off, path, off);
    else
        sk_info("WAL: cut a torn tail of %zu bytes from %s at offset %zu",
                len - off, path, off);
    int fd;
    int rc = sk_io_open(path, O_WRONLY, 0, &fd);
    if (rc)
        return rc;
    if (ftruncate(fd, (off_t)off) != 0) {
        sk_error("truncate %s: %s", path, strerror(errno));
        rc = SKIPPR_IO;
    } else {
        rc = sk_io_fsync(fd, path);
    }
    close(fd);
    if (!rc)
        w->sizes[s] = off;
    return rc;
}

/* Segment s (at path, its bytes buf[0..len)) holds no valid frame at off,
 * after frame seq: a torn tail of the newest segment (cut, unless the log
 * is read only) or corruption, refused by name. */
static int segment_end(sk_wal *w, size_t s, const char *path,
                       const uint8_t *buf, size_t len, size_t off,
                       uint64_t seq)
{
    if (frame_ok(buf, len, off, 0, 0)) {
        /* A whole frame, but not the next in sequence: frames went
         * missing before it (a damaged older segment), which no crash
         * can cause. */
        sk_error("WAL corrupt: segment %s has frame %" PRIu64 " at "
                 "offset %zu where frame %" PRIu64 " should follow; "
                 "frames are missing before it. Keep a copy of the state "
                 "folder for inspection.", path,
                 sk_get_u64(buf + off + 8), off, seq + 1);
        return SKIPPR_CORRUPT;
    }
    if (s + 1 != w->nsegs || valid_frame_after(buf, len, off + 1)) {
        sk_error("WAL corrupt: segment %s has an invalid frame at "
                 "offset %zu, and valid frames follow it. Refusing "
                 "to skip them. Keep a copy of the state folder for "
                 "inspection before removing the damaged segment.",
                 path, off);
        return SKIPPR_CORRUPT;
    }
    if (w->readonly)
        return SKIPPR_OK;
    return cut_tail(w, s, path, off, len, is_padding(buf, len, off));
}

/* Segment s's frames to cb, in order, each following frame *seq (the
 * first after a deleted segment sets it: *have_seq 0). */
static int replay_segment(sk_wal *w, size_t s, uint64_t *seq, int *have_seq,
                          sk_wal_cb cb, void *ud)
{
    char path[PATH_MAX];
    seg_path(w, w->segs[s], path, sizeof path);
    uint8_t *buf = NULL;
    size_t len = 0;
    int rc = read_whole(path, &buf, &len);
    if (rc)
        return rc;
    size_t off = 0;
    while (off < len && !rc) {
        size_t fl = frame_ok(buf, len, off, *seq + 1, *have_seq);
        if (!fl)
            break;
        const uint8_t *h = buf + off;
        *seq = sk_get_u64(h + 8);
        *have_seq = 1;
        rc = cb(ud, (sk_wal_pos){w->segs[s], off}, h[4], h + SK_WAL_HEADER,
                sk_get_u32(h + 16));
        off += fl;
    }
    if (!rc && off < len)
        rc = segment_end(w, s, path, buf, len, off, *seq);
    sk_free(buf);
    return rc;
}

int sk_wal_replay(sk_wal *w, sk_wal_cb cb, void *ud)
{
    uint64_t seq = 0;
    int have_seq = 0;
    for (size_t s = 0; s < w->nsegs; s++) {
        int rc = replay_segment(w, s, &seq, &have_seq, cb, ud);
        if (rc)
            return rc;
    }
    w->next_seq = seq + 1;
    w->active = w->nsegs ? w->segs[w->nsegs - 1] + 1 : 1;
    return SKIPPR_OK;
}

int sk_wal_replay_readonly(sk_wal *w, sk_wal_cb cb, void *ud)
{
    w->readonly = 1;
    return sk_wal_replay(w, cb, ud);
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
