/* Fetching ahead: after list(), the engine hands the batch's units to
 * prefetch(); an I/O thread GETs whole objects (up to concurrency at once,
 * within prefetch_bytes of memory, backpressure beyond) so that open() and
 * read() of a small object find it in memory. A unit not fetched, or
 * larger than the budget, is read with ranged GETs (read.c) instead.
 *
 * Thread: the I/O thread for the fetching; pf_take/pf_release on the
 * pipeline thread, under the prefetcher's mutex.
 */
#include "prefetch.h"
#include "request.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <time.h>
#include <unistd.h>

/*
 * prefetch() queues the units the engine will open next. One I/O thread
 * drives a curl multi handle: it keeps up to `concurrency` GETs in flight,
 * each for the first chunk of one object, as long as the chunks started but
 * not yet consumed fit in `prefetch_bytes` (beyond that it waits: that is
 * the backpressure). open() takes a unit's fetched chunk; the rest of a
 * large object is read with ranged GETs as before. Only the I/O thread
 * touches the multi and easy handles; items move between threads under
 * the mutex.
 */
static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/*
 * The transfers are driven with curl's socket interface: curl says which
 * sockets to watch (pf_on_socket) and when it wants a timeout action
 * (pf_on_timer); the I/O thread waits with epoll and hands curl only the
 * sockets that are ready. With dozens of GETs in flight, curl then runs
 * the transfers that have bytes, not all of them on every wakeup, and the
 * kernel reports the ready sockets instead of polling every one.
 */
static int pf_on_socket(CURL *easy, curl_socket_t s, int what, void *userp,
                        void *sockp)
{
    (void)easy;
    (void)sockp;
    prefetcher *pf = userp;
    if (what == CURL_POLL_REMOVE) {
        (void)epoll_ctl(pf->epfd, EPOLL_CTL_DEL, s, NULL); /* may be closed */
        return 0;
    }
    struct epoll_event ev = {
        .events = ((what & CURL_POLL_IN) ? EPOLLIN : 0u) |
                  ((what & CURL_POLL_OUT) ? EPOLLOUT : 0u),
        .data.fd = s};
    if (epoll_ctl(pf->epfd, EPOLL_CTL_MOD, s, &ev) == 0 ||
        (errno == ENOENT && epoll_ctl(pf->epfd, EPOLL_CTL_ADD, s, &ev) == 0))
        return 0;
    return -1; /* curl fails the transfers: the engine reads them itself */
}

static int pf_on_timer(CURLM *multi, long ms, void *userp)
{
    (void)multi;
    prefetcher *pf = userp;
    pf->timer_at = ms < 0 ? -1 : now_ms() + ms;
    return 0;
}

/* Wait up to 20 ms (less when curl's timer is due sooner) for ready
 * sockets, and let curl act on them and on its timer. Lock not held. */
static void pf_run_ready(prefetcher *pf)
{
    int64_t now = now_ms();
    int wait = 20;
    if (pf->timer_at >= 0 && pf->timer_at - now < wait)
        wait = pf->timer_at <= now ? 0 : (int)(pf->timer_at - now);
    struct epoll_event ev[64];
    int n = epoll_wait(pf->epfd, ev, (int)(sizeof ev / sizeof *ev), wait);
    int still;
    for (int i = 0; i < n; i++) {
        int f = 0;
        /* a peer that hung up is read to its end, as a poll() would */
        if (ev[i].events & (EPOLLIN | EPOLLHUP))
            f |= CURL_CSELECT_IN;
        if (ev[i].events & EPOLLOUT)
            f |= CURL_CSELECT_OUT;
        if (ev[i].events & EPOLLERR)
            f |= CURL_CSELECT_ERR;
        curl_multi_socket_action(pf->multi, ev[i].data.fd, f, &still);
    }
    if (pf->timer_at >= 0 && now_ms() >= pf->timer_at) {
        pf->timer_at = -1; /* the action may set it again */
        curl_multi_socket_action(pf->multi, CURL_SOCKET_TIMEOUT, 0, &still);
    }
}

