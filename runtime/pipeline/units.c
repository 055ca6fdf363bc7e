/* Units in flight and listed sources: list a batch of units (list_batch)
 * after the last one listed, skip those the ledger says are done, and run
 * the rest through the lanes, applying whichever lane finishes first, with
 * commits, seal checks and progress in between. Also makes, frees and
 * sheds the lanes.
 *
 * Owns: the lanes (engine.lanes) and the listing batch (engine.todo).
 * Thread: the pipeline thread.
 */
#include "pipeline/engine.h"

#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base/fsio.h"
#include "pipeline/clock.h"
#include "pipeline/mark.h"
#include "pipeline/report.h"
#include "pipeline/shard.h"

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
         * merges rewrite each record once per level. */
        if (sk_ledger_recent_count(e->st->ledger) >= LEDGER_HELD &&
            (rc = sk_state_compact_ledger(e->st)))
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

void pl_todo_clear(engine *e)
{
    for (size_t i = 0; i < e->ntodo; i++) {
        sk_free(e->todo[i].id);
        sk_free(e->todo[i].version);
    }
    e->ntodo = 0;
    e->todo_undone = 0;
}

/* The key just past every key of a folder (which ends in '/'): the
 * folder followed by U+10FFFF, the highest code point, so that a listing
 * asked to start after it goes on with the next folder. Caller frees. */
static char *past_folder(const char *id, size_t folder_len)
{
    static const char top[] = "\xf4\x8f\xbf\xbf";
    char *k = sk_malloc(folder_len + sizeof top);
    if (k) {
        memcpy(k, id, folder_len);
        memcpy(k + folder_len, top, sizeof top);
    }
    return k;
}

/* Copy s into *buf (cap bytes, grown as needed; the caller owns it):
 * a per-unit copy without an allocation per unit. */
static int buf_copy(char **buf, size_t *cap, const char *s)
{
    size_t n = strlen(s);
    if (*cap < n + 1) {
        char *p = sk_realloc(*buf, n + 1);
        if (!p)
            return SKIPPR_NOMEM;
        *buf = p;
        *cap = n + 1;
    }
    memcpy(*buf, s, n + 1);
    return SKIPPR_OK;
}

/* The arrival time a unit's key gives (arrival_key_pattern, else a
 * Firehose or Hive date): 1 with *a set, 0 when it gives none. */
static int key_arrival(const engine *e, const char *id, int64_t *a)
{
    const char *pat = e->cfg->arrival_key_pattern;
    return sk_route_unit_arrival(pat && *pat ? pat : NULL, id, a);
}

/* A listed unit: while every unit so far arrived long enough ago (and is
 * done by the pass's end), the candidate mark moves on to it. known: its
 * key's arrival time when the caller has it already, else NULL. */
static void mark_note(engine *e, const skippr_unit *u, const int64_t *known)
{
    if (pl_mark_frozen(e->mark))
        return;
    int64_t a = known ? *known : 0;
    const skippr_source_ops *ops = e->src->plugin->source;
    int has = known || key_arrival(e, u->id, &a);
    if (!has && SKIPPR_OPS_HAS(skippr_source_ops, ops, flags) &&
        (ops->flags & SKIPPR_SOURCE_MODIFIED) && u->modified > 0) {
        a = u->modified;
        has = 1;
    }
    pl_mark_note(e->mark, u->id, has, a);
}

/* Where this pass starts: after the mark, or (a whole listing) at the
 * first key. */
static int pass_start(engine *e)
{
    sk_free(e->list_after);
    e->list_after = NULL;
    return pl_mark_pass(e->mark, e->cfg, e->once, &e->list_after);
}

typedef struct list_ctx {
    engine *e;
    int rc;
    int jumped; /* stopped to list again past another shard's folder */
    int listed; /* e->list_last holds the last unit the round listed */
    int names_first; /* a version NULL is a report by name alone */
} list_ctx;

/* Event time: t's arrival time (clock.h). The units listed before it
 * that are not done yet count as arriving with it when it came earlier,
 * so that the watermark (pl_watermark) stays the earliest. */
static void note_arrival(engine *e, todo *t, int64_t modified)
{
    int64_t a;
    if (!pl_clock_arrival(e->clock, e->cfg, t->id, modified, &a))
        return;
    for (size_t i = e->ntodo; i > e->todo_undone; i--)
        if (e->todo[i - 1].arrival > a)
            e->todo[i - 1].arrival = a;
        else
            break;
    t->arrival = a;
}

