/* The Tar sink: an example plugin built out of tree against the installed
 * skippr SDK. Every object becomes one member of a single POSIX (pax) tar
 * archive, readable by any tar:
 *
 *     tar -tf out.tar                      # the object keys
 *     tar -xOf out.tar 'order_created/...' # one object's exact bytes
 *
 * How it keeps the engine's promise that writing a slice again is harmless:
 * - each member carries a pax comment "skippr slice=ID crc32c=HEX";
 * - object_open() takes an exclusive lock on the archive (flock, so other
 *   instances and processes wait), scans the member headers and finds the
 *   end of the last complete member. A member cut short by a crash is
 *   dropped there. If the same slice is already there, the write is
 *   skipped instead of adding a second copy;
 * - object_commit() writes the end-of-archive blocks, fsyncs, and lets go.
 *
 * Options (YAML, under `Tar:`): path (the archive file), fsync.
 * Memory: the object is streamed to the file, never held; the scan reads
 * only headers.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <skippr/plugin.h>

#define BLOCK 512
#define MAX_PAX 65536 /* a longer extended header is not ours: stop there */

static const char zeros[3 * BLOCK];

typedef struct tar_ctx {
    const skippr_host *host;
    const char *path; /* option */
    int fsync;        /* option */
    int fd;           /* this instance's own open file (own flock) */
} tar_ctx;

/* One object being written. Owned by the sink between object_open and
 * commit/abort. */
typedef struct tar_obj {
    off_t start;     /* where this member's headers begin */
    off_t data;      /* where its bytes begin */
    uint64_t size;   /* bytes promised by the engine */
    uint64_t written;
    int present;     /* the same slice is already in the archive */
} tar_obj;

static const skippr_option options[] = {
    {"path", SKIPPR_OPT_STRING, NULL,
     SKIPPR_OPT_REQUIRED | SKIPPR_OPT_FS_PATH, offsetof(tar_ctx, path),
     "The tar archive objects are added to; created if missing."},
    {"fsync", SKIPPR_OPT_BOOL, "true", 0, offsetof(tar_ctx, fsync),
     "fsync the archive before a commit returns (false loses "
     "exactly-once across power loss)."},
    {NULL, 0, NULL, 0, 0, NULL}};

/* ---- tar headers -------------------------------------------------------- */

static void octal(char *field, size_t width, uint64_t v)
{
    /* width - 1 digits and a NUL, as ustar readers expect */
    snprintf(field, width, "%0*" PRIo64, (int)width - 1, v);
}

static void ustar_header(char h[BLOCK], const char *name, char type,
                         uint64_t size)
{
    memset(h, 0, BLOCK);
    snprintf(h, 100, "%s", name); /* the pax path is the real name */
    memcpy(h + 100, "0000644", 8);
    memcpy(h + 108, "0000000", 8);
    memcpy(h + 116, "0000000", 8);
    octal(h + 124, 12, size < 077777777777ull ? size : 0);
    octal(h + 136, 12, 0); /* mtime 0: the same slice, the same bytes */
    h[156] = type;
    memcpy(h + 257, "ustar", 6);
    memcpy(h + 263, "00", 2);
    memset(h + 148, ' ', 8);
    unsigned sum = 0;
    for (int i = 0; i < BLOCK; i++)
        sum += (unsigned char)h[i];
    snprintf(h + 148, 8, "%06o", sum);
}

static int header_ok(const char h[BLOCK])
{
    if (memcmp(h + 257, "ustar", 5) != 0)
        return 0;
    unsigned sum = 0;
    for (int i = 0; i < BLOCK; i++)
        sum += (i >= 148 && i < 156) ? ' ' : (unsigned char)h[i];
    return strtoul(h + 148, NULL, 8) == sum;
}

