/* Memory figures and malloc's tuning (runtime/base/alloc.c): the heap
 * counts live blocks; once tuned, a block below SK_MMAP_MIN freed keeps
 * its pages for the next one, a block above it goes back to the system,
 * and sk_release_slack_memory() gives back a real surplus of freed pages
 * and leaves a small one alone. The allocator checks need glibc's malloc:
 * a sanitizer build replaces it. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "base/common.h"

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define OWN_MALLOC 0
#else
#define OWN_MALLOC 1
#endif

#define MIB (1u << 20)

/* malloc, then write every page, so that it is resident. */
static char *touched(size_t n)
{
    char *p = malloc(n);
    assert_non_null(p);
    memset(p, 0x5A, n);
    return p;
}

static void test_resident_counts_touched_pages(void **state)
{
    (void)state;
    sk_memstats a, b;
    sk_memory_stats(&a);
    assert_true(a.rss > 0);
    char *p = touched(16 * MIB);
    sk_memory_stats(&b);
    assert_true(b.rss >= a.rss + 12 * MIB);
    free(p);
}

static void test_heap_counts_live_blocks(void **state)
{
    (void)state;
    if (!OWN_MALLOC)
        skip();
    sk_memstats a, b, c;
    sk_memory_stats(&a);
    char *small[64];
    for (int i = 0; i < 64; i++)
        small[i] = touched(1000);
    char *big = touched(3 * MIB);
    sk_memory_stats(&b);
    assert_true(b.heap_used >= a.heap_used + 3 * MIB + 64 * 1000);
    assert_true(b.heap_held >= b.heap_used);
    free(big);
    for (int i = 0; i < 64; i++)
        free(small[i]);
    sk_memory_stats(&c);
    assert_true(c.heap_used <= a.heap_used + 64 * 1024);
}

static void test_tuned_malloc_keeps_heap_pages(void **state)
{
    (void)state;
    if (!OWN_MALLOC)
        skip();
    sk_malloc_tune();
    char *keep = touched(100);
    char *p = touched(8 * MIB);
    char *above = touched(100); /* so that p is not the heap's top */
    sk_memstats a, b, c;
    sk_memory_stats(&a);
    free(p);
    sk_memory_stats(&b);
    /* Freed but resident: the next block of that size takes the same
     * pages without faulting them in again. */
    assert_true(b.rss > a.rss - MIB);
    p = touched(8 * MIB);
    sk_memory_stats(&c);
    assert_true(c.rss < b.rss + MIB);
    free(p);
    free(above);
    free(keep);
}

static void test_tuned_malloc_returns_huge_blocks(void **state)
{
    (void)state;
    if (!OWN_MALLOC)
        skip();
    sk_malloc_tune();
    /* Untuned, freeing this would raise glibc's threshold above it. */
    free(touched(2 * (size_t)SK_MMAP_MIN));
    char *keep = touched(100);
    sk_memstats a, b, c;
    sk_memory_stats(&a);
    char *p = touched(SK_MMAP_MIN + 4 * (size_t)MIB);
    sk_memory_stats(&b);
    assert_true(b.heap_held >= a.heap_held + SK_MMAP_MIN);
    free(p);
    sk_memory_stats(&c);
    assert_true(c.heap_held < a.heap_held + MIB);
    assert_true(c.rss < b.rss - SK_MMAP_MIN);
    free(keep);
}

static void test_slack_trimmed_only_when_large(void **state)
{
    (void)state;
    if (!OWN_MALLOC)
        skip();
    sk_malloc_tune();
    sk_release_free_memory();
    /* Blocks between live ones: freed, their pages stay resident until a
     * trim. A few MiB of them is no surplus. */
    enum { N = 12 };
    char *blk[N], *sep[N];
    for (int i = 0; i < N; i++) {
        blk[i] = touched(8 * MIB);
        sep[i] = touched(100);
    }
    free(blk[0]);
    assert_int_equal(sk_release_slack_memory(), 0);
    sk_memstats a, b;
    for (int i = 1; i < N; i++)
        free(blk[i]);
    sk_memory_stats(&a);
    /* 96 MiB free against a few MiB live: trimmed. */
    assert_int_equal(sk_release_slack_memory(), 1);
    sk_memory_stats(&b);
    assert_true(b.rss < a.rss - 64 * (uint64_t)MIB);
    assert_int_equal(sk_release_slack_memory(), 0);
    for (int i = 0; i < N; i++)
        free(sep[i]);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_resident_counts_touched_pages),
        cmocka_unit_test(test_heap_counts_live_blocks),
        cmocka_unit_test(test_tuned_malloc_keeps_heap_pages),
        cmocka_unit_test(test_tuned_malloc_returns_huge_blocks),
        cmocka_unit_test(test_slack_trimmed_only_when_large),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