/* Keep body b of a consumed item for a later GET, if the spares stay
 * within half the window; else free it. Lock held. Memory that was just
 * written is reused rather than given back: a fresh page costs a fault
 * and zeroing (on a VM, microseconds each), and bodies handed from the
 * I/O thread's arena to the pipeline thread's free() are otherwise
 * trimmed and faulted in again, GET after GET. */
static void pf_spare_put(prefetcher *pf, skippr_buf *b)
{
    if (b->data && pf->nspare < (int)(sizeof pf->spare / sizeof *pf->spare) &&
        pf->spare_bytes + (int64_t)b->cap <= pf->window / 2) {
        pf->spare[pf->nspare].p = (char *)b->data;
        pf->spare[pf->nspare].cap = b->cap;
        pf->nspare++;
        pf->spare_bytes += (int64_t)b->cap;
        b->data = NULL;
        b->len = b->cap = 0;
    }
    skippr_buf_free(b);
}

/* Give body b a spare of at least n bytes and at most twice that, the
 * smallest there is; 0 if none fits (b is left as it was). Lock held. */
static int pf_spare_take(prefetcher *pf, skippr_buf *b, size_t n)
{
    int best = -1;
    for (int i = 0; i < pf->nspare; i++)
        if (pf->spare[i].cap >= n && pf->spare[i].cap / 2 <= n &&
            (best < 0 || pf->spare[i].cap < pf->spare[best].cap))
            best = i;
    if (best < 0)
        return 0;
    skippr_buf_free(b);
    b->data = (uint8_t *)pf->spare[best].p;
    b->cap = pf->spare[best].cap;
    b->len = 0;
    b->data[0] = '\0';
    pf->spare_bytes -= (int64_t)b->cap;
    pf->spare[best] = pf->spare[--pf->nspare];
    return 1;
}

static void pf_spares_free(prefetcher *pf)
{
    for (int i = 0; i < pf->nspare; i++)
        free(pf->spare[i].p);
    pf->nspare = 0;
    pf->spare_bytes = 0;
}

/* How many bytes started and not yet consumed items may hold. A window
 * fits `concurrency` GETs of the mean object queued, twice over (the
 * second half: bodies that arrived while the engine reads an earlier
 * one); more would only be memory touched for nothing. prefetch_bytes,
 * when given, is the window; when not, it is the cap and 8 MiB the
 * floor. Lock held. */
static void pf_window(const s3_ctx *c, prefetcher *pf)
{
    int64_t w = c->prefetch_bytes;
    if (c->prefetch_auto && pf->queued_n > 0) {
        int64_t mean = pf->queued_bytes / pf->queued_n + 1;
        int64_t fit = mean > INT64_MAX / 2 / c->concurrency
                          ? INT64_MAX
                          : 2 * c->concurrency * mean;
        w = fit < (8LL << 20) ? 8LL << 20 : fit;
        if (w > c->prefetch_bytes)
            w = c->prefetch_bytes;
    }
    pf->window = w;
}

static void item_free(pf_item *it)
{
    if (!it)
        return;
    skippr_buf_free(&it->r.body);
    curl_slist_free_all(it->hdrs);
    free(it->url);
    free(it->key);
    free(it->etag);
    free(it);
}

