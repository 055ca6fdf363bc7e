/* `skipprd verify`'s run: the sink's reader, the two passes, and when
 * partitions differ two more for their records (see verify.h).
 * pipeline.c sets the engine up as for a copy (endpoints, routing),
 * without the state, and calls pl_verify_run.
 */
#include "pipeline/verify.h"

#include <inttypes.h>
#include <stdio.h>

#include "config/yaml.h"
#include "pipeline/clock.h"
#include "pipeline/lanes.h"
#include "pipeline/verifyshards.h"
#include "pipeline/verifysince.h"

/* The sink's options that plugin p's source also has, as a map of
 * their own (the caller frees keys and items, which point into the
 * config). SKIPPR_OK or SKIPPR_NOMEM. */
static int source_options(const sk_ynode *opts, const skippr_plugin *p,
                          sk_ynode *out)
{
    *out = (sk_ynode){.kind = SK_Y_MAP};
    size_t n = opts ? opts->n : 0;
    out->keys = sk_calloc(n ? n : 1, sizeof *out->keys);
    out->items = sk_calloc(n ? n : 1, sizeof *out->items);
    if (!out->keys || !out->items)
        return SKIPPR_NOMEM;
    for (size_t i = 0; i < n; i++) {
        if (!sk_plugin_option(p, 0, opts->keys[i]->value))
            continue;
        out->keys[out->n] = opts->keys[i];
        out->items[out->n++] = opts->items[i];
    }
    return SKIPPR_OK;
}

/* A source of the sink's plugin, made from the sink's options, that
 * lists and reads the sink's objects (*reader), and the prefix they are
 * under (*prefix, the config's). */
static int open_reader(engine *e, sk_instance **reader, const char **prefix)
{
    const skippr_plugin *p = e->sink->plugin;
    const skippr_sink_ops *so = p->sink;
    if (!SKIPPR_OPS_HAS(skippr_sink_ops, so, readback_prefix) ||
        !so->readback_prefix || !p->source || !p->source->list) {
        sk_error("%s: verify reads the sink's objects back, which this "
                 "sink cannot do (S3 and File sinks can)", e->sink->label);
        return SKIPPR_INVAL;
    }
    const sk_ynode *opts = e->cfg->sink.options;
    const sk_ynode *v = opts ? sk_ymap_get(opts, so->readback_prefix) : NULL;
    const skippr_option *o = sk_plugin_option(p, 1, so->readback_prefix);
    *prefix = v && v->value ? v->value
              : o && o->default_value ? o->default_value : "";
    sk_ynode map;
    int rc = source_options(opts, p, &map);
    sk_endpoint_cfg ep = e->cfg->sink;
    ep.options = &map;
    sk_cfg_err err;
    if (!rc && sk_instance_new(p, 0, e->doc, &ep, SK_START | SK_START_ONCE,
                               NULL, e->cfg->memory_budget, reader, &err)) {
        if (*err.msg)
            sk_error("reading the sink back: %s", err.msg);
        rc = SKIPPR_INVAL;
    }
    sk_free(map.keys);
    sk_free(map.items);
    return rc;
}

/* One side, read whole through the copy's read path. */
static int read_side(engine *e, int side)
{
    pl_verify_side(e->verify, side);
    sk_info("verify: reading %s", e->src->label);
    int rc = pl_copy_pass(e);
    if (rc && rc != SKIPPR_STOPPED)
        sk_error("verify: reading %s failed: %s", e->src->label,
                 skippr_status_str(rc));
    return rc;
}

/* Both sides, read whole (the sink through reader). */
static int both_sides(engine *e, sk_instance *reader)
{
    int rc = read_side(e, PL_VERIFY_SOURCE);
    if (!rc) {
        sk_instance *src = e->src;
        e->src = reader;
        rc = read_side(e, PL_VERIFY_SINK);
        e->src = src;
    }
    return rc;
}

