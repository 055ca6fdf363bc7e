/* Decompression by magic bytes: multi-member gzip, multi-frame zstd, and
 * truncated streams reported as such. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <zlib.h>
#include <zstd.h>

#include "base/common.h"
#include "format/decompress.h"

static size_t gz(const char *s, uint8_t *out, size_t cap)
{
    z_stream z;
    memset(&z, 0, sizeof z);
    assert_int_equal(deflateInit2(&z, 6, Z_DEFLATED, 16 + MAX_WBITS, 8,
                                  Z_DEFAULT_STRATEGY), Z_OK);
    z.next_in = (Bytef *)s;
    z.avail_in = (uInt)strlen(s);
    z.next_out = out;
    z.avail_out = (uInt)cap;
    assert_int_equal(deflate(&z, Z_FINISH), Z_STREAM_END);
    size_t n = z.total_out;
    deflateEnd(&z);
    return n;
}

/* Feed in small pieces, as the engine does. */
static int run_all(const uint8_t *in, size_t n, char *out, size_t cap,
                   size_t *outn, const char **why)
{
    sk_decomp *d = sk_decomp_new(sk_comp_detect(in, n));
    size_t pos = 0, o = 0;
    int rc = 0;
    while (pos < n) {
        size_t chunk = SK_MIN((size_t)7, n - pos), used, made;
        rc = sk_decomp_run(d, in + pos, chunk, &used, (uint8_t *)out + o,
                           SK_MIN((size_t)5, cap - o), &made, 0, why);
        if (rc)
            break;
        pos += used;
        o += made;
    }
    for (int i = 0; !rc && i < 1000; i++) {
        size_t used, made;
        rc = sk_decomp_run(d, NULL, 0, &used, (uint8_t *)out + o, cap - o,
                           &made, 1, why);
        o += made;
        if (made == 0)
            break;
    }
    sk_decomp_free(d);
    *outn = o;
    return rc;
}

static void test_gzip_members(void **state)
{
    (void)state;
    uint8_t buf[4096];
    size_t a = gz("{\"a\":1}\n", buf, sizeof buf);
    size_t b = gz("{\"b\":2}\n", buf + a, sizeof buf - a);
    assert_int_equal(sk_comp_detect(buf, a + b), SK_COMP_GZIP);
    char out[256];
    size_t n;
    const char *why = NULL;
    assert_int_equal(run_all(buf, a + b, out, sizeof out, &n, &why), 0);
    assert_int_equal(n, 16);
    assert_memory_equal(out, "{\"a\":1}\n{\"b\":2}\n", 16);
    /* Cut short: the records before the cut come out, then an error. */
    assert_int_equal(run_all(buf, a + b - 5, out, sizeof out, &n, &why),
                     SKIPPR_CORRUPT);
    assert_string_equal(why, "truncated gzip stream");
}

static void test_zstd_frames(void **state)
{
    (void)state;
    uint8_t buf[4096];
    size_t a = ZSTD_compress(buf, sizeof buf, "hello ", 6, 3);
    size_t b = ZSTD_compress(buf + a, sizeof buf - a, "world", 5, 3);
    assert_int_equal(sk_comp_detect(buf, a + b), SK_COMP_ZSTD);
    char out[64];
    size_t n;
    const char *why = NULL;
    assert_int_equal(run_all(buf, a + b, out, sizeof out, &n, &why), 0);
    assert_int_equal(n, 11);
    assert_memory_equal(out, "hello world", 11);
    assert_int_equal(run_all(buf, a + b - 2, out, sizeof out, &n, &why),
                     SKIPPR_CORRUPT);
}

static void test_plain_passes(void **state)
{
    (void)state;
    assert_int_equal(sk_comp_detect((const uint8_t *)"{\"a\"", 4),
                     SK_COMP_NONE);
    assert_int_equal(sk_comp_detect((const uint8_t *)"\x1f", 1), SK_COMP_NONE);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_gzip_members),
        cmocka_unit_test(test_zstd_frames),
        cmocka_unit_test(test_plain_passes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
