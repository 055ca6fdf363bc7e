/* CRC32C: the published check value, the three-way hardware loop against a
 * bit-at-a-time reference at every interesting length, and combining CRCs
 * of parts computed apart. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "base/crc32c.h"

/* The definition, one bit at a time. */
static uint32_t reference(const uint8_t *p, size_t n)
{
    uint32_t c = 0xFFFFFFFFu;
    for (size_t i = 0; i < n; i++) {
        c ^= p[i];
        for (int k = 0; k < 8; k++)
            c = c & 1 ? (c >> 1) ^ 0x82F63B78u : c >> 1;
    }
    return ~c;
}

static uint8_t *pattern(size_t n)
{
    uint8_t *p = malloc(n ? n : 1);
    assert_non_null(p);
    uint32_t x = 12345;
    for (size_t i = 0; i < n; i++) {
        x = x * 1103515245u + 12345u;
        p[i] = (uint8_t)(x >> 16);
    }
    return p;
}

static void test_check_value(void **state)
{
    (void)state;
    /* RFC 3720 B.4 and the CRC catalogue: "123456789" -> e3069283. */
    assert_int_equal(sk_crc32c(0, "123456789", 9), 0xE3069283u);
    assert_int_equal(sk_crc32c(0, "", 0), 0);
    uint8_t zeros[32] = {0};
    assert_int_equal(sk_crc32c(0, zeros, 32), 0x8A9136AAu);
}

static void test_lengths_match_reference(void **state)
{
    (void)state;
    /* Around the three-way loop's 12 KiB step, and unaligned starts. */
    size_t lens[] = {0,     1,     7,     8,     9,      255,   4096,
                     12287, 12288, 12289, 24575, 24576,  24583, 65536,
                     65541, 100000};
    uint8_t *buf = pattern(100000 + 8);
    for (size_t i = 0; i < sizeof lens / sizeof *lens; i++)
        for (size_t off = 0; off < 4; off++)
            assert_int_equal(sk_crc32c(0, buf + off, lens[i]),
                             reference(buf + off, lens[i]));
    /* Continuing a CRC equals one pass. */
    uint32_t c = sk_crc32c(0, buf, 40000);
    assert_int_equal(sk_crc32c(c, buf + 40000, 60000), reference(buf, 100000));
    free(buf);
}

static void test_combine(void **state)
{
    (void)state;
    uint8_t *buf = pattern(70000);
    size_t cuts[] = {0, 1, 3, 8, 207, 4096, 12288, 50000, 70000};
    for (size_t i = 0; i < sizeof cuts / sizeof *cuts; i++) {
        size_t a = cuts[i];
        uint32_t ca = sk_crc32c(0, buf, a);
        uint32_t cb = sk_crc32c(0, buf + a, 70000 - a);
        assert_int_equal(sk_crc32c_combine(ca, cb, 70000 - a),
                         reference(buf, 70000));
    }
    /* Many small parts joined in order, as slices join records. */
    uint32_t acc = 0;
    size_t pos = 0, step = 1;
    while (pos < 70000) {
        size_t n = step < 70000 - pos ? step : 70000 - pos;
        acc = sk_crc32c_combine(acc, sk_crc32c(0, buf + pos, n), n);
        pos += n;
        step = step * 3 % 997 + 1;
    }
    assert_int_equal(acc, reference(buf, 70000));
    free(buf);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_check_value),
        cmocka_unit_test(test_lengths_match_reference),
        cmocka_unit_test(test_combine),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
