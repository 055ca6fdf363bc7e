/* The File sink: objects written as temp files and renamed into place,
 * growing objects, durability by syncfs a batch (see file.c's header
 * comment and sink.h). */
#include "sink.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ctx.h"
#include "dirs.h"

/* One syncfs makes every change on the file system durable, whichever
 * instance made it. Changes are numbered process-wide; an instance's
 * dirty holds the number of its latest, and a sync that began after it
 * (changes_synced: the highest number a finished syncfs covers) lets the
 * instance skip its own. The instances of a skipprd process are one
 * sink's, writing into one folder. */
static atomic_uint_fast64_t changes_made, changes_synced;

static void file_mark_dirty(file_ctx *c)
{
    c->dirty = atomic_fetch_add(&changes_made, 1) + 1;
}


typedef struct file_obj {
    int fd;          /* -1: closed (a growing object reopens it) */
    uint64_t len;    /* a growing object's bytes so far */
    char tmp[PATH_MAX];
    char final[PATH_MAX];
} file_obj;

/* Reject keys that could leave the folder, even though the engine escapes
 * every data-derived segment: empty, ".", ".." segments or a leading '/'. */
int file_key_is_safe(const char *key)
{
    if (!*key || key[0] == '/')
        return 0;
    const char *p = key;
    while (*p) {
        const char *e = strchr(p, '/');
        size_t n = e ? (size_t)(e - p) : strlen(p);
        if (n == 0 || (n == 1 && p[0] == '.') ||
            (n == 2 && p[0] == '.' && p[1] == '.'))
            return 0;
        if (!e)
            break;
        p = e + 1;
    }
    return 1;
}

int file_fsync_dir(file_ctx *c, const char *dir)
{
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) {
        LOG(c, SKIPPR_LOG_ERROR, "open folder %s: %s", dir, strerror(errno));
        return SKIPPR_FATAL;
    }
    int rc = fsync(fd);
    int err = errno;
    close(fd);
    if (rc != 0) {
        LOG(c, SKIPPR_LOG_ERROR, "fsync folder %s: %s", dir, strerror(err));
        return SKIPPR_FATAL;
    }
    return SKIPPR_OK;
}

/* A folder was made: its name is durable once its parent is (now, unless
 * the batch's syncfs will do it). */
static int dir_made(file_ctx *c, char *dir)
{
    char *slash = strrchr(dir, '/');
    if (!slash || slash == dir || !c->fsync || c->deferred)
        return SKIPPR_OK;
    *slash = '\0';
    int rc = file_fsync_dir(c, dir);
    *slash = '/';
    return rc;
}

/* Make folder dir, and its parents when they are missing: the deepest one
 * is tried first, so each folder is made once and a folder that exists
 * costs one mkdir at most. */
static int make_dir(file_ctx *c, char *dir)
{
    if (mkdir(dir, 0755) == 0)
        return dir_made(c, dir);
    if (errno == EEXIST)
        return SKIPPR_OK;
    if (errno == ENOENT) {
        int rc = file_mkdirs(c, dir);
        if (rc)
            return rc;
        if (mkdir(dir, 0755) == 0)
            return dir_made(c, dir);
        if (errno == EEXIST)
            return SKIPPR_OK;
    }
    LOG(c, SKIPPR_LOG_ERROR, "cannot make folder %s: %s: check `path` and "
        "the permissions", dir, strerror(errno));
    return errno == ENOSPC ? SKIPPR_FATAL : SKIPPR_RETRY;
}

/* Make the folders of path, everything before its last '/'. path is
 * restored. */
int file_mkdirs(file_ctx *c, char *path)
{
    char *end = strrchr(path, '/');
    if (!end || end == path)
        return SKIPPR_OK;
    *end = '\0';
    int rc = make_dir(c, path);
    *end = '/';
    return rc;
}

/* The object's final path and its temporary sibling ".NAME.tmp-SLICE". */
static int obj_paths(file_ctx *c, const skippr_object_info *info,
                     file_obj *o)
{
    if (!file_key_is_safe(info->key)) {
        LOG(c, SKIPPR_LOG_ERROR, "refusing unsafe object key '%s'",
            info->key);
        return SKIPPR_FATAL;
    }
    int n = snprintf(o->final, sizeof o->final, "%s/%s%s%s", c->path,
                     c->prefix, *c->prefix ? "/" : "", info->key);
    if (n < 0 || (size_t)n >= sizeof o->final) {
        LOG(c, SKIPPR_LOG_ERROR, "object path too long: %s", info->key);
        return SKIPPR_FATAL;
    }
    char *slash = strrchr(o->final, '/');
    *slash = '\0';
    n = snprintf(o->tmp, sizeof o->tmp, "%s/.%s.tmp-%s", o->final, slash + 1,
                 info->slice_id);
    *slash = '/';
    if (n < 0 || (size_t)n >= sizeof o->tmp) {
        LOG(c, SKIPPR_LOG_ERROR, "object path too long: %s", info->key);
        return SKIPPR_FATAL;
    }
    return SKIPPR_OK;
}

