/* A deliberately broken sink, for the testkit's own test: it appends each
 * object to a file named after its key and never truncates, so writing a
 * slice again after a crash stores it twice (or after the torn half of
 * the first attempt); and its state store (SKIPPR_SINK_STORE, files
 * "store.KEY" with '/' as '!') ignores the conditions of store_put, so two
 * processes could both own a pipeline. skippr-testkit must fail both,
 * saying so. With
 * fail_init_after N, every init() after the Nth in a process is refused:
 * each check that needs an instance must then say so. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <skippr/plugin.h>

typedef struct broken_ctx {
    const skippr_host *host;
    const char *dir;
    int64_t fail_init_after;
} broken_ctx;

static int inits; /* init() calls in this process */

typedef struct broken_obj {
    int fd;
    off_t start; /* the file's size when the object was opened */
} broken_obj;

static const skippr_option options[] = {
    {"dir", SKIPPR_OPT_STRING, NULL, 1, offsetof(broken_ctx, dir),
     "Folder for the objects, one file per key ('/' becomes '_')."},
    {"fail_init_after", SKIPPR_OPT_INT, "0", 0,
     offsetof(broken_ctx, fail_init_after),
     "Refuse every init() after this many (0: never)."},
    {NULL, 0, NULL, 0, 0, NULL}};

static int init(void *ctx, const skippr_host *host)
{
    broken_ctx *c = ctx;
    c->host = host;
    if (c->fail_init_after && ++inits > c->fail_init_after) {
        host->log(host, SKIPPR_LOG_ERROR, "init() number %d refused on "
                  "purpose", inits);
        return SKIPPR_FATAL;
    }
    if (!*c->dir) {
        host->log(host, SKIPPR_LOG_ERROR, "option 'dir' is empty");
        return SKIPPR_INVAL;
    }
    return SKIPPR_OK;
}

static int object_open(void *ctx, const skippr_object_info *info, void **h)
{
    broken_ctx *c = ctx;
    char path[4096];
    int n = snprintf(path, sizeof path, "%s/", c->dir);
    for (const char *k = info->key; *k && n < (int)sizeof path - 1; k++)
        path[n++] = *k == '/' ? '_' : *k;
    path[n] = '\0';
    int fd = open(path, O_WRONLY | O_CREAT | O_APPEND, 0644); /* the bug */
    if (fd < 0) {
        c->host->log(c->host, SKIPPR_LOG_ERROR, "%s: %s", path,
                     strerror(errno));
        return SKIPPR_FATAL;
    }
    broken_obj *o = malloc(sizeof *o);
    if (!o) {
        close(fd);
        return SKIPPR_NOMEM;
    }
    o->fd = fd;
    o->start = lseek(fd, 0, SEEK_END);
    *h = o;
    return SKIPPR_OK;
}

static int object_write(void *ctx, void *h, const void *buf, size_t len)
{
    (void)ctx;
    broken_obj *o = h;
    return write(o->fd, buf, len) == (ssize_t)len ? SKIPPR_OK : SKIPPR_RETRY;
}

static int object_commit(void *ctx, void *h)
{
    (void)ctx;
    broken_obj *o = h;
    int rc = close(o->fd) == 0 ? SKIPPR_OK : SKIPPR_RETRY;
    free(o);
    return rc;
}

static void object_abort(void *ctx, void *h)
{
    (void)ctx;
    broken_obj *o = h; /* abort itself is right: it undoes this attempt */
    if (ftruncate(o->fd, o->start) != 0)
        o->start = -1;
    close(o->fd);
    free(o);
}

/* ---- the store: right but for the conditions -------------------------- */

static int store_path(const broken_ctx *c, const char *key, char *out,
                      size_t cap)
{
    int n = snprintf(out, cap, "%s/store.", c->dir);
    for (const char *k = key; *k && n < (int)cap - 1; k++)
        out[n++] = *k == '/' ? '!' : *k;
    out[n] = '\0';
    return n < (int)cap - 1 ? 0 : -1;
}

static int store_get(void *ctx, const char *key, uint64_t offset, void *buf,
                     size_t cap, size_t *got, uint64_t *size, char *etag,
                     size_t etag_cap)
{
    char path[4096];
    *got = 0;
    if (store_path(ctx, key, path, sizeof path))
        return SKIPPR_RANGE;
    int fd = open(path, O_RDONLY);
    if (fd < 0)
        return errno == ENOENT ? SKIPPR_NOENT : SKIPPR_FATAL;
    off_t end = lseek(fd, 0, SEEK_END);
    ssize_t r = end < 0 ? -1 : pread(fd, buf, cap, (off_t)offset);
    close(fd);
    if (r < 0)
        return SKIPPR_FATAL;
    *got = (size_t)r;
    *size = (uint64_t)end;
    if (etag)
        snprintf(etag, etag_cap, "%lld", (long long)end);
    return SKIPPR_OK;
}

static int store_put(void *ctx, const char *key, const void *buf, size_t len,
                     const char *cond, char *etag, size_t etag_cap)
{
    (void)cond; /* the bug: written whatever the condition says */
    char path[4096];
    if (store_path(ctx, key, path, sizeof path))
        return SKIPPR_RANGE;
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0)
        return SKIPPR_FATAL;
    int ok = write(fd, buf, len) == (ssize_t)len;
    close(fd);
    if (ok && etag)
        snprintf(etag, etag_cap, "%zu", len);
    return ok ? SKIPPR_OK : SKIPPR_FATAL;
}

static int store_delete(void *ctx, const char *key)
{
    char path[4096];
    if (store_path(ctx, key, path, sizeof path))
        return SKIPPR_RANGE;
    return unlink(path) == 0 || errno == ENOENT ? SKIPPR_OK : SKIPPR_FATAL;
}

static int by_name(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static int store_list(void *ctx, const char *prefix, skippr_unit_cb cb,
                      void *cb_data)
{
    broken_ctx *c = ctx;
    DIR *d = opendir(c->dir);
    if (!d)
        return SKIPPR_FATAL;
    char *names[64];
    size_t n = 0;
    struct dirent *e;
    while ((e = readdir(d)) && n < 64) {
        if (strncmp(e->d_name, "store.", 6) != 0)
            continue;
        char *k = strdup(e->d_name + 6);
        if (!k)
            break;
        for (char *q = k; *q; q++)
            if (*q == '!')
                *q = '/';
        if (strncmp(k, prefix, strlen(prefix)) == 0)
            names[n++] = k;
        else
            free(k);
    }
    closedir(d);
    qsort(names, n, sizeof *names, by_name);
    int stop = 0;
    for (size_t i = 0; i < n; i++) {
        skippr_unit u = {.id = names[i]};
        if (!stop)
            stop = cb(cb_data, &u);
        free(names[i]);
    }
    return SKIPPR_OK;
}

static const skippr_sink_ops sink = {
    .struct_size = sizeof(skippr_sink_ops),
    .ctx_size = sizeof(broken_ctx),
    .options = options,
    .flags = SKIPPR_SINK_STORE,
    .init = init,
    .object_open = object_open,
    .object_write = object_write,
    .object_commit = object_commit,
    .object_abort = object_abort,
    .store_get = store_get,
    .store_put = store_put,
    .store_delete = store_delete,
    .store_list = store_list,
};

static const skippr_plugin plugin = {
    .abi_version = SKIPPR_ABI_VERSION,
    .struct_size = sizeof(skippr_plugin),
    .name = "Broken",
    .description = "Appends objects: not idempotent (testkit self-test).",
    .version = "0",
    .sink = &sink,
};

SKIPPR_PLUGIN_DEFINE(plugin)
