#include "sched/pool.h"

#include <pthread.h>
#include <stdlib.h>

#include "base/common.h"

/* ---- Chase-Lev deque ---------------------------------------------------
 * Memory orders follow Le et al. 2013, figure 1, with one strengthening for
 * ThreadSanitizer, which does not model stand-alone fences: push publishes
 * bottom with a release store instead of fence + relaxed store. That is at
 * least as strong, so the proof still holds. */

int sk_deque_init(sk_deque *d, size_t cap)
{
    size_t c = 2;
    while (c < cap)
        c <<= 1;
    d->slots = sk_calloc(c, sizeof *d->slots);
    if (!d->slots)
        return -1;
    for (size_t i = 0; i < c; i++)
        atomic_init(&d->slots[i], NULL);
    atomic_init(&d->top, 0);
    atomic_init(&d->bottom, 0);
    d->mask = (int64_t)c - 1;
    return 0;
}

void sk_deque_destroy(sk_deque *d)
{
    sk_free((void *)d->slots);
    d->slots = NULL;
}

int sk_deque_push(sk_deque *d, sk_task *t)
{
    int64_t b = atomic_load_explicit(&d->bottom, memory_order_relaxed);
    int64_t top = atomic_load_explicit(&d->top, memory_order_acquire);
    if (b - top > d->mask)
        return -1; /* full: the caller uses the overflow queue */
    atomic_store_explicit(&d->slots[b & d->mask], t, memory_order_relaxed);
    atomic_store_explicit(&d->bottom, b + 1, memory_order_release);
    return 0;
}

sk_task *sk_deque_take(sk_deque *d)
{
    int64_t b = atomic_load_explicit(&d->bottom, memory_order_relaxed) - 1;
    atomic_store_explicit(&d->bottom, b, memory_order_relaxed);
    atomic_thread_fence(memory_order_seq_cst);
    int64_t t = atomic_load_explicit(&d->top, memory_order_relaxed);
    if (t > b) {
        atomic_store_explicit(&d->bottom, b + 1, memory_order_relaxed);
        return SK_DEQUE_EMPTY;
    }
    sk_task *x = atomic_load_explicit(&d->slots[b & d->mask],
                                      memory_order_relaxed);
    if (t == b) {
        /* Last element: race thieves for it. */
        if (!atomic_compare_exchange_strong_explicit(
                &d->top, &t, t + 1, memory_order_seq_cst,
                memory_order_relaxed))
            x = SK_DEQUE_EMPTY;
        atomic_store_explicit(&d->bottom, b + 1, memory_order_relaxed);
    }
    return x;
}

sk_task *sk_deque_steal(sk_deque *d)
{
    int64_t t = atomic_load_explicit(&d->top, memory_order_acquire);
    atomic_thread_fence(memory_order_seq_cst);
    int64_t b = atomic_load_explicit(&d->bottom, memory_order_acquire);
    if (t >= b)
        return SK_DEQUE_EMPTY;
    sk_task *x = atomic_load_explicit(&d->slots[t & d->mask],
                                      memory_order_relaxed);
    if (!atomic_compare_exchange_strong_explicit(&d->top, &t, t + 1,
                                                 memory_order_seq_cst,
                                                 memory_order_relaxed))
        return SK_DEQUE_ABORT;
    return x;
}

/* ---- pool --------------------------------------------------------------- */

typedef struct worker {
    sk_pool *pool;
    int id;
    pthread_t thread;
    sk_deque deque;
    uint64_t rng;
} worker;

struct sk_pool {
    int n;
    worker *workers;
    /* overflow queue */
    pthread_mutex_t q_mu;
    sk_task *q_head, *q_tail;
    atomic_long q_len;
    /* parking */
    pthread_mutex_t park_mu;
    pthread_cond_t park_cv;
    atomic_long epoch;    /* bumped on every submit */
    atomic_int sleepers;
    atomic_int stop;
    /* group completion */
    pthread_mutex_t done_mu;
    pthread_cond_t done_cv;
};