/* Create (truncating) o->tmp, making its folders when they are missing:
 * most objects land in folders that exist, so folders are made only when
 * the first attempt says ENOENT. */
static int create_tmp(file_ctx *c, file_obj *o)
{
    /* A folder made or seen before needs nothing; a new one is made
     * level by level from the first one not known. */
    size_t dn = (size_t)(strrchr(o->final, '/') - o->final);
    if (!file_dir_known(o->final, dn)) {
        for (size_t i = strlen(c->path) + 1; i <= dn; i++) {
            if (i < dn && o->final[i] != '/')
                continue;
            if (file_dir_known(o->final, i))
                continue;
            char save = o->final[i];
            o->final[i] = '\0';
            int rc = make_dir(c, o->final);
            o->final[i] = save;
            if (rc)
                return rc;
            file_dir_note(o->final, i);
        }
    }
    o->fd = open(o->tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (o->fd < 0 && errno == ENOENT) {
        /* removed behind our back: forget what we knew */
        file_dirs_clear();
        int rc = file_mkdirs(c, o->final);
        if (rc)
            return rc;
        o->fd = open(o->tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    }
    if (o->fd < 0) {
        LOG(c, SKIPPR_LOG_ERROR, "create %s: %s", o->tmp, strerror(errno));
        return errno == ENOSPC || errno == EACCES ? SKIPPR_FATAL
                                                  : SKIPPR_RETRY;
    }
    return SKIPPR_OK;
}

int file_sink_open(void *ctx, const skippr_object_info *info, void **h)
{
    file_ctx *c = ctx;
    file_obj *o = calloc(1, sizeof *o);
    if (!o)
        return SKIPPR_NOMEM;
    int rc = obj_paths(c, info, o);
    if (!rc)
        rc = create_tmp(c, o);
    if (rc) {
        free(o);
        return rc;
    }
    *h = o;
    return SKIPPR_OK;
}

int file_sink_write(void *ctx, void *h, const void *buf, size_t len)
{
    file_ctx *c = ctx;
    file_obj *o = h;
    const char *p = buf;
    while (len > 0) {
        ssize_t w = write(o->fd, p, len);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            LOG(c, SKIPPR_LOG_ERROR, "write %s: %s", o->tmp, strerror(errno));
            return errno == ENOSPC ? SKIPPR_FATAL : SKIPPR_RETRY;
        }
        p += w;
        len -= (size_t)w;
        c->host->counter_add(c->host, "bytes_written", w);
    }
    return SKIPPR_OK;
}

void file_sink_abort(void *ctx, void *h)
{
    (void)ctx;
    file_obj *o = h;
    if (o->fd >= 0)
        close(o->fd);
    unlink(o->tmp);
    free(o);
}

int file_sink_commit(void *ctx, void *h)
{
    file_ctx *c = ctx;
    file_obj *o = h;
    if (c->fsync && !c->deferred && fsync(o->fd) != 0) {
        LOG(c, SKIPPR_LOG_ERROR, "fsync %s: %s", o->tmp, strerror(errno));
        file_sink_abort(ctx, h);
        return SKIPPR_FATAL; /* never retry a failed fsync */
    }
#if defined(SYNC_FILE_RANGE_WRITE)
    /* The batch's one syncfs waits for every object: start this one's
     * writing now, so the disk works while the next objects are made. */
    if (c->fsync && c->deferred)
        (void)sync_file_range(o->fd, 0, 0, SYNC_FILE_RANGE_WRITE);
#endif
    close(o->fd);
    o->fd = -1;
    if (rename(o->tmp, o->final) != 0) {
        LOG(c, SKIPPR_LOG_ERROR, "rename %s -> %s: %s", o->tmp, o->final,
            strerror(errno));
        file_sink_abort(ctx, h);
        return SKIPPR_RETRY;
    }
    int rc = SKIPPR_OK;
    file_mark_dirty(c);
    if (c->fsync && !c->deferred) {
        char *slash = strrchr(o->final, '/');
        *slash = '\0';
        rc = file_fsync_dir(c, o->final);
        *slash = '/';
    }
    free(o);
    if (rc == SKIPPR_OK)
        c->host->counter_add(c->host, "files_written", 1);
    return rc;
}

/* ---- growing objects (SKIPPR_SINK_GROWS) ------------------------------ */

/* notes: none; the File sink gives no grow_note(). */
int file_grow_open(void *ctx, const skippr_object_info *info,
                   uint64_t length, const char *notes, size_t notes_len,
                   void **h)
{
    (void)notes;
    (void)notes_len;
    file_ctx *c = ctx;
    file_obj *o = calloc(1, sizeof *o);
    if (!o)
        return SKIPPR_NOMEM;
    o->fd = -1;
    int rc = obj_paths(c, info, o);
    if (!rc && length == 0)
        rc = create_tmp(c, o);
    else if (!rc) {
        struct stat sb;
        o->fd = open(o->tmp, O_WRONLY | O_CLOEXEC);
        if (o->fd < 0 || fstat(o->fd, &sb) != 0) {
            LOG(c, SKIPPR_LOG_ERROR, "reopen %s: %s", o->tmp,
                strerror(errno));
            rc = errno == ENOENT ? SKIPPR_NOENT : SKIPPR_FATAL;
        } else if ((uint64_t)sb.st_size < length) {
            LOG(c, SKIPPR_LOG_ERROR, "%s holds %lld bytes, fewer than the "
                "%llu made durable: it was changed outside skippr", o->tmp,
                (long long)sb.st_size, (unsigned long long)length);
            rc = SKIPPR_NOENT;
        } else if ((uint64_t)sb.st_size > length &&
                   ftruncate(o->fd, (off_t)length) != 0) {
            LOG(c, SKIPPR_LOG_ERROR, "cut %s back to %llu bytes: %s", o->tmp,
                (unsigned long long)length, strerror(errno));
            rc = SKIPPR_FATAL;
        }
    }
    if (rc) {
        if (o->fd >= 0)
            close(o->fd);
        free(o);
        return rc;
    }
    o->len = length;
    c->grow_fds++;
    *h = o;
    return SKIPPR_OK;
}

static void grow_fd_close(file_ctx *c, file_obj *o)
{
    if (o->fd < 0)
        return;
    close(o->fd);
    o->fd = -1;
    c->grow_fds--;
}

int file_grow_write(void *ctx, void *h, const void *buf, size_t len)
{
    file_ctx *c = ctx;
    file_obj *o = h;
    if (o->fd < 0) {
        if ((o->fd = open(o->tmp, O_WRONLY | O_CLOEXEC)) < 0) {
            LOG(c, SKIPPR_LOG_ERROR, "reopen %s: %s", o->tmp,
                strerror(errno));
            return SKIPPR_FATAL;
        }
        c->grow_fds++;
    }
    const char *p = buf;
    while (len > 0) {
        ssize_t w = pwrite(o->fd, p, len, (off_t)o->len);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            LOG(c, SKIPPR_LOG_ERROR, "write %s: %s", o->tmp, strerror(errno));
            return SKIPPR_FATAL; /* the engine cuts it back at restart */
        }
        p += w;
        len -= (size_t)w;
        o->len += (uint64_t)w;
        c->host->counter_add(c->host, "bytes_written", w);
    }
    file_mark_dirty(c);
    if (c->grow_fds > c->grow_fd_cap)
        grow_fd_close(c, o);
    return SKIPPR_OK;
}

