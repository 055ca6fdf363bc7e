/* The buffer pool (runtime/base/bufpool.c): sizes round up to a class at
 * most an eighth larger; a released buffer comes back to the next reserve
 * of its class, with the bytes of the buffer it replaces; live plus idle
 * bytes stay within the limit; and what does not fit is freed. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "base/bufpool.h"

#define MIB ((size_t)1 << 20)

static void test_class_sizes(void **state)
{
    (void)state;
    assert_int_equal(sk_bufpool_size(0), 4096);
    assert_int_equal(sk_bufpool_size(4096), 4096);
    assert_int_equal(sk_bufpool_size(4097), 4096 + 512);
    assert_int_equal(sk_bufpool_size(8 * MIB), 8 * MIB);
    assert_int_equal(sk_bufpool_size(8 * MIB + 1), 9 * MIB);
    assert_int_equal(sk_bufpool_size(15 * MIB + 1), 16 * MIB);
    for (size_t n = 4097; n < 64 * MIB; n = n * 3 / 2 + 7) {
        size_t s = sk_bufpool_size(n);
        assert_true(s >= n);
        assert_true(s - n <= n / 8);
    }
    /* above the largest class: the size asked for */
    size_t huge = ((size_t)1 << 29) + 5;
    assert_int_equal(sk_bufpool_size(huge), huge);
}

static void test_reuse_keeps_bytes(void **state)
{
    (void)state;
    sk_bufpool p;
    sk_bufpool_init(&p, 64 * MIB);
    skippr_buf a, b;
    skippr_buf_init(&a, 64 * MIB);
    skippr_buf_init(&b, 64 * MIB);
    assert_int_equal(sk_bufpool_reserve(&p, &a, 100000, 0), SKIPPR_OK);
    assert_int_equal(a.cap, sk_bufpool_size(100000));
    uint8_t *first = a.data;
    memset(a.data, 'x', 100000);
    a.len = 100000;
    sk_bufpool_release(&p, &a, 0);
    assert_null(a.data);
    assert_int_equal(p.idle, sk_bufpool_size(100000));
    /* b grows through 4 KiB to that class: it gets the same memory back,
     * with the bytes b held before the growth */
    assert_int_equal(sk_bufpool_reserve(&p, &b, 4000, 0), SKIPPR_OK);
    memcpy(b.data, "hello", 5);
    b.len = 5;
    assert_int_equal(sk_bufpool_reserve(&p, &b, 99000, 0), SKIPPR_OK);
    assert_ptr_equal(b.data, first);
    assert_memory_equal(b.data, "hello", 5);
    assert_int_equal(p.reused, 1);
    /* the 4 KiB buffer it left waits for the next 4 KiB reserve */
    assert_int_equal(p.idle, 4096);
    assert_int_equal(sk_bufpool_reserve(&p, &a, 10, b.cap), SKIPPR_OK);
    assert_int_equal(p.reused, 2);
    assert_int_equal(p.idle, 0);
    assert_int_equal(sk_bufpool_reserve(&p, &a, 10, b.cap), SKIPPR_OK);
    assert_int_equal(a.cap, 4096); /* no shrinking, no new buffer */
    sk_bufpool_release(&p, &a, b.cap);
    sk_bufpool_release(&p, &b, 0);
    sk_bufpool_clear(&p);
    assert_int_equal(p.idle, 0);
}

static void test_limit_bounds_idle(void **state)
{
    (void)state;
    sk_bufpool p;
    sk_bufpool_init(&p, 10 * MIB);
    skippr_buf b[4];
    for (int i = 0; i < 4; i++) {
        skippr_buf_init(&b[i], 64 * MIB);
        assert_int_equal(sk_bufpool_reserve(&p, &b[i], 4 * MIB, 0),
                         SKIPPR_OK);
    }
    /* 16 MiB live; releasing keeps only what fits 10 MiB with the rest */
    sk_bufpool_release(&p, &b[0], 12 * MIB);
    assert_int_equal(p.idle, 0);
    sk_bufpool_release(&p, &b[1], 8 * MIB);
    assert_int_equal(p.idle, 0);
    sk_bufpool_release(&p, &b[2], 4 * MIB);
    assert_int_equal(p.idle, 4 * MIB);
    sk_bufpool_release(&p, &b[3], 0);
    assert_int_equal(p.idle, 8 * MIB);
    /* a fresh 9 MiB buffer: idle ones go first, so that 9 MiB fits */
    skippr_buf big;
    skippr_buf_init(&big, 64 * MIB);
    assert_int_equal(sk_bufpool_reserve(&p, &big, 9 * MIB, 0), SKIPPR_OK);
    assert_true(p.idle + big.cap <= 10 * MIB);
    assert_int_equal(p.fresh, 5);
    /* past max: refused, b unchanged */
    assert_int_equal(sk_bufpool_reserve(&p, &big, 65 * MIB, 0),
                     SKIPPR_RANGE);
    assert_int_equal(big.cap, 9 * MIB);
    sk_bufpool_release(&p, &big, 0);
    sk_bufpool_clear(&p);
}

static void test_size_clamped_to_max(void **state)
{
    (void)state;
    sk_bufpool p;
    sk_bufpool_init(&p, 64 * MIB);
    skippr_buf b;
    skippr_buf_init(&b, 5000); /* the class for 4097 would be 4608: fits */
    assert_int_equal(sk_bufpool_reserve(&p, &b, 4097, 0), SKIPPR_OK);
    assert_int_equal(b.cap, 4608);
    sk_bufpool_release(&p, &b, 0);
    skippr_buf_init(&b, 4700); /* the class for 4650 (5120) is past max */
    assert_int_equal(sk_bufpool_reserve(&p, &b, 4650, 0), SKIPPR_OK);
    assert_int_equal(b.cap, 4650);
    sk_bufpool_release(&p, &b, 0); /* no class: freed, not kept */
    assert_int_equal(p.idle, 4608);
    sk_bufpool_clear(&p);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_class_sizes),
        cmocka_unit_test(test_reuse_keeps_bytes),
        cmocka_unit_test(test_limit_bounds_idle),
        cmocka_unit_test(test_size_clamped_to_max),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