/* Append one pax record "LEN key=value\n" to buf; LEN counts itself. */
static int pax_record(char *buf, size_t cap, size_t *len, const char *key,
                      const char *value)
{
    size_t body = strlen(key) + strlen(value) + 3; /* ' ', '=', '\n' */
    size_t digits = 1, total;
    for (;;) {
        total = body + digits;
        size_t d = (size_t)snprintf(NULL, 0, "%zu", total);
        if (d == digits)
            break;
        digits = d;
    }
    if (*len + total + 1 > cap)
        return -1;
    snprintf(buf + *len, cap - *len, "%zu %s=%s\n", total, key, value);
    *len += total;
    return 0;
}

static void comment_for(const skippr_object_info *info, char *out, size_t n)
{
    snprintf(out, n, "skippr slice=%s crc32c=%08" PRIx32 " size=%" PRIu64,
             info->slice_id, info->crc32c, info->size);
}

static uint64_t round_up(uint64_t n)
{
    return (n + BLOCK - 1) / BLOCK * BLOCK;
}

/* ---- reading the archive ------------------------------------------------ */

typedef enum found { FOUND_NONE, FOUND_SAME, FOUND_OTHER } found;

/* Walk the members. *end gets the offset just past the last complete
 * member (where the next one goes); *f what the last member named key is.
 * Returns 0, or -1 on a read error (errno set). */
static int scan(tar_ctx *c, const char *key, const char *comment,
                off_t *end, found *f)
{
    struct stat st;
    if (fstat(c->fd, &st))
        return -1;
    char h[BLOCK];
    char *pax = malloc(MAX_PAX + 1);
    if (!pax)
        return -1;
    off_t off = 0;
    *f = FOUND_NONE;
    for (;;) {
        ssize_t n = pread(c->fd, h, BLOCK, off);
        if (n < 0) {
            free(pax);
            return -1;
        }
        if (n < BLOCK || !header_ok(h))
            break; /* the end blocks, a torn header, or the end of file */
        char path[4096] = "", cmt[512] = "";
        off_t member = off; /* where the next member goes if this is torn */
        uint64_t size = strtoull(h + 124, NULL, 8);
        if (h[156] == 'x') { /* our pax header, then the file's header */
            uint64_t plen = size;
            int has_size = 0;
            if (plen > MAX_PAX ||
                pread(c->fd, pax, plen, off + BLOCK) != (ssize_t)plen) {
                off = member;
                break;
            }
            pax[plen] = '\0';
            for (char *p = pax; p < pax + plen;) {
                char *sp = strchr(p, ' ');
                unsigned long len = strtoul(p, NULL, 10);
                if (!sp || len == 0 || p + len > pax + plen)
                    break;
                char *kv = sp + 1, *eq = memchr(kv, '=', len);
                size_t vlen = eq ? (size_t)(p + len - 1 - (eq + 1)) : 0;
                if (eq && eq - kv == 4 && !memcmp(kv, "path", 4))
                    snprintf(path, sizeof path, "%.*s", (int)vlen, eq + 1);
                else if (eq && eq - kv == 7 && !memcmp(kv, "comment", 7))
                    snprintf(cmt, sizeof cmt, "%.*s", (int)vlen, eq + 1);
                else if (eq && eq - kv == 4 && !memcmp(kv, "size", 4)) {
                    size = strtoull(eq + 1, NULL, 10);
                    has_size = 1;
                }
                p += len;
            }
            off += BLOCK + (off_t)round_up(plen);
            if (pread(c->fd, h, BLOCK, off) != BLOCK || !header_ok(h)) {
                off = member;
                break;
            }
            if (!has_size)
                size = strtoull(h + 124, NULL, 8);
        } else {
            snprintf(path, sizeof path, "%.100s", h);
        }
        off_t next = off + BLOCK + (off_t)round_up(size);
        if (next > st.st_size) {
            off = member; /* cut short by a crash: the member is not there */
            break;
        }
        if (strcmp(path, key) == 0)
            *f = strcmp(cmt, comment) == 0 ? FOUND_SAME : FOUND_OTHER;
        off = next;
    }
    free(pax);
    *end = off;
    return 0;
}

/* ---- the sink ----------------------------------------------------------- */