/* What every listed unit goes through first: count it, move the mark,
 * and skip another shard's. -1 to go on with it; otherwise what list()
 * gets back. */
static int list_enter(list_ctx *c, const skippr_unit *u,
                      const int64_t *arrival)
{
    engine *e = c->e;
    e->units_listed++;
    mark_note(e, u, arrival);
    uint32_t nshards = e->cfg->shard_count;
    if (nshards > 1 && sk_shard_of(u->id, nshards) != e->cfg->shard_index) {
        /* Another shard's: skip its whole folder by listing again after
         * it (the check above stays what decides). */
        e->skipped_shard++;
        size_t fl = sk_shard_folder_len(u->id);
        if (fl == 0 || u->id[fl - 1] != '/')
            return 0;
        char *after = past_folder(u->id, fl);
        if (!after) {
            c->rc = SKIPPR_NOMEM;
            return 1;
        }
        sk_free(e->list_after);
        e->list_after = after;
        c->jumped = 1;
        return 1;
    }
    if (buf_copy(&e->list_last, &e->list_last_cap, u->id)) {
        c->rc = SKIPPR_NOMEM;
        return 1;
    }
    c->listed = 1;
    return -1;
}

/* A unit reported by name alone (verify_done_units: false): skipped when
 * the ledger has it done, unless the listing mark needs its modification
 * time; any other is asked for whole, and list_cb sees it from the top. */
static int list_name(list_ctx *c, const skippr_unit *u)
{
    engine *e = c->e;
    int64_t a;
    int has = 0;
    if (!pl_mark_frozen(e->mark)) {
        if (!key_arrival(e, u->id, &a))
            return SKIPPR_UNIT_DESCRIBE; /* the mark needs its mtime */
        has = 1;
    }
    const sk_unit_rec *known = NULL;
    int rc = sk_ledger_lookup(e->st->ledger, u->id, &known);
    if (rc) {
        c->rc = rc;
        return 1;
    }
    if (!known || !(known->flags & SK_UNIT_DONE))
        return SKIPPR_UNIT_DESCRIBE;
    int r = list_enter(c, u, has ? &a : NULL);
    if (r >= 0)
        return r;
    e->skipped_done++;
    return 0;
}

/* A done unit u whose version or size is not the ledger's (known's), by
 * changed_units: 1 skip it, -1 stop the listing (fail, c->rc set), 0 copy
 * it again from its start. Each is logged and counted. */
static int list_changed(list_ctx *c, const skippr_unit *u,
                        const sk_unit_rec *known)
{
    engine *e = c->e;
    const char *ver = u->version ? u->version : "";
    static const char *const what[] = {
        "skipped (changed_units: skip; the run will exit with code 4)",
        "copied again whole (changed_units: copy)",
        "the run stops (changed_units: fail)"};
    int policy = e->cfg->changed_units;
    sk_log(policy == SK_CHANGED_FAIL ? SKIPPR_LOG_ERROR : SKIPPR_LOG_WARN,
           "%s: unit %s changed since it was copied (version %s, %" PRId64
           " bytes; now %s, %" PRId64 " bytes): %s", e->src->label, u->id,
           known->version, known->size, ver, u->size, what[policy]);
    if (policy == SK_CHANGED_COPY) {
        e->recopied_changed++;
        return 0;
    }
    e->skipped_changed++;
    if (policy == SK_CHANGED_FAIL) {
        c->rc = SKIPPR_CHANGED;
        return -1;
    }
    return 1;
}

