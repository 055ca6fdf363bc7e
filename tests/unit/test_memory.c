/* Memory figures and malloc's tuning (runtime/common.c): the heap counts
 * live blocks, and once tuned, a large block freed goes back to the system
 * even after larger ones came and went (glibc would otherwise have raised
 * its mmap threshold and served the block from the heap). The allocator
 * checks need glibc's malloc: a sanitizer build replaces it. */
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

static void test_tuned_malloc_returns_large_blocks(void **state)
{
    (void)state;
    if (!OWN_MALLOC)
        skip();
    sk_malloc_tune();
    /* Untuned, freeing this raises glibc's threshold above 4 MiB. */
    free(touched(8 * MIB));
    char *keep = touched(100); /* a live block above what follows */
    sk_memstats a, b, c;
    sk_memory_stats(&a);
    char *p = touched(4 * MIB);
    sk_memory_stats(&b);
    assert_true(b.heap_held >= a.heap_held + 4 * MIB);
    free(p);
    sk_memory_stats(&c);
    assert_true(c.heap_held < a.heap_held + MIB);
    assert_true(c.rss < b.rss - 3 * MIB);
    free(keep);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_resident_counts_touched_pages),
        cmocka_unit_test(test_heap_counts_live_blocks),
        cmocka_unit_test(test_tuned_malloc_returns_large_blocks),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
