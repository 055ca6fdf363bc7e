/* What the engine and the plugins share from the SDK: the retry schedule
 * (skippr/backoff.h), the bounded buffer and the growable array
 * (skippr/buf.h). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <skippr/backoff.h>
#include <skippr/plugin.h>

#include <skippr/buf.h>

/* Retry k waits within [w/2, w], w = base << k up to the cap. */
static void test_backoff_bounds(void **state)
{
    (void)state;
    skippr_backoff b;
    skippr_backoff_init(&b, 100, 6400);
    for (int round = 0; round < 200; round++) {
        for (int k = 1; k <= 12; k++) {
            uint64_t w = 100ull << k;
            if (w > 6400)
                w = 6400;
            uint64_t ms = skippr_backoff_ms(&b, k);
            assert_true(ms >= w / 2 && ms <= w);
        }
    }
    skippr_backoff z;
    skippr_backoff_init(&z, 0, 0);
    assert_int_equal(skippr_backoff_ms(&z, 3), 0);
}

/* The jitter is seeded: a seed gives one sequence; two instances made at
 * once (two threads failing together) do not wait alike. */
static void test_backoff_seeded(void **state)
{
    (void)state;
    skippr_backoff a, b;
    a.base_ms = b.base_ms = 1000;
    a.cap_ms = b.cap_ms = 100000;
    skippr_backoff_seed(&a, 42);
    skippr_backoff_seed(&b, 42);
    for (int k = 1; k < 50; k++)
        assert_int_equal(skippr_backoff_ms(&a, k), skippr_backoff_ms(&b, k));
    skippr_backoff x, y;
    skippr_backoff_init(&x, 1000, 100000);
    skippr_backoff_init(&y, 1000, 100000);
    int same = 0;
    for (int k = 0; k < 50; k++)
        same += skippr_backoff_ms(&x, 6) == skippr_backoff_ms(&y, 6);
    assert_true(same < 5);
    /* and the waits spread over the range, not a few values */
    uint64_t lo = UINT64_MAX, hi = 0;
    for (int k = 0; k < 1000; k++) {
        uint64_t ms = skippr_backoff_ms(&x, 6);
        lo = ms < lo ? ms : lo;
        hi = ms > hi ? ms : hi;
    }
    assert_true(lo < 33000 && hi > 62000);
}

static void test_buf_bounded(void **state)
{
    (void)state;
    skippr_buf b = {.max = 11};
    assert_int_equal(skippr_buf_append(&b, "hello", 5), SKIPPR_OK);
    assert_int_equal(skippr_buf_append(&b, "", 0), SKIPPR_OK);
    assert_int_equal(skippr_buf_append(&b, "world", 5), SKIPPR_OK);
    assert_string_equal(skippr_buf_cstr(&b), "helloworld");
    assert_int_equal(skippr_buf_putc(&b, '!'), SKIPPR_OK);
    /* at the bound: nothing more, but room for the NUL of cstr */
    assert_int_equal(skippr_buf_append(&b, "?", 1), SKIPPR_RANGE);
    assert_string_equal(skippr_buf_cstr(&b), "helloworld!");
    assert_true(b.cap <= 12);
    assert_int_equal(b.len, 11);
    assert_memory_equal(b.data, "helloworld!", 11);
    skippr_buf_reset(&b);
    assert_int_equal(skippr_buf_printf(&b, "%d-%s", 42, "x"), SKIPPR_OK);
    assert_string_equal(skippr_buf_cstr(&b), "42-x");
    assert_int_equal(skippr_buf_printf(&b, "%s", "0123456789"), SKIPPR_RANGE);
    assert_int_equal(b.len, 4);
    skippr_buf_free(&b);
    assert_null(b.data);
    assert_int_equal(b.max, 11);
    /* an exact capacity, as the engine's pools ask */
    assert_int_equal(skippr_buf_reserve_exact(&b, 7), SKIPPR_OK);
    assert_int_equal(b.cap, 7);
    assert_int_equal(skippr_buf_reserve_exact(&b, 12), SKIPPR_OK);
    assert_int_equal(skippr_buf_reserve_exact(&b, 13), SKIPPR_RANGE);
    skippr_buf_free(&b);
    skippr_buf big = {0};
    char chunk[1000];
    memset(chunk, 'x', sizeof chunk);
    for (int i = 0; i < 1000; i++)
        assert_int_equal(skippr_buf_append(&big, chunk, sizeof chunk), 0);
    assert_int_equal(big.len, 1000000);
    assert_non_null(skippr_buf_cstr(&big));
    assert_int_equal(big.data[big.len], '\0');
    /* volatile: a constant this size, propagated into the inlined
     * realloc that the bound check never reaches, trips gcc's
     * alloc-size-larger-than warning at -O1 */
    volatile size_t huge = SIZE_MAX - 10;
    assert_int_equal(skippr_buf_reserve(&big, huge), SKIPPR_RANGE);
    skippr_buf_free(&big);
}

static void test_array_grow(void **state)
{
    (void)state;
    int *v = NULL;
    size_t n = 0, cap = 0;
    for (int i = 0; i < 1000; i++) {
        assert_int_equal(skippr_array_grow(&v, n, &cap, sizeof *v, 16), 0);
        assert_true(cap > n);
        v[n++] = i;
    }
    assert_int_equal(cap, 1024); /* 16 doubled six times */
    for (int i = 0; i < 1000; i++)
        assert_int_equal(v[i], i);
    size_t huge = SIZE_MAX / 2;
    assert_int_equal(skippr_array_grow(&v, huge, &huge, 16, 16),
                     SKIPPR_NOMEM); /* the size overflows: refused */
    free(v);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_backoff_bounds),
        cmocka_unit_test(test_backoff_seeded),
        cmocka_unit_test(test_buf_bounded),
        cmocka_unit_test(test_array_grow),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
