/* The stdout sink: writes every object's bytes to standard output.
 *
 * It is the template for new sinks. A sink declares an options table and a
 * context struct; the engine allocates the context, fills the options into
 * it and calls init(). Objects are written with open / write* / commit (or
 * abort). Return SKIPPR_RETRY for transient failures and SKIPPR_FATAL for
 * permanent ones: the engine owns retries.
 */
#include <stddef.h>
#include <stdio.h>

#include <skippr/plugin.h>

typedef struct stdout_ctx {
    const skippr_host *host;
    int header; /* option: print a "# key" line before each object */
} stdout_ctx;

static const skippr_option options[] = {
    {"header", SKIPPR_OPT_BOOL, "false", 0, offsetof(stdout_ctx, header),
     "Print '# <object key>' before each object's bytes."},
    {NULL, 0, NULL, 0, 0, NULL}};

static int init(void *ctx, const skippr_host *host)
{
    stdout_ctx *c = ctx;
    c->host = host;
    return SKIPPR_OK;
}

static int object_open(void *ctx, const skippr_object_info *info, void **h)
{
    stdout_ctx *c = ctx;
    if (c->header && printf("# %s\n", info->key) < 0)
        return SKIPPR_FATAL;
    *h = c; /* no per-object state */
    return SKIPPR_OK;
}

static int object_write(void *ctx, void *h, const void *buf, size_t len)
{
    (void)ctx;
    (void)h;
    return fwrite(buf, 1, len, stdout) == len ? SKIPPR_OK : SKIPPR_FATAL;
}

static int object_commit(void *ctx, void *h)
{
    (void)ctx;
    (void)h;
    return fflush(stdout) == 0 ? SKIPPR_OK : SKIPPR_FATAL;
}

static void object_abort(void *ctx, void *h)
{
    (void)ctx;
    (void)h;
}

static const skippr_sink_ops sink = {
    .struct_size = sizeof(skippr_sink_ops),
    .ctx_size = sizeof(stdout_ctx),
    .options = options,
    .init = init,
    .object_open = object_open,
    .object_write = object_write,
    .object_commit = object_commit,
    .object_abort = object_abort,
};

/* --sink - (or stdout, the command line's spellings of stdout://). */
static const skippr_url_form urls[] = {
    {.scheme = "stdout", .roles = SKIPPR_URL_SINK, .usage = "- or stdout"},
    {0},
};

static const skippr_plugin plugin = {
    .abi_version = SKIPPR_ABI_VERSION,
    .struct_size = sizeof(skippr_plugin),
    .name = "Stdout",
    .description = "Writes records to standard output (the sink template).",
    .version = SKIPPR_VERSION_STRING,
    .sink = &sink,
    .urls = urls,
};

SKIPPR_PLUGIN_DEFINE(plugin)