/* Start one transfer; called by the I/O thread with the lock held. */
static void pf_start(s3_ctx *c, prefetcher *pf, pf_item *it)
{
    char url[8192], range[64], ifm[300];
    snprintf(range, sizeof range, "bytes=0-%lld", (long long)it->len - 1);
    snprintf(ifm, sizeof ifm, "\"%s\"", it->etag);
    sigv4_kv h[2] = {{"range", range}, {"if-match", ifm}};
    curl_slist_free_all(it->hdrs);
    it->hdrs = NULL;
    skippr_buf body = it->r.body;
    memset(&it->r, 0, sizeof it->r);
    /* A retry keeps the body it had. The length is known: one
     * allocation (a spare, if one fits), not a doubling series of
     * reallocs (each a copy and fresh pages to fault in). On failure the
     * body grows as it comes. */
    body.len = 0;
    if (!body.data)
        (void)pf_spare_take(pf, &body, (size_t)it->len + 1);
    it->r.body = body;
    it->r.body.max = (size_t)it->len;
    (void)skippr_buf_reserve_exact(&it->r.body, (size_t)it->len + 1);
    if (s3_prepare(c, "GET", it->key, NULL, 0, NULL, 0, h, *it->etag ? 2 : 1,
                url, sizeof url, &it->hdrs) != SKIPPR_OK ||
        !(it->easy = it->easy ? it->easy : curl_easy_init())) {
        it->state = PF_FINISHED;
        it->ok = 0;
        return;
    }
    s3_easy_setup(c, it->easy, url, it->hdrs, &it->r);
    curl_easy_setopt(it->easy, CURLOPT_PRIVATE, it);
    curl_multi_add_handle(pf->multi, it->easy);
    it->state = PF_IN_FLIGHT;
    it->attempts++;
    pf->running++;
    c->host->counter_add(c->host, "requests_in_flight", 1);
    if (pf->running > pf->max_inflight)
        pf->max_inflight = pf->running;
}

/* Start, in open order, what the bounds allow (under pf->mu). */
static void pf_start_queued(s3_ctx *c, prefetcher *pf)
{
    int64_t now = now_ms();
    for (pf_item *it = pf->head; it && pf->running < c->concurrency;
         it = it->next) {
        if (it->state != PF_QUEUED || it->retry_at > now)
            continue;
        if (pf->reserved > 0 && pf->reserved + it->len > pf->window)
            break; /* backpressure: wait for the engine to consume */
        pf->reserved += it->len;
        if (pf->reserved > pf->max_reserved)
            pf->max_reserved = pf->reserved;
        pf_start(c, pf, it);
        if (it->state == PF_FINISHED) /* could not start: open() reads */
            pthread_cond_broadcast(&pf->cv);
    }
}

/* Nothing running: wait up to 50 ms for work (under pf->mu). */
static void pf_idle(prefetcher *pf)
{
    if (!pf->head) /* idle, as between polls: let the spares go */
        pf_spares_free(pf);
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_nsec += 50000000L;
    if (ts.tv_nsec >= 1000000000L) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000L;
    }
    pthread_cond_timedwait(&pf->cv, &pf->mu, &ts);
}

/* Transfer it finished with cc (under pf->mu): kept, queued again after
 * a backoff, or given up (open() then reads it itself); an abandoned one
 * is freed. */
static void pf_finished(s3_ctx *c, prefetcher *pf, pf_item *it, CURLcode cc)
{
    curl_multi_remove_handle(pf->multi, it->easy);
    pf->running--;
    c->host->counter_add(c->host, "requests_in_flight", -1);
    curl_easy_getinfo(it->easy, CURLINFO_RESPONSE_CODE, &it->r.status);
    it->ok = cc == CURLE_OK && it->r.status / 100 == 2 &&
             (int64_t)it->r.body.len == it->len;
    int transient = cc != CURLE_OK || it->r.status >= 500 ||
                    it->r.status == 429 ||
                    (it->r.status / 100 == 2 && !it->ok);
    if (it->abandoned) {
        pf->reserved -= it->len;
        curl_easy_cleanup(it->easy);
        it->easy = NULL;
        pf_spare_put(pf, &it->r.body);
        item_free(it);
    } else if (!it->ok && transient && !it->taken &&
               it->attempts < c->max_attempts) {
        /* Queue it again, after a backoff with jitter. */
        s3_count_retry(c, cc != CURLE_OK, it->r.status);
        it->retry_at = now_ms() + (int64_t)skippr_backoff_ms(&pf->backoff,
                                                             it->attempts);
        it->state = PF_QUEUED;
        pf->reserved -= it->len;
    } else {
        /* Done, or given up: open() then reads it again itself, which
         * counts as a retry. */
        if (!it->ok && transient)
            s3_count_retry(c, cc != CURLE_OK, it->r.status);
        it->state = PF_FINISHED;
    }
}