void file_grow_close(void *ctx, void *h)
{
    grow_fd_close(ctx, h);
    free(h);
}

int file_grow_commit(void *ctx, void *h, const skippr_object_info *info)
{
    file_ctx *c = ctx;
    file_obj *o = h;
    int rc = SKIPPR_OK;
    if (o->len != info->size) {
        LOG(c, SKIPPR_LOG_ERROR, "%s holds %llu bytes, not the %llu of its "
            "object; not renamed", o->tmp, (unsigned long long)o->len,
            (unsigned long long)info->size);
        rc = SKIPPR_CORRUPT;
    } else if (c->fsync && !c->deferred) {
        if (o->fd < 0 && (o->fd = open(o->tmp, O_WRONLY | O_CLOEXEC)) >= 0)
            c->grow_fds++;
        if (o->fd < 0 || fsync(o->fd) != 0) {
            LOG(c, SKIPPR_LOG_ERROR, "fsync %s: %s", o->tmp, strerror(errno));
            rc = SKIPPR_FATAL;
        }
    }
    grow_fd_close(c, o);
    if (!rc && rename(o->tmp, o->final) != 0) {
        LOG(c, SKIPPR_LOG_ERROR, "rename %s -> %s: %s", o->tmp, o->final,
            strerror(errno));
        rc = SKIPPR_FATAL;
    }
    if (!rc) {
        file_mark_dirty(c);
        if (c->fsync && !c->deferred) {
            char *slash = strrchr(o->final, '/');
            *slash = '\0';
            rc = file_fsync_dir(c, o->final);
            *slash = '/';
        }
    }
    if (!rc)
        c->host->counter_add(c->host, "files_written", 1);
    free(o);
    return rc;
}

