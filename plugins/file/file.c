/* The File plugin: a folder as a source and as a sink.
 *
 * Source. Units are the regular files under {path}/{prefix...}, named by
 * their path relative to {path} ("2021/10/03/events-1"). prefix is a string
 * prefix of that name, like an S3 key prefix. Names starting with '.' (at
 * any level) are skipped: they are temp files and state folders. Files are
 * listed in key order, as S3 lists, by a walk that holds only the folders
 * on its current path and resumes between listing rounds (walk.h). The
 * version of a unit is its mtime; a file changed after it was copied is
 * reported by the engine, not re-read. Under SKIPPR_HOST_NAMES_FIRST
 * (verify_done_units: false) each file is offered by name before its
 * stat, and the ones the engine skips are never stat'ed.
 *
 * Sink. An object "a/b/c.jsonl" becomes {path}/{prefix}/a/b/c.jsonl,
 * written as {dir}/.c.jsonl.tmp-{slice} and renamed into place. Writing the
 * same object again replaces it atomically with the same bytes, which makes
 * retries and crash recovery idempotent. Durability: when the engine calls
 * sync() (host flag SKIPPR_HOST_SYNCS_SINKS), a batch of objects is made
 * durable by one syncfs() of the output file system before the engine
 * records any of them; otherwise each file is fsynced before its rename and
 * its folder after it, as are folders the sink creates.
 *
 * Test hook: SKIPPR_TEST_FILE_SYNC_FAIL=1 in the environment makes sync()
 * fail as a failed syncfs would, so tests can check that the engine then
 * records none of the batch.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <skippr/plugin.h>
#include "growbuf.h"
#include "walk.h"

typedef struct file_ctx {
    const skippr_host *host;
    const char *path;   /* option */
    const char *prefix; /* option */
    int fsync;          /* option (sink) */
    int deferred;       /* durability left to sync(): one syncfs a batch */
    uint64_t dirty;     /* the number of its latest change not yet synced
                         * (mark_dirty), or 0 */
    long grow_fds;      /* descriptors held by growing objects */
    long grow_fd_cap;   /* above this many, a write closes its own */
    walker walk;        /* the source's listing, paused between rounds */
} file_ctx;

/* Folders made or found, by any instance of the process (the upload
 * threads' instances write into one tree): a set of absolute paths (open
 * addressing, DIRS_CAP slots, emptied when three quarters full), so that
 * an object in a known folder costs no mkdir and no failed open, a new
 * one only the mkdirs of its missing levels, and each folder is made
 * once, not once per instance. Freed with the last instance. */
#define DIRS_CAP 65536u
static struct {
    pthread_mutex_t lock;
    char **v;
    size_t n;
    long users; /* instances alive */
} dirset = {PTHREAD_MUTEX_INITIALIZER, NULL, 0, 0};

/* One syncfs makes every change on the file system durable, whichever
 * instance made it. Changes are numbered process-wide; an instance's
 * dirty holds the number of its latest, and a sync that began after it
 * (changes_synced: the highest number a finished syncfs covers) lets the
 * instance skip its own. The instances of a skipprd process are one
 * sink's, writing into one folder. */
static atomic_uint_fast64_t changes_made, changes_synced;

static void mark_dirty(file_ctx *c)
{
    c->dirty = atomic_fetch_add(&changes_made, 1) + 1;
}

static const skippr_option source_options[] = {
    {"path", SKIPPR_OPT_STRING, NULL, SKIPPR_OPT_REQUIRED | SKIPPR_OPT_FS_PATH,
     offsetof(file_ctx, path), "Folder to read from; a relative one is the config file's folder's."},
    {"prefix", SKIPPR_OPT_STRING, "", 0, offsetof(file_ctx, prefix),
     "Only files whose path under the folder starts with this text."},
    {NULL, 0, NULL, 0, 0, NULL}};

