/* JSON's structural stage (format/jsonmask.c): every kernel this CPU
 * runs gives, block by block, the masks a byte-at-a-time reader gives
 * over the whole stream: escapes across blocks (runs of backslashes of
 * every length, ending at every bit), strings that span blocks, quotes
 * at the last bit, tails shorter than a block. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "format/jsonmask.h"

#define MAXN 2048

/* The masks of buf[0..n), one byte at a time: bit i of word i / 64. */
static void oracle(const uint8_t *buf, size_t n, sk_jmask *out)
{
    memset(out, 0, sizeof(sk_jmask) * ((n + 63) / 64));
    int in = 0, esc_next = 0;
    for (size_t i = 0; i < n; i++) {
        sk_jmask *m = &out[i / 64];
        uint64_t bit = (uint64_t)1 << (i % 64);
        uint8_t b = buf[i];
        int esc = esc_next;
        esc_next = !esc && b == '\\';
        int quote = b == '"' && !esc;
        int inside = quote ? !in : in; /* the closing quote is outside */
        if (quote)
            in = !in;
        int outside = !inside && !quote;
        m->escaped |= esc ? bit : 0;
        m->quote |= quote ? bit : 0;
        m->in_string |= inside ? bit : 0;
        m->structural |= outside && strchr("{}[]:,", b) && b ? bit : 0;
        m->open |= outside && (b == '{' || b == '[') ? bit : 0;
        m->close |= outside && (b == '}' || b == ']') ? bit : 0;
        m->newline |= outside && b == '\n' ? bit : 0;
        m->space |= outside && b && strchr(" \t\r\n", b) ? bit : 0;
        m->ctrl |= inside && b < 0x20 ? bit : 0;
        m->high |= b >= 0x80 ? bit : 0;
    }
}

/* The masks of buf[0..n) by blocks and a tail, with the kernel in use. */
static void by_blocks(const uint8_t *buf, size_t n, sk_jmask *out)
{
    sk_jmask_carry c = {0, 0};
    size_t i = 0;
    for (; i + 64 <= n; i += 64)
        sk_jmask_block(&c, buf + i, &out[i / 64]);
    if (i < n)
        sk_jmask_tail(&c, buf + i, n - i, &out[i / 64]);
}

static void same(const uint8_t *buf, size_t n, const char *kernel)
{
    static sk_jmask want[MAXN / 64 + 1], got[MAXN / 64 + 1];
    oracle(buf, n, want);
    by_blocks(buf, n, got);
    for (size_t w = 0; w < (n + 63) / 64; w++) {
        uint64_t keep = (w + 1) * 64 <= n ? ~0ull
                                          : ((uint64_t)1 << (n % 64)) - 1;
        got[w].space &= keep; /* the tail's padding */
        if (memcmp(&want[w], &got[w], sizeof want[w])) {
            fprintf(stderr, "kernel %s, n %zu, block %zu: escaped %016llx/"
                    "%016llx quote %016llx/%016llx in %016llx/%016llx\n",
                    kernel, n, w, (unsigned long long)want[w].escaped,
                    (unsigned long long)got[w].escaped,
                    (unsigned long long)want[w].quote,
                    (unsigned long long)got[w].quote,
                    (unsigned long long)want[w].in_string,
                    (unsigned long long)got[w].in_string);
            fail();
        }
    }
}

static const char *const names[] = {"scalar", "sse2", "avx2"};

/* buf[0..n) checked with every kernel this CPU runs; how many ran. */
static int every_kernel(const uint8_t *buf, size_t n)
{
    int ran = 0;
    for (size_t k = 0; k < 3; k++) {
        if (sk_jmask_use(names[k]))
            continue;
        same(buf, n, names[k]);
        ran++;
    }
    return ran;
}

static void test_random_streams(void **state)
{
    (void)state;
    static const uint8_t alphabet[] = "\"\"\"\\\\\\\\{}[]:,\n\r\t  ab\x01\xc3\xa9";
    uint8_t buf[MAXN];
    srand(41);
    for (int t = 0; t < 3000; t++) {
        size_t n = (size_t)rand() % MAXN;
        for (size_t i = 0; i < n; i++)
            buf[i] = alphabet[(size_t)rand() % (sizeof alphabet - 1)];
        int ran = every_kernel(buf, n);
#if defined(__x86_64__)
        assert_true(ran >= 2); /* scalar and SSE2 at least */
#else
        assert_true(ran >= 1);
#endif
    }
}

static void test_backslash_runs_at_every_bit(void **state)
{
    (void)state;
    uint8_t buf[256];
    for (size_t start = 0; start < 130; start++)
        for (size_t len = 1; len <= 70; len++) {
            memset(buf, 'x', sizeof buf);
            buf[0] = '"';
            memset(buf + start + 1, '\\', len);
            buf[start + 1 + len] = '"'; /* escaped when len is odd */
            every_kernel(buf, start + len + 3);
        }
}

static void test_known_block(void **state)
{
    (void)state;
    /* {"a":"x\"}",  "b":[1]}  then a newline at byte 63 */
    uint8_t buf[64];
    memset(buf, ' ', sizeof buf);
    const char *rec = "{\"a\":\"x\\\"}\",\"b\":[1]}";
    memcpy(buf, rec, strlen(rec));
    buf[63] = '\n';
    sk_jmask_carry c = {0, 0};
    sk_jmask m;
    sk_jmask_block(&c, buf, &m);
    /* structural: { : , : [ ] } at 0, 4, 11, 15, 16, 18, 19 (the '}' at
     * 9 is inside the string) */
    uint64_t want = (1ull << 0) | (1ull << 4) | (1ull << 11) | (1ull << 15) |
                    (1ull << 16) | (1ull << 18) | (1ull << 19);
    assert_int_equal(m.structural, want);
    assert_int_equal(m.newline, 1ull << 63);
    assert_int_equal(m.escaped, 1ull << 8);
    assert_int_equal(c.in_string, 0);
    assert_int_equal(c.escaped, 0);
    printf("kernel in use: %s\n", sk_jmask_kernel());
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_random_streams),
        cmocka_unit_test(test_backslash_runs_at_every_bit),
        cmocka_unit_test(test_known_block),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
