/* The File source: see source.h and file.c's header comment. */
#include "source.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ctx.h"


/* One listed file for the engine: its version is its mtime. */
typedef struct list_ctx {
    skippr_unit_cb cb;
    void *cb_data;
} list_ctx;

/* "SECONDS.NANOSECONDS" (nine digits) into out: what
 * snprintf("%lld.%09ld") writes, without its cost for each of millions
 * of listed files. */
static void mtime_version(char out[32], int64_t sec, long nsec)
{
    char d[24];
    size_t n = 0, o = 0;
    uint64_t u = sec < 0 ? 0 - (uint64_t)sec : (uint64_t)sec;
    do
        d[n++] = (char)('0' + u % 10);
    while ((u /= 10));
    if (sec < 0)
        out[o++] = '-';
    while (n)
        out[o++] = d[--n];
    out[o++] = '.';
    for (int i = 8; i >= 0; i--, nsec /= 10)
        out[o + (size_t)i] = (char)('0' + nsec % 10);
    out[o + 9] = '\0';
}

static int list_one(void *ud, const char *key, const struct stat *st)
{
    list_ctx *l = ud;
    if (!st) { /* by name first (SKIPPR_HOST_NAMES_FIRST) */
        skippr_unit u = {key, NULL, -1, 0};
        int r = l->cb(l->cb_data, &u);
        return r == SKIPPR_UNIT_DESCRIBE ? WALK_STAT : r;
    }
    char version[32];
    mtime_version(version, (int64_t)st->st_mtim.tv_sec, st->st_mtim.tv_nsec);
    skippr_unit u = {key, version, (int64_t)st->st_size,
                     (int64_t)st->st_mtim.tv_sec};
    return l->cb(l->cb_data, &u);
}

/* Lists by walking the tree in key order (walk.h): a round that the engine
 * ends when its batch is full is resumed by the next, so a pass reads each
 * folder once and holds only the folders on the current path. */
int file_src_list(void *ctx, const char *start_after, skippr_unit_cb cb,
                  void *cb_data)
{
    file_ctx *c = ctx;
    list_ctx l = {cb, cb_data};
    int err = walk_run(&c->walk, c->path, c->prefix, start_after, list_one,
                       &l);
    if (err == 0)
        return SKIPPR_OK;
    walk_reset(&c->walk);
    if (err == ENOMEM)
        return SKIPPR_NOMEM;
    LOG(c, SKIPPR_LOG_ERROR, "cannot read folder %s: %s", c->walk.failed,
        strerror(err));
    return err == ENOENT ? SKIPPR_NOENT : SKIPPR_IO;
}

int file_src_open(void *ctx, const skippr_unit *unit, int64_t offset,
                  void **stream)
{
    file_ctx *c = ctx;
    char full[PATH_MAX];
    snprintf(full, sizeof full, "%s/%s", c->path, unit->id);
    int fd = open(full, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        LOG(c, SKIPPR_LOG_ERROR, "open %s: %s", full, strerror(errno));
        return errno == ENOENT ? SKIPPR_NOENT : SKIPPR_IO;
    }
    if (offset > 0 && lseek(fd, (off_t)offset, SEEK_SET) < 0) {
        LOG(c, SKIPPR_LOG_ERROR, "seek %s to %lld: %s", full,
            (long long)offset, strerror(errno));
        close(fd);
        return SKIPPR_IO;
    }
    posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL);
    c->host->counter_add(c->host, "files_opened", 1);
    *stream = (void *)(intptr_t)(fd + 1);
    return SKIPPR_OK;
}

int file_src_read(void *ctx, void *stream, void *buf, size_t cap,
                  size_t *n_out)
{
    file_ctx *c = ctx;
    int fd = (int)(intptr_t)stream - 1;
    ssize_t n;
    do
        n = read(fd, buf, cap);
    while (n < 0 && errno == EINTR);
    if (n < 0) {
        LOG(c, SKIPPR_LOG_ERROR, "read: %s", strerror(errno));
        return SKIPPR_IO;
    }
    *n_out = (size_t)n;
    c->host->counter_add(c->host, "bytes_read", n);
    return SKIPPR_OK;
}

void file_src_close(void *ctx, void *stream)
{
    (void)ctx;
    if (stream)
        close((int)(intptr_t)stream - 1);
}

/* The preflight (plugin.h): the folder can be read. */
int file_src_probe(void *ctx)
{
    file_ctx *c = ctx;
    DIR *d = opendir(c->path);
    if (!d) {
        LOG(c, SKIPPR_LOG_ERROR, "cannot read folder %s: %s: fix `path`%s",
            c->path, strerror(errno),
            errno == EACCES ? " or the folder's permissions" : "");
        return SKIPPR_FATAL;
    }
    closedir(d);
    return SKIPPR_OK;
}
