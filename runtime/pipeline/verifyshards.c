/* A verify split into shards, and their digests merged: see
 * verifyshards.h. */
#include "pipeline/verifyshards.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "base/fsio.h"
#include "plugin/loader.h"
#include "verify/digestfile.h"

#define MAGIC "SKVSHD01"
#define NHEAD 12

/* Where the shards' digests are: a store (inst) and the key prefix in
 * it, or a folder (inst NULL). */
typedef struct box {
    sk_instance *inst;
    const skippr_sink_ops *ops;
    char *where; /* the key prefix, or the folder, ending in '/' */
} box;

static void box_close(box *b)
{
    sk_instance_free(b->inst);
    sk_free(b->where);
}

/* The state's store, opened without its lease, or the folder. */
static int box_open(engine *e, box *b)
{
    const sk_pipeline_cfg *cfg = e->cfg;
    *b = (box){0};
    if (!cfg->state_store.plugin) {
        b->where = sk_asprintf("%s/%s/%s.verify-shards/", cfg->state_dir,
                               cfg->workspace, cfg->name);
        return b->where ? SKIPPR_OK : SKIPPR_NOMEM;
    }
    sk_cfg_err err;
    const sk_plugin_lib *lib = sk_registry_store(&e->reg, e->doc,
                                                 &cfg->state_store, &err);
    if (!lib) {
        sk_error("%s", err.msg);
        return SKIPPR_INVAL;
    }
    b->ops = lib->desc->sink;
    if (sk_instance_new(lib->desc, 1, e->doc, &cfg->state_store, SK_START,
                        NULL, 0, &b->inst, &err)) {
        if (*err.msg)
            sk_error("%s", err.msg);
        return SKIPPR_INVAL;
    }
    b->where = sk_asprintf("%s/%s.verify-shards/", cfg->workspace,
                           cfg->name);
    return b->where ? SKIPPR_OK : SKIPPR_NOMEM;
}

/* name's bytes p[0..n) into the box. */
static int box_put(box *b, const char *name, const void *p, size_t n)
{
    char *path = sk_asprintf("%s%s", b->where, name);
    int rc = path ? SKIPPR_OK : SKIPPR_NOMEM;
    if (!rc && b->inst)
        rc = b->ops->store_put(b->inst->ctx, path, p, n, NULL, NULL, 0);
    else if (!rc && !(rc = sk_io_mkdir_p(b->where, 0755)))
        rc = sk_io_replace_file(path, p, n);
    if (rc)
        sk_error("verify: storing %s failed: %s", path ? path : name,
                 skippr_status_str(rc));
    sk_free(path);
    return rc;
}

/* name's bytes from the box into out (initialised here; the caller
 * frees it). SKIPPR_NOENT when there is none. */
static int box_get(box *b, const char *name, skippr_buf *out)
{
    skippr_buf_init(out, SK_DIGESTFILE_MAX);
    char *path = sk_asprintf("%s%s", b->where, name);
    if (!path)
        return SKIPPR_NOMEM;
    if (!b->inst) { /* (sk_digestfile_read initialises out again) */
        int rc = sk_digestfile_read(path, out);
        sk_free(path);
        return rc;
    }
    int rc = SKIPPR_OK;
    uint64_t size = 1;
    while (!rc && out->len < size) {
        size_t got = 0;
        if (!(rc = skippr_buf_reserve(out, 65536)))
            rc = b->ops->store_get(b->inst->ctx, path, out->len,
                                   out->data + out->len, 65536, &got,
                                   &size, NULL, 0);
        out->len += got;
        if (!rc && !got && out->len < size)
            rc = SKIPPR_IO; /* shorter than it said */
    }
    sk_free(path);
    return rc;
}

/* Shard i of n's name. */
static void shard_name(char *buf, size_t cap, uint32_t i, uint32_t n)
{
    snprintf(buf, cap, "shard-%" PRIu32 "-of-%" PRIu32, i, n);
}

