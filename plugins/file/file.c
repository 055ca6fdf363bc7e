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
 * Files: this one holds the options, an instance's start and end and the
 * descriptor; source.c lists and reads, sink.c writes (and grows)
 * objects, store.c keeps the claim file, dirs.c the folders known, walk.c
 * the ordered walk; ctx.h is the instance they share.
 *
 * Test hook: SKIPPR_TEST_FILE_SYNC_FAIL=1 in the environment makes sync()
 * fail as a failed syncfs would, so tests can check that the engine then
 * records none of the batch.
 */
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/resource.h>

#include <skippr/plugin.h>
#include "ctx.h"
#include "dirs.h"
#include "sink.h"
#include "source.h"
#include "store.h"
#include "walk.h"

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

static int init(void *ctx, const skippr_host *host)
{
    file_ctx *c = ctx;
    c->host = host;
    file_dirs_use();
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

static void destroy(void *ctx)
{
    file_ctx *c = ctx;
    walk_reset(&c->walk);
    file_dirs_release();
}

static const skippr_source_ops source = {
    .probe = file_src_probe,
    .struct_size = sizeof(skippr_source_ops),
    .ctx_size = sizeof(file_ctx),
    .options = source_options,
    .init = init,
    .destroy = destroy,
    .list = file_src_list,
    .open = file_src_open,
    .read = file_src_read,
    .close = file_src_close,
    .flags = SKIPPR_SOURCE_MODIFIED | SKIPPR_SOURCE_NAMES_FIRST,
};

static const skippr_sink_ops sink = {
    .probe = file_sink_probe,
    .readback_prefix = "prefix",
    .struct_size = sizeof(skippr_sink_ops),
    .ctx_size = sizeof(file_ctx),
    .options = sink_options,
    .init = init,
    .destroy = destroy,
    .object_open = file_sink_open,
    .object_write = file_sink_write,
    .object_commit = file_sink_commit,
    .object_abort = file_sink_abort,
    .object_check = file_sink_check,
    .sync = file_sink_sync,
    .flags = SKIPPR_SINK_GROWS,
    .grow_open = file_grow_open,
    .grow_write = file_grow_write,
    .grow_commit = file_grow_commit,
    .grow_close = file_grow_close,
    .grow_discard = file_grow_discard,
    .store_get = file_store_get,
    .store_put = file_store_put,
};

/* --source and --sink: file://PATH, or a bare path (the command line's
 * own spelling of it), made absolute. */
static const skippr_url_form urls[] = {
    {.scheme = "file", .roles = SKIPPR_URL_SOURCE | SKIPPR_URL_SINK,
     .rest_option = "path", .usage = "file://PATH or a path"},
    {0},
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
    .urls = urls,
};

SKIPPR_PLUGIN_DEFINE(plugin)
