/* The lanes of listed units: made for the threads and the memory budget,
 * fed units and windows, looked at round robin for the next framed one,
 * drained, and shed between polls. One lane's buffers (its window, its
 * pieces) are made and freed here too, for the streamer's document lane
 * as well.
 *
 * Owns: the pl_lanes and each lane's buffers.
 * Thread: the pipeline thread (the pool's workers frame into a lane's
 * pieces while it is busy).
 */
#include "pipeline/lanes.h"

struct pl_lanes {
    engine *e;
    lane *v;
    size_t n;
};

/* The largest window: a record of max_record_bytes may start anywhere in
 * a full one. */
static size_t widest(const engine *e)
{
    return (size_t)e->cfg->max_record_bytes * 4 + WINDOW_BYTES;
}

int pl_lane_init(engine *e, lane *l, size_t win_max)
{
    l->e = e;
    l->widest = widest(e);
    skippr_buf_init(&l->win, win_max);
    l->r.raw = sk_malloc(RAW_READ);
    l->pieces = sk_calloc(MAX_PIECES, sizeof *l->pieces);
    if (!l->r.raw || !l->pieces)
        return SKIPPR_NOMEM;
    for (int k = 0; k < MAX_PIECES; k++) {
        l->pieces[k].e = e;
        sk_memo_init(&l->pieces[k].memo, l->widest);
        skippr_buf_init(&l->pieces[k].scratch, l->widest);
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
    sk_unit_free(l->scratch);
}

int pl_lanes_new(engine *e, pl_lanes **out)
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
    pl_lanes *ls = *out = sk_calloc(1, sizeof *ls);
    if (!ls || !(ls->v = sk_calloc(n, sizeof *ls->v)))
        return SKIPPR_NOMEM;
    ls->e = e;
    ls->n = n;
    for (size_t i = 0; i < n; i++) {
        int rc = pl_lane_init(e, &ls->v[i], widest(e));
        if (rc)
            return rc;
    }
    return SKIPPR_OK;
}

void pl_lanes_free(pl_lanes *ls)
{
    if (!ls)
        return;
    for (size_t i = 0; ls->v && i < ls->n; i++)
        pl_lane_free(&ls->v[i]);
    sk_free(ls->v);
    sk_free(ls);
}

int pl_lanes_shed(pl_lanes **ls, engine *e)
{
    for (size_t i = 0; i < (*ls)->n; i++)
        if ((*ls)->v[i].t || (*ls)->v[i].busy)
            return SKIPPR_OK;
    pl_lanes_free(*ls);
    *ls = NULL;
    return pl_lanes_new(e, ls);
}

int pl_lanes_feed(pl_lanes *ls, todo *todo, size_t ntodo, size_t *next)
{
    engine *e = ls->e;
    int rc = SKIPPR_OK;
    for (size_t i = 0; i < ls->n && !rc; i++) {
        lane *l = &ls->v[i];
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
 * is done). Lanes are looked at round robin, starting after the one
 * applied last (*turn): the first finished lane in a fixed order would let
 * the low lanes run ahead while a finished high one waits, holding its
 * unit (and the event-time watermark) back. While none is finished, this
 * thread frames a queued window rather than sleep: it is one of the
 * pool's cores. */
lane *pl_lanes_next_finished(pl_lanes *ls, size_t *turn)
{
    engine *e = ls->e;
    size_t nl = ls->n, nw = 0, w = 0;
    sk_group *waiting[MAX_LANES];
    size_t widx[MAX_LANES];
    for (size_t k = 0; k < nl; k++) {
        size_t i = (*turn + k) % nl;
        if (ls->v[i].busy) {
            widx[nw] = i;
            waiting[nw++] = &ls->v[i].g;
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
    return &ls->v[widx[w]];
}

void pl_lanes_drain(pl_lanes *ls)
{
    for (size_t i = 0; i < ls->n; i++) {
        lane *l = &ls->v[i];
        if (l->busy && ls->e->pool)
            sk_pool_wait(ls->e->pool, &l->g);
        l->busy = 0;
        if (l->t)
            pl_lane_close(l);
    }
}
