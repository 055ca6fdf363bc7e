/* Units in flight: a copy pass takes each batch the lister (lister.h)
 * lists, hints it to the source's prefetch, and runs its units through the
 * lanes, applying whichever lane finishes first, with commits, seal checks
 * and progress in between. Also makes, frees and sheds the lanes.
 *
 * Owns: the lanes (engine.lanes).
 * Thread: the pipeline thread.
 */
#include "pipeline/engine.h"

#include "pipeline/clock.h"
#include "pipeline/lister.h"
#include "pipeline/mark.h"
#include "pipeline/report.h"

/* Give every idle lane a unit of todo[*next..ntodo) and every lane its
 * next window. */
static int feed_lanes(engine *e, todo *todo, size_t ntodo, size_t *next)
{
    int rc = SKIPPR_OK;
    for (size_t i = 0; i < e->nlanes && !rc; i++) {
        lane *l = &e->lanes[i];
        if (l->busy)
            continue;
        if (!l->t && *next < ntodo && !sk_stop_requested)
            rc = pl_lane_open(l, &todo[(*next)++]);
        else if (!l->t)
            continue;
        if (!rc && (rc = pl_lane_read_submit(l)))
            pl_unit_failed(e, l->t->id, l->base, rc);
    }
    return rc;
}

/* A lane whose window is framed, or NULL when no lane is busy (every unit
 * is done). Lanes are looked at round-robin, starting after the one
 * applied last (*turn): the first finished lane in a fixed order would let
 * the low lanes run ahead while a finished high one waits, holding its
 * unit (and the event-time watermark) back. While none is finished, this
 * thread frames a queued window rather than sleep: it is one of the
 * pool's cores. */
static lane *next_finished(engine *e, size_t *turn)
{
    size_t nl = e->nlanes, nw = 0, w = 0;
    sk_group *waiting[MAX_LANES];
    size_t widx[MAX_LANES];
    for (size_t k = 0; k < nl; k++) {
        size_t i = (*turn + k) % nl;
        if (e->lanes[i].busy) {
            widx[nw] = i;
            waiting[nw++] = &e->lanes[i].g;
        }
    }
    if (nw == 0)
        return NULL;
    while (e->pool && !sk_pool_done_any(waiting, nw, &w)) {
        if (!sk_pool_help(e->pool)) {
            w = sk_pool_wait_any(e->pool, waiting, nw);
            break;
        }
    }
    *turn = widx[w] + 1;
    return &e->lanes[widx[w]];
}

/* After a window was applied (finished: its unit with it): the ledger's
 * finished units, memory, the group commit, heap trimming, sealing by the
 * clock or the watermark, the progress line. */
static int after_apply(engine *e, lane *l, int finished)
{
    int rc;
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
        if ((rc = feed_lanes(e, todo, ntodo, &next)))
            break;
        if (sk_stop_requested) {
            rc = SKIPPR_STOPPED;
            break;
        }
        lane *l = next_finished(e, &turn);
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
    /* Tasks point into the lanes: let them finish before anything goes. */
    for (size_t i = 0; i < e->nlanes; i++) {
        lane *l = &e->lanes[i];
        if (l->busy && e->pool)
            sk_pool_wait(e->pool, &l->g);
        l->busy = 0;
        if (l->t)
            pl_lane_close(l);
    }
    return rc;
}

/* A zeroed lane's buffers; its window holds up to win_max bytes.
 * pl_lane_free() releases them, also after a failure here. */
int pl_lane_init(engine *e, lane *l, size_t win_max)
{
    l->e = e;
    skippr_buf_init(&l->win, win_max);
    l->r.raw = sk_malloc(RAW_READ);
    l->pieces = sk_calloc(MAX_PIECES, sizeof *l->pieces);
    if (!l->r.raw || !l->pieces)
        return SKIPPR_NOMEM;
    for (int k = 0; k < MAX_PIECES; k++) {
        l->pieces[k].e = e;
        sk_memo_init(&l->pieces[k].memo, e->win_max);
        skippr_buf_init(&l->pieces[k].scratch, e->win_max);
    }
    return SKIPPR_OK;
}

void pl_lane_free(lane *l)
{
    for (int k = 0; l->pieces && k < MAX_PIECES; k++) {
        sk_free(l->pieces[k].recs);
        sk_free(l->pieces[k].groups);
        sk_memo_free(&l->pieces[k].memo);
        skippr_buf_free(&l->pieces[k].scratch);
        sk_csv_decoder_free(l->pieces[k].csvdec);
    }
    sk_csv_framer_free(&l->csv);
    sk_xml_framer_free(&l->xml);
    sk_free(l->pieces);
    sk_free(l->r.raw);
    skippr_buf_free(&l->win);
}

int pl_lanes_init(engine *e)
{
    /* LANES_PER_THREAD per thread plus one, so that workers frame while
     * the pipeline thread reads and applies; fewer if windows would not
     * fit the memory budget. */
    size_t n = e->nthreads > 1
                   ? SK_MIN((size_t)e->nthreads * LANES_PER_THREAD + 1,
                            MAX_LANES)
                   : 1;
    size_t per = 2 * WINDOW_BYTES + RAW_READ;
    size_t fit = (size_t)(e->cfg->memory_budget / 2) / per;
    if (n > fit)
        n = fit > 2 ? fit : 2;
    if (e->nthreads == 1)
        n = 1;
    e->lanes = sk_calloc(n, sizeof *e->lanes);
    if (!e->lanes)
        return SKIPPR_NOMEM;
    e->nlanes = n;
    for (size_t i = 0; i < n; i++) {
        int rc = pl_lane_init(e, &e->lanes[i], e->win_max);
        if (rc)
            return rc;
    }
    return SKIPPR_OK;
}

/* Free the lanes of listed units; pl_lanes_init() may make them again. */
void pl_lanes_free(engine *e)
{
    for (size_t i = 0; i < e->nlanes; i++)
        pl_lane_free(&e->lanes[i]);
    sk_free(e->lanes);
    e->lanes = NULL;
    e->nlanes = 0;
}

/* Between polls of the continuous mode, when every lane is idle: give
 * back what the lanes' buffers grew to (windows, pieces, framers), so that
 * memory follows the work of the last poll rather than the largest unit
 * seen since the start. The lanes are made anew, their buffers empty. */
int pl_lanes_shed(engine *e)
{
    for (size_t i = 0; i < e->nlanes; i++)
        if (e->lanes[i].t || e->lanes[i].busy)
            return SKIPPR_OK;
    pl_lanes_free(e);
    return pl_lanes_init(e);
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
        if (!more)
            pl_mark_pass_done(e->mark); /* saved after a commit */
    }
    return rc;
}