/* Records kept in memory a side while drilling: 32 bytes each, within a
 * quarter of the memory budget for both (the rest go to disk in sorted
 * runs: verify/recruns.h). */
static size_t drill_max(const engine *e)
{
    uint64_t m = (uint64_t)e->cfg->memory_budget / 8 / 32;
    return (size_t)(m < 1024 ? 1024 : m);
}

/* Compare, and when not clean read both sides again for the records of
 * the partitions that differ; report. SKIPPR_OK when clean,
 * SKIPPR_CHANGED when not. */
static int compare_and_report(engine *e, sk_instance *reader,
                              const pl_since *since, int as_json,
                              size_t keep)
{
    sk_verify_result r;
    sk_rec_report rr = {0};
    int rc = pl_verify_compare(e->verify, keep, &r);
    if (rc)
        return rc;
    int clean = sk_verify_clean(&r);
    if (!clean && reader) { /* (merged shards: no reader, no records) */
        sk_info("verify: %" PRIu64 " partitions differ; reading both sides "
                "again for their records",
                r.partitions - r.by_verdict[SK_VERIFY_MATCH] -
                    r.by_verdict[SK_VERIFY_OPEN]);
        if (!(rc = pl_verify_drill(e->verify, drill_max(e))) &&
            !(rc = both_sides(e, reader)))
            rc = pl_verify_records(e->verify, keep, &rr);
    }
    if (!rc)
        rc = pl_verify_report(e, &r, clean || !reader ? NULL : &rr, since,
                              as_json, stdout);
    if (!rc && (!clean || (since && pl_since_faults(e, since))))
        rc = SKIPPR_CHANGED;
    sk_rec_report_free(&rr);
    sk_verify_result_free(&r);
    return rc;
}

/* The passes, the comparison and the report; with since, the passes
 * read what is new and the mark records them; a shard's passes are
 * stored, not compared. */
static int verify(engine *e, sk_instance *reader, pl_since *since,
                  int as_json, size_t keep)
{
    int rc = both_sides(e, reader);
    if (!rc && e->cfg->shard_count > 1)
        return pl_shards_store(e);
    if (!rc && since)
        rc = pl_since_settle(e, since);
    if (!rc)
        rc = compare_and_report(e, reader, since, as_json, keep);
    if (since && (!rc || rc == SKIPPR_CHANGED)) {
        /* whole passes: what they read is the mark, clean or not (a
         * difference stays in its digests until explained) */
        int crc = pl_since_commit(e, since);
        if (crc) {
            sk_error("verify: recording the mark failed: %s",
                     skippr_status_str(crc));
            rc = crc;
        }
    }
    return rc;
}

int pl_verify_run(engine *e, int as_json, int since_state,
                  uint32_t merge_shards, size_t keep)
{
    sk_instance *reader = NULL;
    pl_since *since = NULL;
    const char *prefix;
    int rc = open_reader(e, &reader, &prefix);
    if (rc)
        return rc;
    pl_clock_free(e->clock); /* no event time: nothing is sealed */
    if (!(e->clock = pl_clock_new(0)) ||
        !(e->verify = pl_verify_new(prefix)))
        rc = SKIPPR_NOMEM;
    if (!rc && merge_shards) {
        if (!(rc = pl_shards_load(e, merge_shards)))
            rc = compare_and_report(e, NULL, NULL, as_json, keep);
        sk_instance_free(reader);
        return rc;
    }
    if (!rc && since_state)
        rc = pl_since_open(e, &since);
    if (!rc)
        rc = pl_lanes_new(e, &e->lanes);
    if (!rc && e->nthreads > 1 && !(e->pool = sk_pool_new(e->nthreads - 1,
                                                          1024)))
        rc = SKIPPR_NOMEM;
    if (!rc)
        rc = verify(e, reader, since, as_json, keep);
    pl_since_close(since);
    sk_instance_free(reader);
    return rc;
}