static void *pf_main(void *arg)
{
    s3_ctx *c = arg;
    prefetcher *pf = c->pf;
    pthread_mutex_lock(&pf->mu);
    while (!pf->stop) {
        pf_start_queued(c, pf);
        if (pf->running == 0) {
            pf_idle(pf);
            continue;
        }
        pthread_mutex_unlock(&pf->mu);
        /* Transfers just added set curl's timer to now: no wait. */
        pf_run_ready(pf);
        pthread_mutex_lock(&pf->mu);
        CURLMsg *m;
        int left, finished = 0;
        while ((m = curl_multi_info_read(pf->multi, &left))) {
            if (m->msg != CURLMSG_DONE)
                continue;
            pf_item *it = NULL;
            curl_easy_getinfo(m->easy_handle, CURLINFO_PRIVATE, (char **)&it);
            pf_finished(c, pf, it, m->data.result);
            finished = 1;
        }
        /* Waiters want a finished transfer or room in the window: both
         * come only from here. */
        if (finished)
            pthread_cond_broadcast(&pf->cv);
    }
    pthread_mutex_unlock(&pf->mu);
    return NULL;
}

int src_prefetch(void *ctx, const skippr_unit *units, size_t n)
{
    s3_ctx *c = ctx;
    if (!c->pf) {
        prefetcher *pf = calloc(1, sizeof *pf);
        if (!pf || (pf->epfd = epoll_create1(EPOLL_CLOEXEC)) < 0) {
            free(pf);
            return SKIPPR_NOMEM;
        }
        if (!(pf->multi = curl_multi_init())) {
            close(pf->epfd);
            free(pf);
            return SKIPPR_NOMEM;
        }
        pf->timer_at = -1;
        curl_multi_setopt(pf->multi, CURLMOPT_SOCKETFUNCTION, pf_on_socket);
        curl_multi_setopt(pf->multi, CURLMOPT_SOCKETDATA, pf);
        curl_multi_setopt(pf->multi, CURLMOPT_TIMERFUNCTION, pf_on_timer);
        curl_multi_setopt(pf->multi, CURLMOPT_TIMERDATA, pf);
        /* Keep as many idle connections as may be in use: curl's default
         * cache shrinks with the handles in flight, and each batch would
         * otherwise open its connections anew. */
        curl_multi_setopt(pf->multi, CURLMOPT_MAX_HOST_CONNECTIONS,
                          (long)c->concurrency);
        curl_multi_setopt(pf->multi, CURLMOPT_MAXCONNECTS,
                          (long)c->concurrency);
        pthread_mutex_init(&pf->mu, NULL);
        skippr_backoff_init(&pf->backoff, 100, 6400);
        pthread_cond_init(&pf->cv, NULL);
        c->pf = pf;
        if (pthread_create(&pf->thread, NULL, pf_main, c) != 0) {
            curl_multi_cleanup(pf->multi);
            close(pf->epfd);
            pthread_mutex_destroy(&pf->mu);
            pthread_cond_destroy(&pf->cv);
            free(pf);
            c->pf = NULL;
            return SKIPPR_NOMEM;
        }
    }
    prefetcher *pf = c->pf;
    int64_t chunk = c->prefetch_bytes / c->concurrency;
    if (chunk > c->read_chunk_bytes)
        chunk = c->read_chunk_bytes;
    if (chunk < 65536)
        chunk = 65536;
    pthread_mutex_lock(&pf->mu);
    for (size_t i = 0; i < n; i++) {
        if (units[i].size <= 0)
            continue; /* nothing to fetch */
        pf_item *it = calloc(1, sizeof *it);
        if (!it || !(it->key = strdup(units[i].id)) ||
            !(it->etag = strdup(units[i].version ? units[i].version : ""))) {
            item_free(it);
            break;
        }
        it->size = units[i].size;
        it->len = it->size < chunk ? it->size : chunk;
        pf->queued_bytes += it->len;
        pf->queued_n++;
        if (pf->tail)
            pf->tail->next = it;
        else
            pf->head = it;
        pf->tail = it;
    }
    pf_window(c, pf);
    pthread_cond_broadcast(&pf->cv);
    pthread_mutex_unlock(&pf->mu);
    return SKIPPR_OK;
}

