/* The File sink's store calls: see store.h. */
#include "store.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ctx.h"
#include "sink.h"

/* file_store_get and file_store_put without SKIPPR_SINK_STORE: enough for the
 * engine's claim on the sink (a small file under _skippr/, made only if
 * absent), not for holding state (no ETag conditions, no listing). */

/* The absolute path of store key into out (PATH_MAX). */
static int store_path(file_ctx *c, const char *key, char *out)
{
    if (!file_key_is_safe(key))
        return SKIPPR_INVAL;
    int n = snprintf(out, PATH_MAX, "%s/%s%s%s", c->path, c->prefix,
                     *c->prefix ? "/" : "", key);
    return n < 0 || n >= PATH_MAX ? SKIPPR_INVAL : SKIPPR_OK;
}

int file_store_get(void *ctx, const char *key, uint64_t offset, void *buf,
                   size_t cap, size_t *got, uint64_t *size, char *etag,
                   size_t etag_cap)
{
    file_ctx *c = ctx;
    char path[PATH_MAX];
    int rc = store_path(c, key, path);
    if (rc)
        return rc;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return errno == ENOENT ? SKIPPR_NOENT : SKIPPR_IO;
    struct stat st;
    ssize_t n = fstat(fd, &st) == 0 ? pread(fd, buf, cap, (off_t)offset) : -1;
    close(fd);
    if (n < 0)
        return SKIPPR_IO;
    *got = (size_t)n;
    *size = (uint64_t)st.st_size;
    if (etag && etag_cap)
        etag[0] = '\0';
    return SKIPPR_OK;
}

/* Write a temporary sibling, fsync it, then link it in (cond "*": EEXIST
 * is CHANGED) or rename it over the key (cond NULL); fsync the folder. */
int file_store_put(void *ctx, const char *key, const void *buf, size_t len,
                   const char *cond, char *etag, size_t etag_cap)
{
    file_ctx *c = ctx;
    char path[PATH_MAX], tmp[PATH_MAX + 32];
    int rc = store_path(c, key, path);
    if (rc || (cond && strcmp(cond, "*") != 0))
        return SKIPPR_INVAL;
    if ((rc = file_mkdirs(c, path)))
        return rc;
    snprintf(tmp, sizeof tmp, "%s.tmp-%ld", path, (long)getpid());
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0)
        return SKIPPR_IO;
    const char *p = buf;
    int ok = 1;
    while (ok && len > 0) {
        ssize_t w = write(fd, p, len);
        ok = w > 0 || (w < 0 && errno == EINTR);
        p += w > 0 ? w : 0;
        len -= w > 0 ? (size_t)w : 0;
    }
    ok = ok && fsync(fd) == 0;
    close(fd);
    if (ok)
        ok = cond ? link(tmp, path) == 0 : rename(tmp, path) == 0;
    int err = errno;
    unlink(tmp);
    if (!ok)
        return cond && err == EEXIST ? SKIPPR_CHANGED : SKIPPR_IO;
    char *slash = strrchr(path, '/');
    *slash = '\0';
    rc = file_fsync_dir(c, path);
    if (etag && etag_cap)
        etag[0] = '\0';
    return rc;
}
