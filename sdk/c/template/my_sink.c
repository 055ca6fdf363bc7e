/* my_sink: the template for a new skippr sink (the shape of skippr's own
 * Stdout sink). Copy this folder, rename, and fill in the four callbacks.
 *
 * What the engine promises you, and what it needs from you:
 * - It allocates ctx_size bytes for each instance, writes every option of
 *   the table into it, then calls init(). You never own the context.
 * - An object is object_open(), object_write() any number of times, then
 *   object_commit() or object_abort(). The info says exactly how many
 *   bytes will come, and their CRC32C.
 * - The same slice id always carries the same key and bytes. After a
 *   crash the engine writes it again: that must not store it twice.
 * - Return SKIPPR_RETRY for a transient failure (the engine aborts the
 *   object and writes it again later, with backoff) and SKIPPR_FATAL for
 *   a permanent one, after logging why with host->log.
 * - Each upload thread has its own instance; instances run at once.
 *
 * Check it with the testkit: ctest, or skippr-testkit build/skippr_my_sink.so.
 */
#include <stddef.h>
#include <stdio.h>

#include <skippr/plugin.h>

typedef struct my_ctx {
    const skippr_host *host;
    int header; /* option "header" */
} my_ctx;

/* Every option: YAML key, type, default, required, where it goes, and one
 * sentence for the config reference. */
static const skippr_option options[] = {
    {"header", SKIPPR_OPT_BOOL, "false", 0, offsetof(my_ctx, header),
     "Print '# <object key>' before each object's bytes."},
    {NULL, 0, NULL, 0, 0, NULL}};

static int init(void *ctx, const skippr_host *host)
{
    my_ctx *c = ctx;
    c->host = host;
    /* Validate options here: log what is wrong, return SKIPPR_INVAL. */
    return SKIPPR_OK;
}

static void destroy(void *ctx)
{
    (void)ctx; /* release what init() acquired (not ctx itself) */
}

static int object_open(void *ctx, const skippr_object_info *info, void **h)
{
    my_ctx *c = ctx;
    if (c->header && printf("# %s\n", info->key) < 0)
        return SKIPPR_FATAL;
    *h = c; /* per-object state, if any, goes here */
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
    /* Make the object complete, visible and durable before returning OK. */
    return fflush(stdout) == 0 ? SKIPPR_OK : SKIPPR_FATAL;
}

static void object_abort(void *ctx, void *h)
{
    (void)ctx;
    (void)h; /* discard what this object wrote so far */
}

static const skippr_sink_ops sink = {
    .struct_size = sizeof(skippr_sink_ops),
    .ctx_size = sizeof(my_ctx),
    .options = options,
    .init = init,
    .destroy = destroy,
    .object_open = object_open,
    .object_write = object_write,
    .object_commit = object_commit,
    .object_abort = object_abort,
    /* .object_check: optional; lets recovery ask what is already there. */
};

static const skippr_plugin plugin = {
    .abi_version = SKIPPR_ABI_VERSION,
    .struct_size = sizeof(skippr_plugin),
    .name = "MySink", /* the YAML key under data_sinks.NAME */
    .description = "Writes objects to standard output (the template).",
    .version = "0.1.0",
    .sink = &sink,
};

SKIPPR_PLUGIN_DEFINE(plugin)