static _Thread_local worker *tl_worker;

int sk_pool_threads(const sk_pool *p) { return p->n; }

static void wake(sk_pool *p)
{
    atomic_fetch_add(&p->epoch, 1);
    if (atomic_load(&p->sleepers) > 0) {
        pthread_mutex_lock(&p->park_mu);
        pthread_cond_broadcast(&p->park_cv);
        pthread_mutex_unlock(&p->park_mu);
    }
}

static void overflow_push(sk_pool *p, sk_task *t)
{
    t->next = NULL;
    pthread_mutex_lock(&p->q_mu);
    if (p->q_tail)
        p->q_tail->next = t;
    else
        p->q_head = t;
    p->q_tail = t;
    atomic_fetch_add(&p->q_len, 1);
    pthread_mutex_unlock(&p->q_mu);
}

static sk_task *overflow_pop(sk_pool *p)
{
    if (atomic_load_explicit(&p->q_len, memory_order_relaxed) == 0)
        return NULL;
    pthread_mutex_lock(&p->q_mu);
    sk_task *t = p->q_head;
    if (t) {
        p->q_head = t->next;
        if (!p->q_head)
            p->q_tail = NULL;
        atomic_fetch_sub(&p->q_len, 1);
    }
    pthread_mutex_unlock(&p->q_mu);
    return t;
}

void sk_pool_submit(sk_pool *p, sk_task *t, sk_group *g)
{
    t->group = g;
    if (g)
        atomic_fetch_add(&g->pending, 1);
    worker *w = tl_worker;
    if (!w || w->pool != p || sk_deque_push(&w->deque, t) != 0)
        overflow_push(p, t);
    wake(p);
}

static void run_task(sk_pool *p, sk_task *t)
{
    sk_group *g = t->group; /* t may be freed by fn */
    t->fn(t);
    if (g && atomic_fetch_sub(&g->pending, 1) == 1) {
        pthread_mutex_lock(&p->done_mu);
        pthread_cond_broadcast(&p->done_cv);
        pthread_mutex_unlock(&p->done_mu);
    }
}

static uint64_t xorshift(uint64_t *s)
{
    uint64_t x = *s;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return *s = x;
}

/* One attempt to find work for w. */
static sk_task *find_work(worker *w)
{
    sk_pool *p = w->pool;
    sk_task *t = sk_deque_take(&w->deque);
    if (t)
        return t;
    for (int round = 0; round < 2 * p->n; round++) {
        int v = (int)(xorshift(&w->rng) % (uint64_t)p->n);
        if (v == w->id)
            continue;
        t = sk_deque_steal(&p->workers[v].deque);
        if (t && t != SK_DEQUE_ABORT)
            return t;
    }
    return overflow_pop(p);
}

static void *worker_main(void *arg)
{
    worker *w = arg;
    sk_pool *p = w->pool;
    tl_worker = w;
    for (;;) {
        long seen = atomic_load(&p->epoch);
        sk_task *t = find_work(w);
        if (t) {
            run_task(p, t);
            continue;
        }
        if (atomic_load(&p->stop))
            break;
        /* Park unless something was submitted since the scan began. */
        atomic_fetch_add(&p->sleepers, 1);
        pthread_mutex_lock(&p->park_mu);
        while (atomic_load(&p->epoch) == seen && !atomic_load(&p->stop))
            pthread_cond_wait(&p->park_cv, &p->park_mu);
        pthread_mutex_unlock(&p->park_mu);
        atomic_fetch_sub(&p->sleepers, 1);
    }
    tl_worker = NULL;
    return NULL;
}

