/* `skipprd verify`'s run: the sink's reader, the two passes and the
 * report (see verify.h). pipeline.c sets the engine up as for a copy
 * (endpoints, routing), without the state, and calls pl_verify_run.
 */
#include "pipeline/verify.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include <jansson.h>

#include "config/yaml.h"
#include "pipeline/clock.h"
#include "pipeline/lanes.h"

/* The option of the sink's table named name. */
static const skippr_option *option(const skippr_option *t, const char *name)
{
    for (; t && t->name; t++)
        if (strcmp(t->name, name) == 0)
            return t;
    return NULL;
}

/* The sink's options that its plugin's source also has, as a map of
 * their own (the caller frees keys and items, which point into the
 * config). NULL on allocation failure. */
static int source_options(const sk_ynode *opts, const skippr_option *table,
                          sk_ynode *out)
{
    *out = (sk_ynode){.kind = SK_Y_MAP};
    size_t n = opts ? opts->n : 0;
    out->keys = sk_calloc(n ? n : 1, sizeof *out->keys);
    out->items = sk_calloc(n ? n : 1, sizeof *out->items);
    if (!out->keys || !out->items)
        return SKIPPR_NOMEM;
    for (size_t i = 0; i < n; i++) {
        if (!option(table, opts->keys[i]->value))
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
    const skippr_option *o = option(so->options, so->readback_prefix);
    *prefix = v && v->value ? v->value
              : o && o->default_value ? o->default_value : "";
    sk_ynode map;
    int rc = source_options(opts, p->source->options, &map);
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

static json_t *digest_json(const sk_digest *d)
{
    return json_pack("{s:I,s:I}", "records", (json_int_t)d->records,
                     "bytes", (json_int_t)d->bytes);
}

/* The report as one JSON object (the caller's); NULL on allocation
 * failure. */
static json_t *report_json(const engine *e, const sk_verify_result *r)
{
    pl_verify_objects o = pl_verify_sink_objects(e->verify);
    sk_digest dead = pl_verify_dead_letters(e->verify);
    json_t *diffs = json_array();
    for (size_t i = 0; diffs && i < r->nparts; i++) {
        const sk_verify_part *p = &r->parts[i];
        json_array_append_new(
            diffs, json_pack("{s:s,s:s,s:I,s:I,s:I,s:I}", "partition", p->key,
                             "verdict", sk_verify_verdict_name(p->verdict),
                             "expected_records", (json_int_t)p->want.records,
                             "found_records", (json_int_t)p->got.records,
                             "expected_bytes", (json_int_t)p->want.bytes,
                             "found_bytes", (json_int_t)p->got.bytes));
    }
    uint64_t bad = r->partitions - r->by_verdict[SK_VERIFY_MATCH];
    return json_pack(
        "{s:b,s:s,s:{s:o,s:I,s:o},s:{s:o,s:{s:I,s:I,s:I,s:I,s:I}},"
        "s:{s:I,s:I,s:I,s:I,s:I},s:o,s:I}",
        "clean", sk_verify_clean(r), "pipeline", e->cfg->name,
        "source", "records", digest_json(&r->want), "units",
        (json_int_t)pl_verify_units(e->verify), "dead_letters",
        digest_json(&dead),
        "sink", "records", digest_json(&r->got), "objects", "data",
        (json_int_t)o.data, "dead_letters", (json_int_t)o.dead, "skippr",
        (json_int_t)o.own, "unfinished", (json_int_t)o.partial,
        "outside_partitions", (json_int_t)o.outside,
        "partitions", "total", (json_int_t)r->partitions, "match",
        (json_int_t)r->by_verdict[SK_VERIFY_MATCH], "differ",
        (json_int_t)r->by_verdict[SK_VERIFY_DIFFER], "missing",
        (json_int_t)r->by_verdict[SK_VERIFY_MISSING], "extra",
        (json_int_t)r->by_verdict[SK_VERIFY_EXTRA],
        "differences", diffs ? diffs : json_array(), "differences_not_listed",
        (json_int_t)(bad - r->nparts));
}

/* The report for a person. */
static void report_text(const engine *e, const sk_verify_result *r, FILE *f)
{
    pl_verify_objects o = pl_verify_sink_objects(e->verify);
    sk_digest dead = pl_verify_dead_letters(e->verify);
    fprintf(f, "verify %s\n", e->cfg->name);
    fprintf(f, "  source: %" PRIu64 " records (%" PRIu64 " bytes) in %" PRIu64
               " units; %" PRIu64 " dead letters, not expected among them\n",
            r->want.records, r->want.bytes, pl_verify_units(e->verify),
            dead.records);
    fprintf(f, "  sink:   %" PRIu64 " records (%" PRIu64 " bytes) in %" PRIu64
               " objects; besides: %" PRIu64 " of dead letters, %" PRIu64
               " of skippr's, %" PRIu64 " unfinished\n",
            r->got.records, r->got.bytes, o.data + o.outside, o.dead, o.own,
            o.partial);
    fprintf(f, "  partitions: %" PRIu64 ", %" PRIu64 " match, %" PRIu64
               " differ, %" PRIu64 " missing from the sink, %" PRIu64
               " only in the sink\n",
            r->partitions, r->by_verdict[SK_VERIFY_MATCH],
            r->by_verdict[SK_VERIFY_DIFFER], r->by_verdict[SK_VERIFY_MISSING],
            r->by_verdict[SK_VERIFY_EXTRA]);
    for (size_t i = 0; i < r->nparts; i++) {
        const sk_verify_part *p = &r->parts[i];
        fprintf(f, "  %-7s %s: expected %" PRIu64 " records (%" PRIu64
                   " bytes), found %" PRIu64 " (%" PRIu64 " bytes)\n",
                sk_verify_verdict_name(p->verdict), *p->key ? p->key : "(none)",
                p->want.records, p->want.bytes, p->got.records,
                p->got.bytes);
    }
    uint64_t bad = r->partitions - r->by_verdict[SK_VERIFY_MATCH];
    if (bad > r->nparts)
        fprintf(f, "  ... and %" PRIu64 " more\n", bad - r->nparts);
    fputs(sk_verify_clean(r)
              ? "CLEAN: every record of the source is in the sink once, "
                "byte for byte, under its partition\n"
              : "NOT CLEAN: the sink does not hold the source's records as "
                "the pipeline lays them out\n",
          f);
}

/* Compare and report; SKIPPR_OK when clean, SKIPPR_CHANGED when not. */
static int report(engine *e, int as_json, size_t keep)
{
    sk_verify_result r;
    int rc = pl_verify_compare(e->verify, keep, &r);
    if (rc)
        return rc;
    if (as_json) {
        json_t *j = report_json(e, &r);
        if (!j || json_dumpf(j, stdout, JSON_INDENT(2)) ||
            fputc('\n', stdout) == EOF)
            rc = SKIPPR_NOMEM;
        json_decref(j);
    } else {
        report_text(e, &r, stdout);
    }
    fflush(stdout);
    if (!rc && !sk_verify_clean(&r))
        rc = SKIPPR_CHANGED;
    sk_verify_result_free(&r);
    return rc;
}

int pl_verify_run(engine *e, int as_json, size_t keep)
{
    sk_instance *reader = NULL;
    const char *prefix;
    int rc = open_reader(e, &reader, &prefix);
    if (rc)
        return rc;
    pl_clock_free(e->clock); /* no event time: nothing is sealed */
    if (!(e->clock = pl_clock_new(0)) ||
        !(e->verify = pl_verify_new(prefix)))
        rc = SKIPPR_NOMEM;
    if (!rc)
        rc = pl_lanes_new(e, &e->lanes);
    if (!rc && e->nthreads > 1 && !(e->pool = sk_pool_new(e->nthreads - 1,
                                                          1024)))
        rc = SKIPPR_NOMEM;
    if (!rc)
        rc = read_side(e, PL_VERIFY_SOURCE);
    if (!rc) {
        sk_instance *src = e->src;
        e->src = reader;
        rc = read_side(e, PL_VERIFY_SINK);
        e->src = src;
    }
    if (!rc)
        rc = report(e, as_json, keep);
    sk_instance_free(reader);
    return rc;
}
