/* The pipeline's entry: load the plugins and open the source and one sink
 * instance per upload thread, set up routing and formats, open the state,
 * finish what a previous run sealed, then run copy passes (or the stream)
 * until --once is drained or a stop is asked for; then the summary.
 *
 * Owns: the engine and everything it holds (engine_free()).
 * Thread: the caller's, the pipeline thread.
 */
#include "pipeline/pipeline.h"

#include "pipeline/engine.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "base/fence.h"
#include "pipeline/clock.h"
#include "pipeline/lanes.h"
#include "pipeline/lister.h"
#include "pipeline/mark.h"
#include "pipeline/report.h"
#include "pipeline/retrynews.h"
#include "pipeline/shape.h"
#include "pipeline/stream.h"
#include "pipeline/verify.h"

static int open_endpoints(engine *e, const sk_yaml_doc *doc)
{
    sk_cfg_err err;
    if (sk_registry_load(&e->reg, doc, e->cfg->plugin_dirs, &err)) {
        sk_error("%s", err.msg);
        return SKIPPR_INVAL;
    }
    const sk_endpoint_cfg *eps[2] = {&e->cfg->source, &e->cfg->sink};
    for (int i = 0; i < 2; i++) {
        const sk_plugin_lib *lib = sk_registry_find(&e->reg, eps[i]->plugin);
        if (!lib || (i == 0 && !lib->desc->source) ||
            (i == 1 && !lib->desc->sink)) {
            char list[512] = "";
            for (size_t k = 0; k < e->reg.n; k++) {
                const skippr_plugin *d = e->reg.libs[k].desc;
                if (i == 0 ? !d->source : !d->sink)
                    continue;
                sk_list_add(list, sizeof list, d->name);
            }
            sk_cfg_fail(&err, doc, eps[i]->at, "no %s plugin named '%s' "
                        "(available: %s)", i == 0 ? "source" : "sink",
                        eps[i]->plugin, *list ? list : "none found");
            sk_error("%s", err.msg);
            return SKIPPR_INVAL;
        }
        if (i == 0 && !lib->desc->source->list &&
            !(lib->desc->source->poll && lib->desc->source->ack)) {
            sk_error("%s: the source has neither list() nor poll() and "
                     "ack()", eps[i]->plugin);
            return SKIPPR_INVAL;
        }
        if (i == 0) {
            e->streaming = !lib->desc->source->list;
            int start = SK_START | (e->once ? SK_START_ONCE : 0) |
                        (e->cfg->verify_done_units ? 0 : SK_START_NAMES_FIRST);
            if (sk_instance_new(lib->desc, 0, doc, eps[i], start,
                                e->streaming ? pl_streamer_hooks(e->stream)
                                             : NULL,
                                e->cfg->memory_budget, &e->src, &err)) {
                if (*err.msg)
                    sk_error("%s", err.msg);
                return SKIPPR_INVAL;
            }
            continue;
        }
        /* One sink instance per upload thread; their counters add up in
         * the first one's. */
        e->up = sk_calloc((size_t)e->cfg->upload_concurrency, sizeof *e->up);
        if (!e->up)
            return SKIPPR_NOMEM;
        for (int k = 0; k < e->cfg->upload_concurrency; k++) {
            uploader *u = &e->up[k];
            u->e = e;
            skippr_backoff_init(&u->backoff,
                                (uint64_t)e->cfg->retry_backoff_ms,
                                (uint64_t)e->cfg->retry_backoff_ms * 100);
            skippr_buf_init(&u->out, OUT_BUF + 64);
            skippr_buf_init(&u->scratch, SK_WAL_MAX_PAYLOAD + 64);
            e->nup = k + 1;
            if (sk_instance_new(lib->desc, 1, doc, eps[i], SK_START, NULL,
                                e->cfg->memory_budget, &u->sink, &err)) {
                if (*err.msg)
                    sk_error("%s", err.msg);
                return SKIPPR_INVAL;
            }
            if (k > 0)
                u->sink->counters_to = e->up[0].sink;
        }
        e->sink = e->up[0].sink;
    }
    return SKIPPR_OK;
}

