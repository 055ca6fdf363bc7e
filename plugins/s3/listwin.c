/* Listing a huge prefix: the window of sub-prefixes listed at once on a
 * curl multi handle, merged in key order, and the source's list() call,
 * which picks it or the serial listing (list.c).
 *
 * Thread: the pipeline thread (the engine calls list()).
 */
/*
 * A huge prefix is listed by many requests at once. A listing with
 * Delimiter '/' finds the sub-prefixes (descending while a level has only
 * one, as in year/month/day layouts). Then a window of up to
 * list_concurrency sub-prefixes is listed concurrently, each one page after
 * another. Keys are reported in order: those of the window's first
 * sub-prefix as its pages arrive; when it ends, the window slides on by
 * one. A sub-prefix ahead of the first holds at most one page and then
 * waits, so memory stays within list_concurrency pages however many keys
 * the prefix has. The keys of one sub-prefix sort together (a key beside
 * the sub-prefixes has no '/' after the level, so it cannot fall among
 * them), which is what lets each be reported whole, in turn.
 *
 * start_after skips whole sub-prefixes below it and starts the one it falls
 * in at start_after, so later batches do not re-list what was reported. A
 * server whose Delimiter answer is empty, or a level with more than
 * LIST_LEVEL_MAX entries, gets the plain, serial listing instead (which
 * holds one page at a time), so nothing can be skipped by a server that
 * ignores delimiters.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "inventory.h"
#include "list.h"
#include "list_impl.h"
#include "request.h"

/* Handle the listing requests that finished: their pages go to their
 * sub-prefix; a sub-prefix with more to read asks for its next page at
 * once if it is `head` (the one being reported) or holds nothing, and
 * otherwise waits. Returns SKIPPR_OK or SKIPPR_FATAL. */
static int list_step(s3_ctx *c, CURLM *m, const lprefix *head)
{
    int still = 0, seen = 0;
    curl_multi_perform(m, &still);
    if (still > 0) {
        curl_multi_poll(m, NULL, 0, 50, NULL);
        curl_multi_perform(m, &still);
    }
    CURLMsg *msg;
    int q;
    while ((msg = curl_multi_info_read(m, &q))) {
        if (msg->msg != CURLMSG_DONE)
            continue;
        seen++;
        lprefix *lp = NULL;
        curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, (char **)&lp);
        CURLcode cc = msg->data.result;
        curl_multi_remove_handle(m, lp->easy);
        curl_easy_getinfo(lp->easy, CURLINFO_RESPONSE_CODE, &lp->r.status);
        int st = SKIPPR_OK;
        if (cc != CURLE_OK)
            st = s3_transport_failure(c, cc, &lp->r);
        st = s3_verdict(c, st, &lp->r, "list", lp->prefix);
        int truncated = 0;
        if (st == SKIPPR_OK &&
            s3_parse_page(&lp->r.body, &lp->v, &lp->n, &lp->cap, NULL, NULL,
                       lp->token, sizeof lp->token, &truncated)) {
            LOG(c, SKIPPR_LOG_ERROR, "list s3://%s/%s: unreadable XML answer",
                c->bucket, lp->prefix);
            st = SKIPPR_FATAL;
        }
        skippr_buf_free(&lp->r.body);
        if (st == SKIPPR_RETRY && lp->attempts < c->max_attempts) {
            s3_backoff(c, lp->attempts);
            s3_lprefix_start(c, m, lp);
        } else if (st != SKIPPR_OK) {
            if (st == SKIPPR_RETRY)
                s3_give_up(c, "list", lp->prefix, &lp->r);
            return SKIPPR_FATAL;
        } else if (!truncated) {
            lp->state = LP_DONE;
        } else {
            lp->attempts = 0;
            if (lp == head || lp->n == 0)
                s3_lprefix_start(c, m, lp);
            else
                lp->state = LP_WAITING;
        }
    }
    if (still == 0 && seen == 0) {
        LOG(c, SKIPPR_LOG_ERROR, "list s3://%s: a listing request could not "
            "be started", c->bucket);
        return SKIPPR_FATAL;
    }
    return SKIPPR_OK;
}