sk_pool *sk_pool_new(int nthreads, size_t deque_cap)
{
    if (nthreads < 1)
        nthreads = 1;
    sk_pool *made = NULL, *p = sk_calloc(1, sizeof *p);
    if (!p || !(p->workers = sk_calloc((size_t)nthreads, sizeof *p->workers)))
        goto fail;
    pthread_mutex_init(&p->q_mu, NULL);
    pthread_mutex_init(&p->park_mu, NULL);
    pthread_cond_init(&p->park_cv, NULL);
    pthread_mutex_init(&p->done_mu, NULL);
    pthread_cond_init(&p->done_cv, NULL);
    atomic_init(&p->q_len, 0);
    atomic_init(&p->epoch, 0);
    atomic_init(&p->sleepers, 0);
    atomic_init(&p->stop, 0);
    for (int i = 0; i < nthreads; i++) {
        worker *w = &p->workers[i];
        w->pool = p;
        w->id = i;
        w->rng = 0x9E3779B97F4A7C15ULL * (uint64_t)(i + 1);
        if (sk_deque_init(&w->deque, deque_cap))
            goto fail;
        p->n = i + 1;
    }
    for (int i = 0; i < nthreads; i++) {
        if (pthread_create(&p->workers[i].thread, NULL, worker_main,
                           &p->workers[i]) != 0) {
            /* Stop the ones already running. */
            atomic_store(&p->stop, 1);
            wake(p);
            for (int k = 0; k < i; k++)
                pthread_join(p->workers[k].thread, NULL);
            goto fail;
        }
    }
    made = p;
    p = NULL; /* handed to the caller */
fail:
    for (int i = 0; p && i < p->n; i++)
        sk_deque_destroy(&p->workers[i].deque);
    if (p)
        sk_free(p->workers);
    sk_free(p);
    return made;
}

void sk_pool_wait(sk_pool *p, sk_group *g)
{
    worker *w = tl_worker;
    if (w && w->pool == p) {
        while (atomic_load(&g->pending) > 0) {
            sk_task *t = find_work(w);
            if (t)
                run_task(p, t);
        }
        return;
    }
    pthread_mutex_lock(&p->done_mu);
    while (atomic_load(&g->pending) > 0)
        pthread_cond_wait(&p->done_cv, &p->done_mu);
    pthread_mutex_unlock(&p->done_mu);
}

int sk_pool_help(sk_pool *p)
{
    sk_task *t = overflow_pop(p);
    if (!t)
        return 0;
    run_task(p, t);
    return 1;
}

int sk_pool_done_any(sk_group *const *gs, size_t n, size_t *which)
{
    for (size_t i = 0; i < n; i++) {
        if (atomic_load(&gs[i]->pending) == 0) {
            *which = i;
            return 1;
        }
    }
    return 0;
}

size_t sk_pool_wait_any(sk_pool *p, sk_group *const *gs, size_t n)
{
    pthread_mutex_lock(&p->done_mu);
    for (;;) {
        for (size_t i = 0; i < n; i++) {
            if (atomic_load(&gs[i]->pending) == 0) {
                pthread_mutex_unlock(&p->done_mu);
                return i;
            }
        }
        pthread_cond_wait(&p->done_cv, &p->done_mu);
    }
}

void sk_pool_free(sk_pool *p)
{
    if (!p)
        return;
    atomic_store(&p->stop, 1);
    pthread_mutex_lock(&p->park_mu);
    pthread_cond_broadcast(&p->park_cv);
    pthread_mutex_unlock(&p->park_mu);
    for (int i = 0; i < p->n; i++)
        pthread_join(p->workers[i].thread, NULL);
    for (int i = 0; i < p->n; i++)
        sk_deque_destroy(&p->workers[i].deque);
    pthread_mutex_destroy(&p->q_mu);
    pthread_mutex_destroy(&p->park_mu);
    pthread_cond_destroy(&p->park_cv);
    pthread_mutex_destroy(&p->done_mu);
    pthread_cond_destroy(&p->done_cv);
    sk_free(p->workers);
    sk_free(p);
}