int file_grow_discard(void *ctx, const skippr_object_info *info)
{
    file_ctx *c = ctx;
    file_obj o = {.fd = -1};
    int rc = obj_paths(c, info, &o);
    if (rc)
        return rc;
    if (unlink(o.tmp) != 0 && errno != ENOENT) {
        LOG(c, SKIPPR_LOG_ERROR, "remove %s: %s", o.tmp, strerror(errno));
        return SKIPPR_FATAL;
    }
    file_mark_dirty(c);
    return SKIPPR_OK;
}

/* Recovery: SKIPPR_OK when the object is there with info's size and
 * CRC32C (its name holds the slice's id, so the content is the check). */
int file_sink_check(void *ctx, const skippr_object_info *info)
{
    file_ctx *c = ctx;
    file_obj o = {.fd = -1};
    int rc = obj_paths(c, info, &o);
    if (rc)
        return rc;
    struct stat sb;
    if (stat(o.final, &sb) != 0)
        return errno == ENOENT ? SKIPPR_NOENT : SKIPPR_RETRY;
    if ((uint64_t)sb.st_size != info->size ||
        !SKIPPR_HOST_HAS(c->host, crc32c) || !c->host->crc32c)
        return SKIPPR_CHANGED;
    int fd = open(o.final, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return SKIPPR_RETRY;
    char buf[1 << 16];
    uint32_t crc = 0;
    ssize_t n;
    while ((n = read(fd, buf, sizeof buf)) > 0)
        crc = c->host->crc32c(crc, buf, (size_t)n);
    close(fd);
    if (n < 0)
        return SKIPPR_RETRY;
    return crc == info->crc32c ? SKIPPR_OK : SKIPPR_CHANGED;
}

/* Make everything renamed since the last call durable: syncfs() of the
 * file system holding the output folder writes back every file, folder
 * and rename at once. A failure is fatal (never retried). */
int file_sink_sync(void *ctx)
{
    file_ctx *c = ctx;
    if (!c->deferred || !c->dirty)
        return SKIPPR_OK;
    if (atomic_load(&changes_synced) >= c->dirty) {
        c->dirty = 0; /* another instance's syncfs began after our change */
        return SKIPPR_OK;
    }
    uint64_t upto = atomic_load(&changes_made);
    const char *fail = getenv("SKIPPR_TEST_FILE_SYNC_FAIL");
    if (fail && strcmp(fail, "1") == 0) {
        LOG(c, SKIPPR_LOG_ERROR, "syncfs %s: injected failure (test)",
            c->path);
        return SKIPPR_FATAL;
    }
    int fd = open(c->path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) {
        LOG(c, SKIPPR_LOG_ERROR, "open %s: %s", c->path, strerror(errno));
        return SKIPPR_FATAL;
    }
    int rc = syncfs(fd);
    int err = errno;
    close(fd);
    if (rc != 0) {
        LOG(c, SKIPPR_LOG_ERROR, "syncfs %s: %s", c->path, strerror(err));
        return SKIPPR_FATAL;
    }
    c->dirty = 0;
    uint64_t seen = atomic_load(&changes_synced);
    while (seen < upto &&
           !atomic_compare_exchange_weak(&changes_synced, &seen, upto))
        ;
    c->host->counter_add(c->host, "syncs", 1);
    return SKIPPR_OK;
}

/* The preflight (plugin.h): the objects' folder can be made, and a file
 * written in it. An unnamed file (O_TMPFILE) never shows in the folder,
 * so nothing is left whatever fails; a file system without it gets a
 * named probe, removed at once. */
int file_sink_probe(void *ctx)
{
    file_ctx *c = ctx;
    char dir[PATH_MAX], probe[PATH_MAX + 64];
    int n = snprintf(dir, sizeof dir, "%s/%s", c->path,
                     c->prefix ? c->prefix : "");
    if (n < 0 || (size_t)n >= sizeof dir - 2) {
        LOG(c, SKIPPR_LOG_ERROR, "folder %s: path too long", c->path);
        return SKIPPR_FATAL;
    }
    snprintf(probe, sizeof probe, "%s/.", dir);
    if (file_mkdirs(c, probe))
        return SKIPPR_FATAL; /* said by make_dir */
    int fd = open(dir, O_TMPFILE | O_WRONLY | O_CLOEXEC, 0600);
    if (fd < 0 && (errno == EOPNOTSUPP || errno == EISDIR ||
                   errno == EINVAL)) {
        snprintf(probe, sizeof probe, "%s/.skippr-probe-%ld", dir,
                 (long)getpid());
        fd = open(probe, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
        if (fd >= 0)
            unlink(probe);
    }
    if (fd < 0) {
        LOG(c, SKIPPR_LOG_ERROR, "cannot write in folder %s: %s: fix `path` "
            "or the folder's permissions", dir, strerror(errno));
        return SKIPPR_FATAL;
    }
    close(fd);
    return SKIPPR_OK;
}
