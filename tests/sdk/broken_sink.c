/* A deliberately broken sink, for the testkit's own test: it appends each
 * object to a file named after its key and never truncates, so writing a
 * slice again after a crash stores it twice (or after the torn half of
 * the first attempt). skippr-testkit must fail it, saying so. With
 * fail_init_after N, every init() after the Nth in a process is refused:
 * each check that needs an instance must then say so. */
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

static const skippr_sink_ops sink = {
    .struct_size = sizeof(skippr_sink_ops),
    .ctx_size = sizeof(broken_ctx),
    .options = options,
    .init = init,
    .object_open = object_open,
    .object_write = object_write,
    .object_commit = object_commit,
    .object_abort = object_abort,
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
