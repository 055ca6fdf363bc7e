/* The work-stealing pool: 10 million tasks (SKIPPR_STRESS_TASKS to change)
 * spawned from outside and from inside workers, each run exactly once, with
 * deques small enough that the overflow queue is used too. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include <cmocka.h>

#include "sched/pool.h"

typedef struct leaf {
    sk_task t;
    uint32_t idx;
} leaf;

typedef struct spawner {
    sk_task t;
    long lo, hi;
} spawner;

static sk_pool *pool;
static sk_group group;
static leaf *leaves;
static spawner *spawners;
static atomic_long nspawners;
static atomic_uchar *hits;
static atomic_long ran;

static void leaf_fn(sk_task *t)
{
    leaf *l = (leaf *)t;
    if (atomic_fetch_add(&hits[l->idx], 1) != 0)
        fail_msg("task %u ran twice", l->idx);
    atomic_fetch_add(&ran, 1);
}

/* Splits its range in two until small, then submits leaves: submissions
 * happen on workers, so they go to the worker's own deque. */
static void spawn_fn(sk_task *t)
{
    spawner *s = (spawner *)t;
    if (s->hi - s->lo > 4096) {
        long mid = (s->lo + s->hi) / 2;
        for (int half = 0; half < 2; half++) {
            spawner *c = &spawners[atomic_fetch_add(&nspawners, 1)];
            c->lo = half ? mid : s->lo;
            c->hi = half ? s->hi : mid;
            c->t.fn = spawn_fn;
            sk_pool_submit(pool, &c->t, &group);
        }
        return;
    }
    for (long i = s->lo; i < s->hi; i++) {
        leaves[i].idx = (uint32_t)i;
        leaves[i].t.fn = leaf_fn;
        sk_pool_submit(pool, &leaves[i].t, &group);
    }
}

static void test_ten_million_exactly_once(void **state)
{
    (void)state;
    long n = 10000000;
    const char *env = getenv("SKIPPR_STRESS_TASKS");
    if (env)
        n = atol(env);
    leaves = calloc((size_t)n, sizeof *leaves);
    hits = calloc((size_t)n, sizeof *hits);
    spawners = calloc((size_t)(n / 1024 + 64), sizeof *spawners);
    assert_non_null(leaves);
    pool = sk_pool_new(4, 64);
    assert_non_null(pool);
    sk_group_init(&group);
    /* Two roots submitted from this (non-worker) thread. */
    long mid = n / 2;
    for (int half = 0; half < 2; half++) {
        spawner *c = &spawners[atomic_fetch_add(&nspawners, 1)];
        c->lo = half ? mid : 0;
        c->hi = half ? n : mid;
        c->t.fn = spawn_fn;
        sk_pool_submit(pool, &c->t, &group);
    }
    sk_pool_wait(pool, &group);
    assert_int_equal(atomic_load(&ran), n);
    for (long i = 0; i < n; i++)
        assert_int_equal(atomic_load(&hits[i]), 1);
    sk_pool_free(pool);
    free(leaves);
    free(hits);
    free(spawners);
}

static atomic_int small_ran;
static void small_fn(sk_task *t)
{
    (void)t;
    atomic_fetch_add(&small_ran, 1);
}

static void test_idle_pool_parks_and_wakes(void **state)
{
    (void)state;
    sk_pool *p = sk_pool_new(2, 16);
    sk_group g;
    for (int round = 0; round < 200; round++) {
        sk_group_init(&g);
        sk_task t[3];
        for (int i = 0; i < 3; i++) {
            t[i].fn = small_fn;
            sk_pool_submit(p, &t[i], &g);
        }
        sk_pool_wait(p, &g);
    }
    assert_int_equal(atomic_load(&small_ran), 600);
    sk_pool_free(p);
}

/* The submitter's side of a pipeline: several groups in flight, help by
 * running queued tasks, then take whichever group finished. Every task
 * runs once, on a worker or on the helping thread. */
typedef struct slow {
    sk_task t;
    atomic_int runs;
    int spin;
} slow;

static void slow_fn(sk_task *t)
{
    slow *s = (slow *)t;
    volatile int x = 0;
    for (int i = 0; i < s->spin; i++)
        x += i;
    (void)x;
    atomic_fetch_add(&s->runs, 1);
}

static void test_help_and_wait_any(void **state)
{
    (void)state;
    sk_pool *p = sk_pool_new(1, 16);
    enum { G = 6, PER = 4, ROUNDS = 300 };
    static slow tasks[G][PER];
    sk_group groups[G];
    sk_group *gs[G];
    int busy[G] = {0};
    long helped = 0, applied = 0;
    for (int i = 0; i < G; i++)
        gs[i] = &groups[i];
    for (int round = 0; round < ROUNDS; round++) {
        for (int i = 0; i < G; i++) {
            if (busy[i])
                continue;
            sk_group_init(&groups[i]);
            for (int k = 0; k < PER; k++) {
                atomic_store(&tasks[i][k].runs, 0);
                tasks[i][k].spin = (round * 7 + i * 13 + k) % 5000;
                tasks[i][k].t.fn = slow_fn;
                sk_pool_submit(p, &tasks[i][k].t, &groups[i]);
            }
            busy[i] = 1;
        }
        size_t w = 0;
        while (!sk_pool_done_any(gs, G, &w)) {
            if (!sk_pool_help(p)) {
                w = sk_pool_wait_any(p, gs, G);
                break;
            }
            helped++;
        }
        assert_true(busy[w]);
        for (int k = 0; k < PER; k++)
            assert_int_equal(atomic_load(&tasks[w][k].runs), 1);
        busy[w] = 0;
        applied++;
    }
    for (int i = 0; i < G; i++)
        if (busy[i])
            sk_pool_wait(p, &groups[i]);
    assert_int_equal(applied, ROUNDS);
    assert_true(helped > 0); /* one worker cannot keep up with 24 tasks */
    sk_pool_free(p);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ten_million_exactly_once),
        cmocka_unit_test(test_idle_pool_parks_and_wakes),
        cmocka_unit_test(test_help_and_wait_any),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