static const skippr_option sink_options[] = {
    {"path", SKIPPR_OPT_STRING, NULL, SKIPPR_OPT_REQUIRED | SKIPPR_OPT_FS_PATH,
     offsetof(file_ctx, path), "Folder to write into (created if missing); a relative one is the "
     "config file's folder's."},
    {"prefix", SKIPPR_OPT_STRING, "", 0, offsetof(file_ctx, prefix),
     "Sub-folder under path for every object."},
    {"fsync", SKIPPR_OPT_BOOL, "true", 0, offsetof(file_ctx, fsync),
     "Make objects durable before they count as written (one syncfs per "
     "batch, or an fsync per file and folder)."},
    {NULL, 0, NULL, 0, 0, NULL}};

#define LOG(c, lvl, ...) (c)->host->log((c)->host, (lvl), __VA_ARGS__)

static int init(void *ctx, const skippr_host *host)
{
    file_ctx *c = ctx;
    c->host = host;
    pthread_mutex_lock(&dirset.lock);
    dirset.users++;
    pthread_mutex_unlock(&dirset.lock);
    int rc = SKIPPR_OK;
    if (!c->path || !*c->path) {
        LOG(c, SKIPPR_LOG_ERROR, "option 'path' is empty");
        rc = SKIPPR_INVAL;
    } else if (c->prefix &&
               (c->prefix[0] == '/' || strstr(c->prefix, ".."))) {
        LOG(c, SKIPPR_LOG_ERROR, "prefix '%s' must be relative and must not "
            "contain '..'", c->prefix);
        rc = SKIPPR_INVAL;
    }
    c->deferred = c->fsync && SKIPPR_HOST_HAS(host, flags) &&
                  (host->flags & SKIPPR_HOST_SYNCS_SINKS);
    c->walk.names_first = SKIPPR_HOST_HAS(host, flags) &&
                          (host->flags & SKIPPR_HOST_NAMES_FIRST);
    /* Growing objects keep their descriptor between writes, up to a
     * quarter of the process's limit (thousands of partitions open at
     * once must not exhaust it); past that each write opens and closes. */
    struct rlimit rl;
    c->grow_fd_cap = 64;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY &&
        (long)(rl.rlim_cur / 4) > c->grow_fd_cap)
        c->grow_fd_cap = (long)(rl.rlim_cur / 4);
    return rc;
}

/* Empty the folder set; dirset.lock held. */
static void dirs_clear_locked(void)
{
    if (!dirset.v)
        return;
    for (size_t i = 0; i < DIRS_CAP; i++)
        free(dirset.v[i]);
    memset(dirset.v, 0, DIRS_CAP * sizeof *dirset.v);
    dirset.n = 0;
}

/* Forget every folder (one was removed behind our back). */
static void dirs_clear(void)
{
    pthread_mutex_lock(&dirset.lock);
    dirs_clear_locked();
    pthread_mutex_unlock(&dirset.lock);
}

static void destroy(void *ctx)
{
    file_ctx *c = ctx;
    walk_reset(&c->walk);
    pthread_mutex_lock(&dirset.lock);
    if (--dirset.users == 0) {
        dirs_clear_locked();
        free(dirset.v);
        dirset.v = NULL;
    }
    pthread_mutex_unlock(&dirset.lock);
}

/* The slot of dir (n bytes) in the set: where it is, or the empty slot
 * where it would go. NULL when the set cannot be made. dirset.lock held. */
static char **dirs_slot(const char *dir, size_t n)
{
    if (!dirset.v && !(dirset.v = calloc(DIRS_CAP, sizeof *dirset.v)))
        return NULL;
    uint64_t h = 1469598103934665603ULL;
    for (size_t i = 0; i < n; i++)
        h = (h ^ (uint8_t)dir[i]) * 1099511628211ULL;
    for (size_t i = (size_t)h & (DIRS_CAP - 1);; i = (i + 1) & (DIRS_CAP - 1))
        if (!dirset.v[i] ||
            (strncmp(dirset.v[i], dir, n) == 0 && dirset.v[i][n] == '\0'))
            return &dirset.v[i];
}

static int dir_known(const char *dir, size_t n)
{
    pthread_mutex_lock(&dirset.lock);
    char **slot = dirs_slot(dir, n);
    int known = slot && *slot;
    pthread_mutex_unlock(&dirset.lock);
    return known;
}

