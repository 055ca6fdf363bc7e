/* Units in flight: a copy pass takes each batch the lister (lister.h)
 * lists, hints it to the source's prefetch, and runs its units through the
 * lanes (lanes.h), applying whichever lane finishes first, with commits,
 * seal checks and progress in between.
 *
 * Owns: nothing (the lanes are lanes.c's).
 * Thread: the pipeline thread.
 */
#include "pipeline/engine.h"

#include "pipeline/clock.h"
#include "pipeline/lanes.h"
#include "pipeline/lister.h"
#include "pipeline/mark.h"
#include "pipeline/report.h"

/* After a window was applied (finished: its unit with it): the ledger's
 * finished units, memory, the group commit, heap trimming, sealing by the
 * clock or the watermark, the progress line. */
static int after_apply(engine *e, lane *l, int finished)
{
    int rc;
    if (e->verify) { /* nothing to commit or seal */
        if (finished) {
            l->t->done = 1;
            pl_lane_close(l);
        }
        return SKIPPR_OK;
    }
    if (finished) {
        l->t->done = 1;
        pl_lane_close(l);
        /* Finished units wait in memory for the next flush of the
         * ledger, which otherwise comes only with a seal: bound them.
         * A flush costs what it writes (a run of LEDGER_HELD), and
         * merges rewrite each record once per level. The commit first
         * is the pipeline's, which puts and syncs growing objects. */
        if (sk_ledger_recent_count(sk_state_ledger(e->st)) >= LEDGER_HELD &&
            ((rc = pl_commit(e, 1)) ||
             (rc = sk_state_compact_ledger(e->st))))
            return rc;
    }
    if (pl_st_memory_over(e) && (rc = pl_relieve_memory(e)))
        return rc;
    if ((rc = pl_maybe_commit(e, 0)))
        return rc;
    uint64_t now = sk_now_ns();
    /* A surplus of freed heap pages goes back to the system now and
     * then, so that RSS follows what is live over a run of days
     * (SK_MMAP_MIN). */
    if (now - e->last_trim_ns >= TRIM_EVERY_NS) {
        e->last_trim_ns = now;
        sk_release_slack_memory();
    }
    /* Slices are due by the clock, or because the unit just finished
     * moved the watermark past one's time bucket (event time). */
    if (now - e->last_seal_check_ns >=
            (uint64_t)e->cfg->commit_interval_ms * 1000000ULL ||
        (finished && pl_watermark(e) >= pl_clock_next_due(e->clock)) ||
        (now - e->last_seal_check_ns >= 50000000ULL &&
         pl_wal_over_budget(e))) {
        e->last_seal_check_ns = now;
        if ((rc = pl_flush_slices(e, 0)))
            return rc;
    }
    pl_progress(e, 0);
    return SKIPPR_OK;
}

/* Copy the units of one listing batch through the lanes. Whichever lane
 * finishes first is applied first, so one slow object does not hold up the
 * others; a unit's own windows are always applied in order. */
static int run_units(engine *e, todo *todo, size_t ntodo)
{
    size_t next = 0, turn = 0;
    int rc = SKIPPR_OK;
    for (;;) {
        if ((rc = pl_lanes_feed(e->lanes, todo, ntodo, &next)))
            break;
        if (sk_stop_requested) {
            rc = SKIPPR_STOPPED;
            break;
        }
        lane *l = pl_lanes_next_finished(e->lanes, &turn);
        if (!l)
            break; /* every unit is done */
        int finished = 0;
        if ((rc = pl_lane_apply(l, &finished))) {
            pl_unit_failed(e, l->t->id, l->base, rc);
            break;
        }
        if ((rc = after_apply(e, l, finished)))
            break;
    }
    pl_lanes_drain(e->lanes);
    return rc;
}

/* Let the source start fetching the whole batch (a hint: a failure only
 * means one unit at a time). */
static int prefetch_batch(engine *e, const todo *v, size_t n)
{
    const skippr_source_ops *ops = e->src->plugin->source;
    if (!ops->prefetch || !n)
        return SKIPPR_OK;
    skippr_unit *units = sk_calloc(n, sizeof *units);
    if (!units)
        return SKIPPR_NOMEM;
    for (size_t i = 0; i < n; i++)
        units[i] = (skippr_unit){v[i].id, v[i].version, v[i].size, 0};
    int rc = ops->prefetch(e->src->ctx, units, n);
    sk_free(units);
    if (rc)
        sk_warn("%s: prefetch failed (%s); reading one unit at a time",
                e->src->label, skippr_status_str(rc));
    return SKIPPR_OK;
}

/* One pass over the source: list in batches, copy every new unit. */
int pl_copy_pass(engine *e)
{
    int rc = pl_lister_pass(e);
    for (int more = 1; !rc && more;) {
        size_t n;
        todo *v;
        if ((rc = pl_lister_next(e, &more)))
            break;
        v = pl_lister_batch(e->lister, &n);
        if ((rc = prefetch_batch(e, v, n)) || (rc = run_units(e, v, n)))
            break;
        if (!more && e->mark)
            pl_mark_pass_done(e->mark); /* saved after a commit */
    }
    return rc;
}