static int list_cb(void *ud, const skippr_unit *u)
{
    list_ctx *c = ud;
    engine *e = c->e;
    if (!u->version && c->names_first)
        return list_name(c, u);
    int r = list_enter(c, u, NULL);
    if (r >= 0)
        return r;
    const sk_unit_rec *known = NULL;
    int rc = sk_ledger_lookup(e->st->ledger, u->id, &known);
    if (rc) {
        c->rc = rc;
        return 1;
    }
    const char *ver = u->version ? u->version : "";
    int64_t offset = 0;
    uint32_t flags = 0;
    if (known) {
        int same = strcmp(known->version, ver) == 0 && known->size == u->size;
        if ((known->flags & SK_UNIT_DONE) && same) {
            e->skipped_done++;
            return 0;
        }
        if (known->flags & SK_UNIT_DONE) {
            int r = list_changed(c, u, known);
            if (r)
                return r > 0 ? 0 : 1;
            known = NULL; /* copied again, whole */
        }
    }
    if (known) {
        int same = strcmp(known->version, ver) == 0 && known->size == u->size;
        if (same) {
            offset = known->offset;
            flags = known->flags;
        } else {
            sk_warn("%s: unit %s changed while partly copied; records up to "
                    "offset %" PRId64 " are kept and reading resumes there",
                    e->src->label, u->id, known->offset);
            offset = known->offset;
            flags = known->flags;
        }
    }
    if (skippr_array_grow(&e->todo, e->ntodo, &e->todo_cap, sizeof *e->todo,
                          256)) {
        c->rc = SKIPPR_NOMEM;
        return 1;
    }
    todo *t = &e->todo[e->ntodo];
    t->id = sk_strdup(u->id);
    t->version = sk_strdup(ver);
    if (!t->id || !t->version) {
        sk_free(t->id);
        sk_free(t->version);
        c->rc = SKIPPR_NOMEM;
        return 1;
    }
    t->size = u->size;
    t->offset = offset;
    t->flags = flags;
    t->done = 0;
    t->arrival = INT64_MIN;
    const skippr_source_ops *ops = e->src->plugin->source;
    note_arrival(e, t,
                 SKIPPR_OPS_HAS(skippr_source_ops, ops, flags) &&
                         (ops->flags & SKIPPR_SOURCE_MODIFIED)
                     ? u->modified
                     : 0);
    e->ntodo++;
    return e->ntodo >= (size_t)e->cfg->list_batch; /* process in batches */
}

/* One pass over the source: list in batches, copy every new unit. */
int pl_copy_pass(engine *e)
{
    const skippr_source_ops *ops = e->src->plugin->source;
    int src = pass_start(e);
    if (src)
        return src;
    int names_first = !e->cfg->verify_done_units &&
                      SKIPPR_OPS_HAS(skippr_source_ops, ops, flags) &&
                      (ops->flags & SKIPPR_SOURCE_NAMES_FIRST);
    for (;;) {
        pl_todo_clear(e);
        int more, rc;
        list_ctx c;
        do { /* a round ends with a full batch or the end of the list */
            c = (list_ctx){e, 0, 0, 0, names_first};
            /* The next round lists after the last unit this one listed
             * (list_last), or past another shard's folder (list_cb sets
             * list_after); the plugin reads start_after meanwhile, so
             * this round's stays alive until it returns. */
            char *from = e->list_after;
            e->list_after = NULL;
            rc = ops->list(e->src->ctx, from, list_cb, &c);
            if (!c.rc && !c.jumped && c.listed &&
                !(e->list_after = sk_strdup(e->list_last)))
                c.rc = SKIPPR_NOMEM;
            if (!e->list_after)
                e->list_after = from;
            else
                sk_free(from);
            if (c.rc)
                return c.rc;
            if (rc) {
                plugin_failed(e->src, "%s: listing failed: %s",
                              e->src->label, skippr_status_str(rc));
                return rc;
            }
            more = e->ntodo >= (size_t)e->cfg->list_batch;
        } while (!more && c.jumped && !sk_stop_requested);
        more = more || c.jumped;
        if (ops->prefetch && e->ntodo) {
            /* Let the source start fetching the whole batch. */
            skippr_unit *units = sk_calloc(e->ntodo, sizeof *units);
            if (!units)
                return SKIPPR_NOMEM;
            for (size_t i = 0; i < e->ntodo; i++)
                units[i] = (skippr_unit){e->todo[i].id, e->todo[i].version,
                                         e->todo[i].size, 0};
            rc = ops->prefetch(e->src->ctx, units, e->ntodo);
            sk_free(units);
            if (rc)
                sk_warn("%s: prefetch failed (%s); reading one unit at a time",
                        e->src->label, skippr_status_str(rc));
        }
        if ((rc = run_units(e, e->todo, e->ntodo)))
            return rc;
        if (!more) {
            pl_mark_pass_done(e->mark); /* saved after a commit */
            return SKIPPR_OK;
        }
    }
}