/* Remember dir; forgetting is harmless (it only costs a mkdir). */
static void dir_note(const char *dir, size_t n)
{
    pthread_mutex_lock(&dirset.lock);
    if (dirset.n >= DIRS_CAP / 4 * 3)
        dirs_clear_locked();
    char **slot = dirs_slot(dir, n);
    if (slot && !*slot && (*slot = strndup(dir, n)))
        dirset.n++;
    pthread_mutex_unlock(&dirset.lock);
}

/* ---- source ------------------------------------------------------------- */

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
static int src_list(void *ctx, const char *start_after, skippr_unit_cb cb,
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

static int src_open(void *ctx, const skippr_unit *unit, int64_t offset,
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

static int src_read(void *ctx, void *stream, void *buf, size_t cap,
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

static void src_close(void *ctx, void *stream)
{
    (void)ctx;
    if (stream)
        close((int)(intptr_t)stream - 1);
}

/* ---- sink --------------------------------------------------------------- */

typedef struct file_obj {
    int fd;          /* -1: closed (a growing object reopens it) */
    uint64_t len;    /* a growing object's bytes so far */
    char tmp[PATH_MAX];
    char final[PATH_MAX];
} file_obj;

/* Reject keys that could leave the folder, even though the engine escapes
 * every data-derived segment: empty, ".", ".." segments or a leading '/'. */
static int key_is_safe(const char *key)
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

static int fsync_dir(file_ctx *c, const char *dir)
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
    int rc = fsync_dir(c, dir);
    *slash = '/';
    return rc;
}

static int mkdirs(file_ctx *c, char *path);

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
        int rc = mkdirs(c, dir);
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
static int mkdirs(file_ctx *c, char *path)
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
    if (!key_is_safe(info->key)) {
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
    if (!dir_known(o->final, dn)) {
        for (size_t i = strlen(c->path) + 1; i <= dn; i++) {
            if (i < dn && o->final[i] != '/')
                continue;
            if (dir_known(o->final, i))
                continue;
            char save = o->final[i];
            o->final[i] = '\0';
            int rc = make_dir(c, o->final);
            o->final[i] = save;
            if (rc)
                return rc;
            dir_note(o->final, i);
        }
    }
    o->fd = open(o->tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (o->fd < 0 && errno == ENOENT) {
        /* removed behind our back: forget what we knew */
        dirs_clear();
        int rc = mkdirs(c, o->final);
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

static int sink_open(void *ctx, const skippr_object_info *info, void **h)
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

static int sink_write(void *ctx, void *h, const void *buf, size_t len)
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

static void sink_abort(void *ctx, void *h)
{
    (void)ctx;
    file_obj *o = h;
    if (o->fd >= 0)
        close(o->fd);
    unlink(o->tmp);
    free(o);
}

static int sink_commit(void *ctx, void *h)
{
    file_ctx *c = ctx;
    file_obj *o = h;
    if (c->fsync && !c->deferred && fsync(o->fd) != 0) {
        LOG(c, SKIPPR_LOG_ERROR, "fsync %s: %s", o->tmp, strerror(errno));
        sink_abort(ctx, h);
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
        sink_abort(ctx, h);
        return SKIPPR_RETRY;
    }
    int rc = SKIPPR_OK;
    mark_dirty(c);
    if (c->fsync && !c->deferred) {
        char *slash = strrchr(o->final, '/');
        *slash = '\0';
        rc = fsync_dir(c, o->final);
        *slash = '/';
    }
    free(o);
    if (rc == SKIPPR_OK)
        c->host->counter_add(c->host, "files_written", 1);
    return rc;
}

/* ---- growing objects (SKIPPR_SINK_GROWS) ------------------------------ */

/* notes: none; the File sink gives no grow_note(). */
static int grow_open(void *ctx, const skippr_object_info *info,
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

static int grow_write(void *ctx, void *h, const void *buf, size_t len)
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
    mark_dirty(c);
    if (c->grow_fds > c->grow_fd_cap)
        grow_fd_close(c, o);
    return SKIPPR_OK;
}

static void grow_close(void *ctx, void *h)
{
    grow_fd_close(ctx, h);
    free(h);
}

static int grow_commit(void *ctx, void *h, const skippr_object_info *info)
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
        mark_dirty(c);
        if (c->fsync && !c->deferred) {
            char *slash = strrchr(o->final, '/');
            *slash = '\0';
            rc = fsync_dir(c, o->final);
            *slash = '/';
        }
    }
    if (!rc)
        c->host->counter_add(c->host, "files_written", 1);
    free(o);
    return rc;
}

static int grow_discard(void *ctx, const skippr_object_info *info)
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
    mark_dirty(c);
    return SKIPPR_OK;
}

/* Recovery: SKIPPR_OK when the object is there with info's size and
 * CRC32C (its name holds the slice's id, so the content is the check). */
static int sink_check(void *ctx, const skippr_object_info *info)
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

/* The preflight (plugin.h): the folder can be read. */
static int src_probe(void *ctx)
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

static const skippr_source_ops source = {
    .probe = src_probe,
    .struct_size = sizeof(skippr_source_ops),
    .ctx_size = sizeof(file_ctx),
    .options = source_options,
    .init = init,
    .destroy = destroy,
    .list = src_list,
    .open = src_open,
    .read = src_read,
    .close = src_close,
    .flags = SKIPPR_SOURCE_MODIFIED | SKIPPR_SOURCE_NAMES_FIRST,
};

/* Make everything renamed since the last call durable: syncfs() of the
 * file system holding the output folder writes back every file, folder
 * and rename at once. A failure is fatal (never retried). */
static int sink_sync(void *ctx)
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

/* store_get and store_put without SKIPPR_SINK_STORE: enough for the
 * engine's claim on the sink (a small file under _skippr/, made only if
 * absent), not for holding state (no ETag conditions, no listing). */

/* The absolute path of store key into out (PATH_MAX). */
static int store_path(file_ctx *c, const char *key, char *out)
{
    if (!key_is_safe(key))
        return SKIPPR_INVAL;
    int n = snprintf(out, PATH_MAX, "%s/%s%s%s", c->path, c->prefix,
                     *c->prefix ? "/" : "", key);
    return n < 0 || n >= PATH_MAX ? SKIPPR_INVAL : SKIPPR_OK;
}

static int store_get(void *ctx, const char *key, uint64_t offset, void *buf,
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
static int store_put(void *ctx, const char *key, const void *buf, size_t len,
                     const char *cond, char *etag, size_t etag_cap)
{
    file_ctx *c = ctx;
    char path[PATH_MAX], tmp[PATH_MAX + 32];
    int rc = store_path(c, key, path);
    if (rc || (cond && strcmp(cond, "*") != 0))
        return SKIPPR_INVAL;
    if ((rc = mkdirs(c, path)))
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
    rc = fsync_dir(c, path);
    if (etag && etag_cap)
        etag[0] = '\0';
    return rc;
}

/* The preflight (plugin.h): the objects' folder can be made, and a file
 * written in it. An unnamed file (O_TMPFILE) never shows in the folder,
 * so nothing is left whatever fails; a file system without it gets a
 * named probe, removed at once. */
static int sink_probe(void *ctx)
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
    if (mkdirs(c, probe))
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

static const skippr_sink_ops sink = {
    .probe = sink_probe,
    .struct_size = sizeof(skippr_sink_ops),
    .ctx_size = sizeof(file_ctx),
    .options = sink_options,
    .init = init,
    .destroy = destroy,
    .object_open = sink_open,
    .object_write = sink_write,
    .object_commit = sink_commit,
    .object_abort = sink_abort,
    .object_check = sink_check,
    .sync = sink_sync,
    .flags = SKIPPR_SINK_GROWS,
    .grow_open = grow_open,
    .grow_write = grow_write,
    .grow_commit = grow_commit,
    .grow_close = grow_close,
    .grow_discard = grow_discard,
    .store_get = store_get,
    .store_put = store_put,
};

static const skippr_plugin plugin = {
    .abi_version = SKIPPR_ABI_VERSION,
    .struct_size = sizeof(skippr_plugin),
    .name = "File",
    .description = "Files in a local folder, as units to read or objects to "
                   "write.",
    .version = SKIPPR_VERSION_STRING,
    .source = &source,
    .sink = &sink,
};

SKIPPR_PLUGIN_DEFINE(plugin)