static int cps_cmp(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Counts of one window listing, for the debug log. */
typedef struct lstats {
    size_t reported, held_max;
} lstats;

/* Report the keys of cps[i..] and the direct objects (sorted, from *di on)
 * in order, through a window of sub-prefixes listed concurrently. */
static int list_window(s3_ctx *c, char **cps, size_t ncp, size_t i,
                       lentry *direct, size_t nd, size_t *di,
                       const char *after, skippr_unit_cb cb, void *cb_data,
                       lstats *ls)
{
    size_t lc = (size_t)c->list_concurrency;
    if (!c->lmulti) {
        if (!(c->lmulti = curl_multi_init()))
            return SKIPPR_NOMEM;
        curl_multi_setopt(c->lmulti, CURLMOPT_MAXCONNECTS, (long)lc);
    }
    if (!c->leasy && !(c->leasy = calloc(lc, sizeof *c->leasy)))
        return SKIPPR_NOMEM;
    for (size_t k = 0; k < lc; k++)
        if (!c->leasy[k] && !(c->leasy[k] = curl_easy_init()))
            return SKIPPR_NOMEM;
    lprefix *w = calloc(lc, sizeof *w); /* a ring: cps[k] in w[k % lc] */
    if (!w)
        return SKIPPR_NOMEM;
    CURLM *m = c->lmulti;
    size_t head = i, tail = i;
    int rc = SKIPPR_OK, stopped = 0;
    while (!rc && !stopped) {
        while (tail < ncp && tail - head < lc) {
            lprefix *lp = &w[tail % lc];
            size_t pl = strlen(cps[tail]);
            lp->prefix = cps[tail];
            lp->from = after && strncmp(after, cps[tail], pl) == 0 ? after
                                                                   : NULL;
            lp->token[0] = '\0';
            lp->attempts = 0;
            lp->easy = c->leasy[tail % lc];
            s3_lprefix_start(c, m, lp);
            tail++;
        }
        size_t held = 0;
        for (size_t k = head; k < tail; k++)
            held += w[k % lc].n;
        if (held > ls->held_max)
            ls->held_max = held;
        /* Report what is ready, in order. */
        while (head < tail && !stopped) {
            lprefix *lp = &w[head % lc];
            size_t dn = 0;
            while (*di + dn < nd && strcmp(direct[*di + dn].key, lp->prefix) < 0)
                dn++;
            stopped = s3_emit(direct + *di, dn, after, cb, cb_data);
            *di += dn;
            if (!stopped) {
                s3_sort_entries(lp->v, lp->n);
                stopped = s3_emit(lp->v, lp->n, after, cb, cb_data);
            }
            ls->reported += lp->n;
            s3_lentries_clear(lp->v, lp->n);
            lp->n = 0;
            if (stopped || lp->state == LP_BUSY)
                break;
            if (lp->state == LP_WAITING) {
                s3_lprefix_start(c, m, lp);
                break;
            }
            head++; /* done: its slot takes the next sub-prefix */
        }
        if (stopped || head == ncp)
            break;
        if (head < tail)
            rc = list_step(c, m, &w[head % lc]);
    }
    for (size_t k = 0; k < lc; k++) {
        /* Removing a handle that is not in the multi is harmless; the
         * handles and their connections stay for the next listing. */
        if (w[k].easy)
            curl_multi_remove_handle(m, w[k].easy);
        curl_slist_free_all(w[k].hdrs);
        skippr_buf_free(&w[k].r.body);
        s3_lentries_free(w[k].v, w[k].n);
    }
    free(w);
    return rc ? rc : stopped ? 1 : SKIPPR_OK;
}

static int list_parallel(s3_ctx *c, const char *after, skippr_unit_cb cb,
                         void *cb_data)
{
    const char *top = c->prefix ? c->prefix : "";
    char *prefix = strdup(top);
    char **cps = NULL;
    size_t ncp = 0;
    lentry *direct = NULL;
    size_t nd = 0, dcap = 0;
    int rc = SKIPPR_OK;
    if (!prefix)
        return SKIPPR_NOMEM;
    /* Descend while a level has a single sub-prefix and no objects. */
    for (int depth = 0; depth < 8; depth++) {
        rc = s3_list_level(c, prefix, &cps, &ncp, &direct, &nd, &dcap);
        if (rc || ncp != 1 || nd != 0)
            break;
        free(prefix);
        prefix = cps[0];
        free(cps);
        cps = NULL;
        ncp = 0;
    }
    int serial = rc == 1 || (!rc && ncp == 0 && nd == 0);
    if (rc == 1)
        LOG(c, SKIPPR_LOG_DEBUG, "listing s3://%s/%s: over %d entries in one "
            "level; listing one page at a time", c->bucket, prefix,
            LIST_LEVEL_MAX);
    if (!serial && !rc) {
        LOG(c, SKIPPR_LOG_DEBUG, "listing s3://%s/%s: %zu sub-prefixes, %zu "
            "objects beside them", c->bucket, prefix, ncp, nd);
        if (ncp > 1) /* cps is NULL when only objects were found */
            qsort(cps, ncp, sizeof *cps, cps_cmp);
        s3_sort_entries(direct, nd);
        /* Skip the sub-prefixes wholly at or below start_after. */
        size_t i = 0, di = 0;
        lstats ls = {0};
        while (after && i < ncp && strcmp(cps[i], after) < 0 &&
               strncmp(after, cps[i], strlen(cps[i])) != 0)
            i++;
        rc = list_window(c, cps, ncp, i, direct, nd, &di, after, cb, cb_data,
                         &ls);
        if (rc == SKIPPR_OK) /* objects after the last sub-prefix */
            s3_emit(direct + di, nd - di, after, cb, cb_data);
        if (rc == 1)
            rc = SKIPPR_OK; /* cb asked to stop */
        LOG(c, SKIPPR_LOG_DEBUG, "listed s3://%s/%s: %zu keys from "
            "sub-prefixes, at most %zu held at once", c->bucket, prefix,
            ls.reported, ls.held_max);
    }
    /* Nothing, a server that ignores Delimiter, or a level too big to
     * hold: list plainly. */
    s3_lentries_free(direct, nd);
    for (size_t k = 0; k < ncp; k++)
        free(cps[k]);
    free(cps);
    free(prefix);
    if (serial)
        return s3_list_serial(c, top, after, cb, cb_data);
    return rc;
}

/* The engine's callback, noting the last key given. */
typedef struct noted {
    s3_ctx *c;
    skippr_unit_cb cb;
    void *cb_data;
} noted;

static int note_last(void *ud, const skippr_unit *u)
{
    noted *n = ud;
    s3_ctx *c = n->c;
    size_t l = strlen(u->id);
    if (l + 1 > c->list_last_cap) {
        char *p = realloc(c->list_last, l + 1);
        if (p) {
            c->list_last = p;
            c->list_last_cap = l + 1;
        }
    }
    if (l + 1 <= c->list_last_cap)
        memcpy(c->list_last, u->id, l + 1);
    else if (c->list_last)
        c->list_last[0] = '\0';
    return n->cb(n->cb_data, u);
}

int src_list(void *ctx, const char *start_after, skippr_unit_cb cb,
                    void *cb_data)
{
    s3_ctx *c = ctx;
    const char *after = start_after ? start_after : c->start_after;
    if (c->inventory_manifest && *c->inventory_manifest)
        return s3_inv_list(c, start_after, cb, cb_data);
    noted n = {c, cb, cb_data};
    /* A listing from the start, or going on after the last key this one
     * gave, is wide (sub-prefixes at once). One that starts anywhere else
     * (an incremental poll after its mark, a shard skipping a folder)
     * usually wants a page or two: listed plainly, so that it costs one
     * request, not a Delimiter walk. */
    int resume = !start_after ||
                 (c->list_last && strcmp(start_after, c->list_last) == 0);
    if (c->list_concurrency > 1 && resume)
        return list_parallel(c, after, note_last, &n);
    return s3_list_serial(c, c->prefix ? c->prefix : "", after, note_last,
                          &n);
}