/* Formats: the shape of records (shape.h); and what this source and sink
 * cannot copy. */
static int formats_init(engine *e)
{
    int rc = pl_shape_new(e->router, e->src, e->sink,
                          pl_sink_takes_records(e->sink),
                          (size_t)e->cfg->max_record_bytes, &e->shape);
    if (rc)
        return rc;
    const skippr_source_ops *sops = e->src->plugin->source;
    int documents = e->streaming &&
                    SKIPPR_OPS_HAS(skippr_source_ops, sops, flags) &&
                    (sops->flags & SKIPPR_SOURCE_DOCUMENTS);
    if (e->streaming && !documents && (e->src->format == SK_FORMAT_CSV ||
                                       e->src->format == SK_FORMAT_XML)) {
        sk_error("%s: this source's messages are JSON records; format %s "
                 "is for files and documents", e->src->label,
                 e->src->format == SK_FORMAT_CSV ? "csv" : "xml");
        return SKIPPR_INVAL;
    }
    const char *why = pl_format_problem(e, e->src->format);
    if (why) {
        sk_error("%s -> %s: %s", e->src->label, e->sink->label, why);
        return SKIPPR_INVAL;
    }
    return SKIPPR_OK;
}

/* The clocks, the thread count and the stages' own state. */
static int engine_begin(engine *e)
{
    e->start_ns = e->last_commit_ns = sk_now_ns();
    e->nthreads = e->cfg->threads > 64 ? 64 : e->cfg->threads;
    e->report = pl_report_new(e->start_ns);
    e->retry = pl_retrynews_new();
    e->stream = pl_streamer_new(e);
    e->lister = pl_lister_new();
    if (e->report && e->retry && e->stream && e->lister)
        return SKIPPR_OK;
    sk_error("out of memory");
    return SKIPPR_NOMEM;
}

static void engine_free(engine *e)
{
    pl_report_free(e->report);
    pl_retrynews_free(e->retry);
    pl_clock_free(e->clock);
    pl_shape_free(e->shape);
    pl_lister_free(e->lister);
    pl_mark_free(e->mark);
    pl_verify_free(e->verify);
    if (e->pool)
        sk_pool_free(e->pool);
    pl_lanes_free(e->lanes);
    pl_streamer_free(e->stream);
    sk_router_free(e->router);
    pl_grow_release(e);
    sk_instance_free(e->src);
    for (int k = 0; k < e->nup; k++) {
        sk_instance_free(e->up[k].sink);
        skippr_buf_free(&e->up[k].out);
        skippr_buf_free(&e->up[k].scratch);
    }
    sk_free(e->up);
    sk_state_close(e->st);
    sk_remote_close(e->remote, 1);
    sk_instance_free(e->store);
    sk_registry_close(&e->reg);
}

/* A run whose lease lapsed was fenced, whatever it ended with: it says
 * so and exits 3. Else rc. */
static int fenced_end(const engine *e, int rc)
{
    if (!e->remote || !sk_fence_lapsed())
        return rc;
    sk_remote_tell_fenced(e->remote);
    return SKIPPR_LOCKED;
}

/* Finish what a previous run sealed but did not confirm. */
static int recover_sealed(engine *e)
{
    size_t pending = 0;
    for (size_t i = 0; i < sk_state_nlive(e->st); i++)
        pending +=
            sk_slice_state_of(sk_state_slice_at(e->st, i)) == SK_SLICE_SEALED;
    if (pending)
        sk_info("recovery: re-writing %zu sealed slice%s", pending,
                pending == 1 ? "" : "s");
    return pl_flush_slices(e, 0);
}

/* Sleep until the next poll, checking for a stop and for due slices. */
static int wait_for_poll(engine *e)
{
    for (int64_t t = 0; t < e->cfg->poll_interval_seconds * 10 &&
                        !sk_stop_requested; t++) {
        struct timespec ts = {0, 100000000L};
        nanosleep(&ts, NULL);
        pl_progress(e, 0);
        int rc = t % 10 == 9 ? pl_flush_slices(e, 0) : SKIPPR_OK;
        if (rc)
            return rc;
    }
    return SKIPPR_OK;
}

