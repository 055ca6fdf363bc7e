/* The Chase-Lev deque: LIFO for the owner, FIFO for thieves, bounded, and
 * under contention every item is taken exactly once. */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include <cmocka.h>

#include "sched/pool.h"

static void test_owner_and_thief_ends(void **state)
{
    (void)state;
    sk_deque d;
    assert_int_equal(sk_deque_init(&d, 4), 0);
    sk_task t[5];
    for (int i = 0; i < 4; i++)
        assert_int_equal(sk_deque_push(&d, &t[i]), 0);
    assert_int_equal(sk_deque_push(&d, &t[4]), -1); /* full, not grown */
    assert_ptr_equal(sk_deque_steal(&d), &t[0]);     /* thief: oldest */
    assert_ptr_equal(sk_deque_take(&d), &t[3]);      /* owner: newest */
    assert_ptr_equal(sk_deque_take(&d), &t[2]);
    assert_ptr_equal(sk_deque_steal(&d), &t[1]);
    assert_ptr_equal(sk_deque_take(&d), SK_DEQUE_EMPTY);
    assert_ptr_equal(sk_deque_steal(&d), SK_DEQUE_EMPTY);
    /* Indices wrap around the ring. */
    for (int round = 0; round < 100; round++) {
        assert_int_equal(sk_deque_push(&d, &t[round % 5]), 0);
        assert_ptr_equal(sk_deque_take(&d), &t[round % 5]);
    }
    sk_deque_destroy(&d);
}

enum { ITEMS = 2000000, THIEVES = 3 };
static sk_deque dq;
static sk_task *items;
static atomic_uchar *hits;
static atomic_long taken;
static atomic_int owner_done;

static void mark(sk_task *t)
{
    long i = t - items;
    assert_true(i >= 0 && i < ITEMS);
    unsigned char prev = atomic_fetch_add(&hits[i], 1);
    if (prev != 0)
        fail_msg("item %ld taken twice", i);
    atomic_fetch_add(&taken, 1);
}

static void *thief(void *arg)
{
    (void)arg;
    while (!atomic_load(&owner_done) || atomic_load(&taken) < ITEMS) {
        sk_task *t = sk_deque_steal(&dq);
        if (t != SK_DEQUE_EMPTY && t != SK_DEQUE_ABORT)
            mark(t);
        if (atomic_load(&owner_done) && t == SK_DEQUE_EMPTY)
            break;
    }
    return NULL;
}

static void test_concurrent_exactly_once(void **state)
{
    (void)state;
    items = calloc(ITEMS, sizeof *items);
    hits = calloc(ITEMS, sizeof *hits);
    assert_int_equal(sk_deque_init(&dq, 256), 0);
    pthread_t th[THIEVES];
    for (int i = 0; i < THIEVES; i++)
        pthread_create(&th[i], NULL, thief, NULL);
    /* The owner pushes in bursts and takes some back itself. */
    long next = 0;
    while (next < ITEMS) {
        int burst = 1 + (int)(next % 97);
        for (int k = 0; k < burst && next < ITEMS; k++) {
            if (sk_deque_push(&dq, &items[next]) == 0)
                next++;
            else
                break;
        }
        for (int k = 0; k < burst / 3; k++) {
            sk_task *t = sk_deque_take(&dq);
            if (t == SK_DEQUE_EMPTY)
                break;
            mark(t);
        }
    }
    sk_task *t;
    while ((t = sk_deque_take(&dq)) != SK_DEQUE_EMPTY)
        mark(t);
    atomic_store(&owner_done, 1);
    for (int i = 0; i < THIEVES; i++)
        pthread_join(th[i], NULL);
    while ((t = sk_deque_steal(&dq)) != SK_DEQUE_EMPTY)
        if (t != SK_DEQUE_ABORT)
            mark(t);
    assert_int_equal(atomic_load(&taken), ITEMS);
    for (long i = 0; i < ITEMS; i++)
        assert_int_equal(atomic_load(&hits[i]), 1);
    sk_deque_destroy(&dq);
    free(items);
    free(hits);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_owner_and_thief_ends),
        cmocka_unit_test(test_concurrent_exactly_once),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