int pl_shards_store(engine *e)
{
    const pl_verify *v = e->verify;
    pl_verify_objects o = pl_verify_sink_objects(v);
    sk_digest d = pl_verify_dead_letters(v);
    uint32_t i = e->cfg->shard_index, n = e->cfg->shard_count;
    uint64_t head[NHEAD] = {i, n, pl_verify_units(v), o.data, o.dead, o.own,
                            o.partial, o.outside, d.records, d.bytes, d.lo,
                            d.hi};
    skippr_buf bytes = {0};
    box b;
    char name[64];
    shard_name(name, sizeof name, i, n);
    int rc = box_open(e, &b);
    if (!rc)
        rc = sk_digestfile_encode(MAGIC, head, NHEAD,
                                  pl_verify_parts(e->verify, 0),
                                  pl_verify_parts(e->verify, 1), &bytes);
    if (!rc)
        rc = box_put(&b, name, bytes.data, bytes.len);
    if (!rc)
        printf("verify %s, shard %" PRIu32 " of %" PRIu32 ": %" PRIu64
               " units and %" PRIu64 " objects read; their digests are "
               "stored as %s%s\nwhen all %" PRIu32 " are: skipprd verify "
               "--pipeline %s --merge-shards %" PRIu32 "\n",
               e->cfg->name, i, n, pl_verify_units(v), o.data + o.outside,
               b.where, name, n, e->cfg->name, n);
    skippr_buf_free(&bytes);
    box_close(&b);
    return rc ? rc : fflush(stdout) ? SKIPPR_IO : SKIPPR_OK;
}

/* Shard i of n from the box into e->verify. */
static int load_one(engine *e, box *b, uint32_t i, uint32_t n)
{
    char name[64];
    shard_name(name, sizeof name, i, n);
    skippr_buf bytes;
    int rc = box_get(b, name, &bytes);
    uint64_t h[NHEAD];
    if (!rc)
        rc = sk_digestfile_decode(MAGIC, bytes.data, bytes.len, h, NHEAD,
                                  pl_verify_parts(e->verify, 0),
                                  pl_verify_parts(e->verify, 1));
    skippr_buf_free(&bytes);
    if (rc == SKIPPR_CORRUPT)
        sk_error("verify: %s%s does not read back whole", b->where, name);
    if (!rc && h[0] == i && h[1] == n) {
        pl_verify_objects o = {.data = h[3], .dead = h[4], .own = h[5],
                               .partial = h[6], .outside = h[7]};
        sk_digest d = {.records = h[8], .bytes = h[9], .lo = h[10],
                       .hi = h[11]};
        pl_verify_absorb(e->verify, h[2], o, d);
    }
    if (rc || (h[0] == i && h[1] == n))
        return rc;
    sk_error("verify: %s%s holds shard %" PRIu64 " of %" PRIu64, b->where,
             name, h[0], h[1]);
    return SKIPPR_INVAL;
}

int pl_shards_load(engine *e, uint32_t n)
{
    box b;
    int rc = box_open(e, &b);
    char missing[256] = "";
    size_t len = 0, nmissing = 0;
    for (uint32_t i = 0; !rc && i < n; i++) {
        int r = load_one(e, &b, i, n);
        if (r != SKIPPR_NOENT) {
            rc = r;
            continue;
        }
        if (nmissing++ < 16 && len < sizeof missing)
            len += (size_t)snprintf(missing + len, sizeof missing - len,
                                    "%s%" PRIu32, len ? ", " : "", i);
    }
    if (!rc && nmissing) {
        sk_error("verify --merge-shards %" PRIu32 ": %zu shards have not "
                 "stored their digests in %s yet (%s%s): run verify "
                 "--shard I/%" PRIu32 " for each",
                 n, nmissing, b.where, missing, nmissing > 16 ? ", ..." : "",
                 n);
        rc = SKIPPR_NOENT;
    }
    box_close(&b);
    return rc;
}