/* The router for the source's format, the formats, and event time. */
static int routing_init(engine *e)
{
    sk_route_config rcfg = e->cfg->route;
    rcfg.lines = e->src->format == SK_FORMAT_JSONL;
    const char *rerr = NULL;
    e->router = sk_router_new(&rcfg, &rerr);
    if (!e->router) {
        sk_error("transform: %s", rerr ? rerr : "out of memory");
        return SKIPPR_INVAL;
    }
    int rc = formats_init(e);
    if (rc)
        return rc;
    e->clock = pl_clock_new(!e->streaming && sk_router_time_unit(e->router) !=
                                                 SK_TIME_UNIT_NONE);
    return e->clock ? SKIPPR_OK : SKIPPR_NOMEM;
}

/* The plugins' preflight (plugin.h, probe), before anything is read: the
 * source can be read and the sink written, with the run's credentials. */
static int preflight(engine *e)
{
    int rc = sk_instance_probe(e->src);
    int rs = sk_instance_probe(e->sink); /* each problem its own line */
    return rc ? rc : rs;
}

/* A run that ended early: what is in the sink, where the rest is, and
 * what happens next, on one line. */
static void what_landed(const engine *e, int rc)
{
    int records = e->sink && pl_sink_takes_records(e->sink);
    const char *word = records ? "message batches" : "objects";
    if (rc == SKIPPR_STOPPED && sk_stop_requested)
        sk_warn("interrupted before the --once run finished: %" PRIu64
                " %s durable in %s; what was read is saved in the state "
                "(%s) and the next run goes on from there; exit code 5",
                e->tally.objects, word, e->sink ? e->sink->label : "the sink",
                sk_state_dir(e->st));
    else
        sk_warn("stopped by the error above: %" PRIu64 " %s durable in %s; "
                "the records read from %" PRIu64 " units are saved in the "
                "state (%s) and go out on the next run once the cause is "
                "fixed; exit code %d", e->tally.objects, word,
                e->sink ? e->sink->label : "the sink",
                e->tally.units, sk_state_dir(e->st),
                rc == SKIPPR_LOCKED ? 3 : 1);
}

/* The run's last lines: the progress line closed, what was copied, the
 * plugins' counters. rc: how the run ended. */