/* A new archive's name must survive a power loss too: sync its folder. */
static void sync_folder(const skippr_host *host, const char *path)
{
    char *dir = strdup(path), *slash = dir ? strrchr(dir, '/') : NULL;
    int dfd = -1;
    if (dir)
        dfd = open(slash ? (slash == dir ? "/" : (*slash = '\0', dir)) : ".",
                   O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd < 0 || fsync(dfd))
        host->log(host, SKIPPR_LOG_WARN, "cannot sync the folder of %s: %s",
                  path, strerror(errno));
    if (dfd >= 0)
        close(dfd);
    free(dir);
}

static int init(void *ctx, const skippr_host *host)
{
    tar_ctx *c = ctx;
    c->host = host;
    c->fd = -1;
    int rc = SKIPPR_OK;
    if (!c->path || !*c->path) {
        host->log(host, SKIPPR_LOG_ERROR, "option 'path' is empty: name "
                  "the tar archive to write");
        rc = SKIPPR_INVAL;
    } else {
        c->fd = open(c->path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
        if (c->fd >= 0 && c->fsync)
            sync_folder(host, c->path);
        else if (c->fd < 0 && errno == EEXIST)
            c->fd = open(c->path, O_RDWR | O_CLOEXEC);
        if (c->fd < 0) {
            host->log(host, SKIPPR_LOG_ERROR, "cannot open %s: %s", c->path,
                      strerror(errno));
            rc = SKIPPR_FATAL;
        }
    }
    return rc;
}

static void destroy(void *ctx)
{
    tar_ctx *c = ctx;
    if (c->fd >= 0)
        close(c->fd);
}

static int io_error(tar_ctx *c, const char *what)
{
    int e = errno;
    c->host->log(c->host, SKIPPR_LOG_ERROR, "%s %s: %s", what, c->path,
                 strerror(e));
    return e == ENOSPC || e == EIO || e == EDQUOT ? SKIPPR_RETRY
                                                  : SKIPPR_FATAL;
}

static int pwrite_all(int fd, const void *buf, size_t len, off_t off)
{
    const char *p = buf;
    while (len > 0) {
        ssize_t n = pwrite(fd, p, len, off);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return -1;
        p += n;
        off += n;
        len -= (size_t)n;
    }
    return 0;
}

static void release(tar_ctx *c, tar_obj *o)
{
    flock(c->fd, LOCK_UN);
    free(o);
}

/* Under the lock: the member's pax header (path, comment, size) and its
 * file header, at o->start; o->data is where its bytes go. */
static int write_headers(tar_ctx *c, const skippr_object_info *info,
                         const char *comment, tar_obj *o)
{
    char pax[8192], sz[32];
    size_t plen = 0;
    snprintf(sz, sizeof sz, "%" PRIu64, info->size);
    if (pax_record(pax, sizeof pax, &plen, "path", info->key) ||
        pax_record(pax, sizeof pax, &plen, "comment", comment) ||
        pax_record(pax, sizeof pax, &plen, "size", sz)) {
        c->host->log(c->host, SKIPPR_LOG_ERROR, "key too long for a pax "
                     "header: %s", info->key);
        return SKIPPR_FATAL;
    }
    uint64_t pax_blocks = round_up(plen);
    char *head = calloc(1, 2 * BLOCK + pax_blocks);
    if (!head)
        return SKIPPR_NOMEM;
    ustar_header(head, "PaxHeaders/skippr", 'x', plen);
    memcpy(head + BLOCK, pax, plen);
    ustar_header(head + BLOCK + pax_blocks, info->key, '0', info->size);
    int rc = pwrite_all(c->fd, head, 2 * BLOCK + pax_blocks, o->start)
                 ? io_error(c, "write")
                 : SKIPPR_OK;
    free(head);
    o->data = o->start + 2 * BLOCK + (off_t)pax_blocks;
    return rc;
}

static int object_open(void *ctx, const skippr_object_info *info, void **h)
{
    tar_ctx *c = ctx;
    tar_obj *o = calloc(1, sizeof *o);
    if (!o)
        return SKIPPR_NOMEM;
    if (flock(c->fd, LOCK_EX)) {
        free(o);
        return io_error(c, "lock");
    }
    char comment[256];
    comment_for(info, comment, sizeof comment);
    found f = FOUND_NONE;
    int rc = scan(c, info->key, comment, &o->start, &f) ? io_error(c, "read")
                                                        : SKIPPR_OK;
    o->size = info->size;
    o->present = f == FOUND_SAME;
    if (!rc && !o->present)
        rc = write_headers(c, info, comment, o);
    if (rc) {
        release(c, o);
        return rc;
    }
    *h = o;
    return SKIPPR_OK;
}

static int object_write(void *ctx, void *h, const void *buf, size_t len)
{
    tar_ctx *c = ctx;
    tar_obj *o = h;
    if (o->written + len > o->size) {
        c->host->log(c->host, SKIPPR_LOG_ERROR, "more bytes than the "
                     "%" PRIu64 " announced", o->size);
        return SKIPPR_FATAL;
    }
    if (!o->present &&
        pwrite_all(c->fd, buf, len, o->data + (off_t)o->written))
        return io_error(c, "write");
    o->written += len;
    return SKIPPR_OK;
}

static int object_commit(void *ctx, void *h)
{
    tar_ctx *c = ctx;
    tar_obj *o = h;
    int rc = SKIPPR_OK;
    if (o->written != o->size) {
        c->host->log(c->host, SKIPPR_LOG_ERROR, "%" PRIu64 " bytes written "
                     "of %" PRIu64, o->written, o->size);
        rc = SKIPPR_FATAL;
        goto out;
    }
    /* Padding to the block, then the two zero blocks that end an archive;
     * anything after them (a dropped member) is cut off. */
    off_t end = o->present ? o->start
                           : o->data + (off_t)round_up(o->size);
    off_t pad_from = o->present ? end : o->data + (off_t)o->size;
    if (pwrite_all(c->fd, zeros, (size_t)(end - pad_from) + 2 * BLOCK,
                   pad_from) ||
        ftruncate(c->fd, end + 2 * BLOCK) ||
        (c->fsync && fsync(c->fd)))
        rc = io_error(c, "finish");
out:
    release(c, o);
    return rc;
}

static void object_abort(void *ctx, void *h)
{
    tar_ctx *c = ctx;
    tar_obj *o = h;
    /* Cut the partial member off; the next open would skip it anyway. */
    if (!o->present && ftruncate(c->fd, o->start) == 0)
        (void)pwrite_all(c->fd, zeros, 2 * BLOCK, o->start);
    release(c, o);
}

static int object_check(void *ctx, const skippr_object_info *info)
{
    tar_ctx *c = ctx;
    char comment[256];
    comment_for(info, comment, sizeof comment);
    if (flock(c->fd, LOCK_SH))
        return io_error(c, "lock");
    off_t end;
    found f;
    int bad = scan(c, info->key, comment, &end, &f);
    flock(c->fd, LOCK_UN);
    if (bad)
        return io_error(c, "read");
    return f == FOUND_SAME ? SKIPPR_OK
           : f == FOUND_OTHER ? SKIPPR_CHANGED
                              : SKIPPR_NOENT;
}

static const skippr_sink_ops sink = {
    .struct_size = sizeof(skippr_sink_ops),
    .ctx_size = sizeof(tar_ctx),
    .options = options,
    .init = init,
    .destroy = destroy,
    .object_open = object_open,
    .object_write = object_write,
    .object_commit = object_commit,
    .object_abort = object_abort,
    .object_check = object_check,
};

/* On the command line: skipprd sync --source ... --sink tar://ARCHIVE. */
static const skippr_url_form urls[] = {
    {.scheme = "tar", .roles = SKIPPR_URL_SINK, .rest_option = "path",
     .usage = "tar://ARCHIVE"},
    {0},
};

static const skippr_plugin plugin = {
    .abi_version = SKIPPR_ABI_VERSION,
    .struct_size = sizeof(skippr_plugin),
    .name = "Tar",
    .description = "Adds each object to one tar archive (an SDK example).",
    .version = "1.0.0",
    .sink = &sink,
    .urls = urls,
};

SKIPPR_PLUGIN_DEFINE(plugin)