/* Drop one item no longer wanted; lock held. */
static void pf_drop_locked(prefetcher *pf, pf_item *it)
{
    if (it->state == PF_IN_FLIGHT) {
        it->abandoned = 1; /* the I/O thread frees it when it finishes */
        return;
    }
    if (it->state == PF_FINISHED)
        pf->reserved -= it->len;
    if (it->easy)
        curl_easy_cleanup(it->easy);
    pf_spare_put(pf, &it->r.body);
    item_free(it);
}

/* Take the fetched-ahead item for key out of the queue (NULL if none).
 * Items queued before it were skipped by the engine: they are dropped, so
 * they cannot hold the memory budget. */
pf_item *s3_pf_take(s3_ctx *c, const char *key)
{
    prefetcher *pf = c->pf;
    if (!pf)
        return NULL;
    pthread_mutex_lock(&pf->mu);
    pf_item *it = pf->head;
    while (it && strcmp(it->key, key) != 0)
        it = it->next;
    if (it) {
        while (pf->head != it) {
            pf_item *skip = pf->head;
            pf->head = skip->next;
            if (skip->state != PF_QUEUED) /* fetched for nothing */
                c->host->counter_add(c->host, "fetch_ahead_unused", 1);
            pf_drop_locked(pf, skip);
        }
        pf->head = it->next;
        if (pf->tail == it)
            pf->tail = NULL;
        it->next = NULL;
        it->taken = 1;
        if (it->state == PF_QUEUED) {
            /* Not started (or waiting to retry): read it directly. */
            pf_drop_locked(pf, it);
            it = NULL;
        }
    }
    pthread_cond_broadcast(&pf->cv);
    pthread_mutex_unlock(&pf->mu);
    return it;
}

/* Give an item back to the thread or free it; it is no longer wanted. */
void s3_pf_release(s3_ctx *c, pf_item *it)
{
    prefetcher *pf = c->pf;
    pthread_mutex_lock(&pf->mu);
    pf_drop_locked(pf, it);
    pthread_cond_broadcast(&pf->cv);
    pthread_mutex_unlock(&pf->mu);
}

void s3_pf_give(s3_ctx *c, skippr_buf *b)
{
    prefetcher *pf = c->pf;
    if (!pf) {
        skippr_buf_free(b);
        return;
    }
    pthread_mutex_lock(&pf->mu);
    pf_spare_put(pf, b);
    pthread_mutex_unlock(&pf->mu);
}

void s3_pf_stop(s3_ctx *c)
{
    prefetcher *pf = c->pf;
    if (!pf)
        return;
    pthread_mutex_lock(&pf->mu);
    pf->stop = 1;
    pthread_cond_broadcast(&pf->cv);
    pthread_mutex_unlock(&pf->mu);
    pthread_join(pf->thread, NULL);
    c->host->log(c->host, SKIPPR_LOG_DEBUG, "fetch-ahead: at most %d GETs "
                 "were in flight and %lld bytes held (window %lld bytes)",
                 pf->max_inflight, (long long)pf->max_reserved,
                 (long long)pf->window);
    for (pf_item *it = pf->head, *n; it; it = n) {
        n = it->next;
        if (it->easy) {
            curl_multi_remove_handle(pf->multi, it->easy);
            curl_easy_cleanup(it->easy);
        }
        item_free(it);
    }
    pf_spares_free(pf);
    curl_multi_cleanup(pf->multi);
    close(pf->epfd);
    pthread_mutex_destroy(&pf->mu);
    pthread_cond_destroy(&pf->cv);
    free(pf);
    c->pf = NULL;
}