static void summary(engine *e, int rc)
{
    if (e->progress && e->start_ns) {
        pl_progress(e, 1);
        fputc('\n', stderr);
        sk_log_progress_active = 0;
    }
    if (!e->begun)
        return; /* stopped by a check, which said why */
    if (e->st) {
        double secs = (double)(sk_now_ns() - e->start_ns) / 1e9;
        pl_list_counts n = pl_lister_counts(e->lister);
        if (e->streaming)
            sk_info("%s: %" PRIu64 " messages dropped as already copied",
                    e->src->label, pl_streamer_duplicates(e->stream));
        const sk_figure f[] = {
            {"units", (double)e->tally.units},
            {"units_already_done", (double)n.done},
            {"units_changed_skipped", (double)n.changed},
            {"records", (double)e->tally.records},
            {"dead_lettered", (double)e->tally.dead},
            {"objects_written", (double)e->tally.objects},
            {"bytes_read", (double)e->tally.bytes_in},
            {"seconds", secs}};
        sk_log_figures(SKIPPR_LOG_INFO, f, sizeof f / sizeof *f,
                       "%s: %" PRIu64 " units %s, %" PRIu64 " already done, "
                       "%" PRIu64 " changed and skipped; %" PRIu64 " records, "
                       "%" PRIu64 " dead-lettered; %" PRIu64 " objects "
                       "written; %.1f MB in %.2f s",
                       rc ? "stopped" : "done", e->tally.units,
                       rc ? "read" : "copied", n.done,
                       n.changed, e->tally.records, e->tally.dead, e->tally.objects,
                       (double)e->tally.bytes_in / 1e6, secs);
        if (rc)
            what_landed(e, rc);
        if (n.changed && e->cfg->changed_units == SK_CHANGED_SKIP)
            sk_warn("%" PRIu64 " unit%s changed since copied and not copied "
                    "again (changed_units: skip; each is named above): exit "
                    "code 4", n.changed,
                    n.changed == 1 ? "" : "s");
        if (n.recopied)
            sk_info("%" PRIu64 " unit%s changed since copied, copied again "
                    "whole (changed_units: copy)", n.recopied,
                    n.recopied == 1 ? "" : "s");
        if (e->cfg->shard_count > 1)
            sk_info("shard %u of %u: %" PRIu64 " units listed belong to "
                    "other shards", e->cfg->shard_index,
                    e->cfg->shard_count, n.shard);
        if (e->clock && pl_clock_late_slices(e->clock))
            sk_info("late records: %" PRIu64 " in %" PRIu64 " objects of "
                    "partitions whose time bucket was already written "
                    "(allowed_lateness_seconds)",
                    pl_clock_late_records(e->clock),
                    pl_clock_late_slices(e->clock));
        uint64_t ml_json = 0, ml_compacted = 0;
        if (e->shape)
            pl_shape_multiline_counts(e->shape, &ml_json, &ml_compacted);
        if (ml_json || ml_compacted)
            sk_info("records spanning lines: %" PRIu64 " in .json objects "
                    "beside the .jsonl ones, %" PRIu64 " compacted "
                    "(multiline_records)", ml_json, ml_compacted);
    }
    if (e->src)
        sk_instance_log_counters(e->src);
    if (e->sink)
        sk_instance_log_counters(e->sink);
    if (e->remote) {
        uint64_t puts, bytes;
        sk_remote_stats(e->remote, &puts, &bytes);
        sk_info("state store: wal_objects_written=%" PRIu64
                ", wal_bytes_written=%" PRIu64, puts, bytes);
    }
}

/* The state: its store and lease (state in a bucket), the folder, and
 * the checks before anything is read: shards, the definition, the
 * preflight, the claim on the sink. */
static int open_state(engine *e)
{
    const sk_pipeline_cfg *cfg = e->cfg;
    if (e->streaming && cfg->shard_count > 1) {
        sk_error("--shard: %s is a streaming source, which shares its "
                 "messages out itself (a consumer group, a shared "
                 "subscription); run one process per pipeline instead",
                 e->src->label);
        return SKIPPR_INVAL;
    }
    char state_name[512];
    sk_pipeline_state_name(cfg, state_name, sizeof state_name);
    int rc;
    if (cfg->state_store.plugin) {
        if ((rc = pl_remote_open(e, state_name, &e->store, &e->remote)))
            return rc;
        /* From here on, every write waits on this lease. */
        sk_remote_fence(e->remote);
    }
    if ((rc = sk_state_open(cfg->state_dir, cfg->workspace, state_name, 0,
                            e->remote, &e->st)))
        return rc;
    if ((rc = pl_shard_check_retired(e)) || (rc = pl_shard_inherit(e)) ||
        (rc = pl_definition_check(e)) || (rc = preflight(e)) ||
        (rc = pl_claim_sink(e)))
        return rc;
    /* open blocks and the freed buffers kept for them share the budget */
    sk_state_tune(e->st, (int)cfg->wal_zstd_level,
                  (uint64_t)cfg->memory_budget);
    return SKIPPR_OK;
}

/* The stages that run the copy: growing objects, lanes, the pool, the
 * metrics, the listing mark; then what a previous run sealed. */
static int start_stages(engine *e)
{
    const sk_pipeline_cfg *cfg = e->cfg;
    int rc;
    if ((rc = pl_grow_init(e)))
        return rc;
    if ((rc = pl_lanes_new(e, &e->lanes)))
        return rc;
    /* The pipeline thread frames too when it has nothing to apply, so the
     * pool has one worker fewer than the threads asked for. */
    if (e->nthreads > 1 && !(e->pool = sk_pool_new(e->nthreads - 1, 1024)))
        return SKIPPR_NOMEM;
    sk_info("pipeline %s: %s -> %s, %d thread%s, state %s",
            cfg->name, e->src->label, e->sink->label, e->nthreads,
            e->nthreads == 1 ? "" : "s", sk_state_dir(e->st));
    e->begun = 1;
    if ((rc = pl_metrics_start(e)) ||
        (rc = pl_mark_load(e->st, cfg->allowed_lateness_seconds, &e->mark)))
        return rc;
    return recover_sealed(e);
}

/* Copy passes (or the stream) until --once is drained or a stop is asked
 * for. A step that sees a stop request returns SKIPPR_STOPPED and the
 * loop ends; any other failure ends the run without the graceful commit. */
static int run_loop(engine *e)
{
    int rc;
    for (;;) {
        rc = e->streaming ? pl_stream_run(e) : pl_copy_pass(e);
        if (rc || (rc = pl_maybe_commit(e, 1)) ||
            (rc = pl_mark_save(e->mark, e->st)))
            break;
        if (e->once) {
            rc = pl_flush_slices(e, 1);
            break;
        }
        if ((rc = pl_flush_slices(e, 0)))
            break;
        /* Idle until the next poll. */
        if (!e->streaming && (rc = pl_lanes_shed(&e->lanes, e)))
            break;
        sk_state_release_idle(e->st);
        sk_release_free_memory();
        if ((rc = wait_for_poll(e)) || sk_stop_requested)
            break;
    }
    if (rc && !(rc == SKIPPR_STOPPED && sk_stop_requested))
        return rc;
    if (!sk_stop_requested)
        return SKIPPR_OK;
    /* Graceful stop: make what was read durable; open slices stay in the
     * WAL for the next run. */
    rc = pl_commit(e, 1);
    if (!rc)
        sk_info("stopped on request; progress is saved");
    return !rc && e->once ? SKIPPR_STOPPED : rc;
}

int sk_pipeline_verify(const sk_yaml_doc *doc, const sk_pipeline_cfg *cfg,
                       const sk_verify_opts *o)
{
    engine e = {.cfg = cfg, .doc = doc, .once = 1};
    int rc = engine_begin(&e);
    if (!rc && !(rc = open_endpoints(&e, doc)) && !(rc = routing_init(&e))) {
        if (e.streaming) {
            sk_error("%s: verify reads a listed source again; a streaming "
                     "source's messages cannot be read twice",
                     e.src->label);
            rc = SKIPPR_INVAL;
        } else if ((cfg->shard_count > 1 || o->merge_shards) &&
                   o->since_state) {
            sk_error("verify --since-state reads one state: run it "
                     "without --shard and --merge-shards");
            rc = SKIPPR_INVAL;
        } else {
            rc = pl_verify_run(&e, o->as_json, o->since_state,
                               o->merge_shards, o->keep);
        }
    }
    e.run_ended = 1;
    engine_free(&e);
    return rc;
}

int sk_pipeline_run(const sk_yaml_doc *doc, const sk_pipeline_cfg *cfg,
                    const sk_run_opts *opts)
{
    engine e = {.cfg = cfg, .doc = doc, .once = opts->once,
                .progress = opts->progress};
    int rc = engine_begin(&e);
    if (!rc && !(rc = open_endpoints(&e, doc)) && !(rc = routing_init(&e)) &&
        !(rc = open_state(&e)) && !(rc = start_stages(&e)))
        rc = run_loop(&e);
    summary(&e, rc);
    if (!rc && pl_lister_counts(e.lister).changed)
        rc = SK_RUN_CHANGED_SKIPPED;
    rc = fenced_end(&e, rc);
    e.run_ended = 1;
    pl_metrics_update(&e, 1);
    pl_metrics_stop(&e);
    engine_free(&e);
    return rc;
}
