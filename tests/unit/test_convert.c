/* Conversions: json -> csv cells (decoded strings, number lexemes, empty
 * null, compact nested values, RFC 4180 quoting, the header as the union
 * of keys in first-seen order, a repeated key) and csv -> jsonl objects
 * (string values in header order, repeated names suffixed, spaces kept). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "format/convert.h"

static void convert_all(sk_conv_kind kind, const char *const *recs, size_t n,
                        const char *want)
{
    sk_conv *c = sk_conv_new(kind, ',');
    assert_non_null(c);
    const char *why = NULL;
    for (size_t i = 0; sk_conv_needs_learning(c) && i < n; i++)
        assert_int_equal(sk_conv_learn(c, (const uint8_t *)recs[i],
                                       strlen(recs[i]), &why),
                         SKIPPR_OK);
    skippr_buf out;
    skippr_buf_init(&out, 1 << 20);
    assert_int_equal(sk_conv_begin(c, &out), SKIPPR_OK);
    for (size_t i = 0; i < n; i++)
        assert_int_equal(sk_conv_record(c, (const uint8_t *)recs[i],
                                        strlen(recs[i]), &out, &why),
                         SKIPPR_OK);
    assert_int_equal(out.len, strlen(want));
    assert_memory_equal(out.data, want, out.len);
    skippr_buf_free(&out);
    sk_conv_free(c);
}

static void test_json_to_csv(void **state)
{
    (void)state;
    const char *recs[] = {
        ("{\"a\":\"x,y\",\"n\":1.50e3,\"t\":true,\"z\":null,"
         "\"o\":{ \"k\" : [1, 2, \"s p\"] }}"),
        "  {\"b\":\"q\\\"uote\\nline\",\"a\":\"caf\\u00e9\",\"a\":\"dup\"} ",
        "{}",
    };
    convert_all(SK_CONV_JSON_CSV, recs, 3,
                "a,n,t,z,o,b\n"
                "\"x,y\",1.50e3,true,,\"{\"\"k\"\":[1,2,\"\"s p\"\"]}\",\n"
                "caf\xc3\xa9,,,,,\"q\"\"uote\nline\"\n"
                ",,,,,\n");
    /* A record that is not an object cannot be converted. */
    sk_conv *c = sk_conv_new(SK_CONV_JSON_CSV, ',');
    const char *why = NULL;
    assert_int_equal(sk_conv_learn(c, (const uint8_t *)"[1]", 3, &why),
                     SKIPPR_CORRUPT);
    assert_non_null(why);
    assert_int_equal(sk_conv_learn(c, (const uint8_t *)"{\"a\":1", 6, &why),
                     SKIPPR_CORRUPT);
    sk_conv_free(c);
}

/* Found by fuzz_convert: a slice whose records have no keys at all (no
 * columns) must not hand memset a NULL array (UBSan). */
static void test_fuzz_no_columns(void **state)
{
    (void)state;
    const char *recs[] = {"{}", " { } "};
    convert_all(SK_CONV_JSON_CSV, recs, 2, "\n\n\n");
}

static void test_csv_to_jsonl(void **state)
{
    (void)state;
    const char *recs[] = {
        "id,name,name,\"we\"\"ird\"",
        "1, padded ,\"a,b\",\"x\"\"y\"",
        "2,,\"multi\nline\",caf\xc3\xa9",
    };
    convert_all(SK_CONV_CSV_JSONL, recs, 3,
                "{\"id\":\"1\",\"name\":\" padded \",\"name_2\":\"a,b\","
                "\"we\\\"ird\":\"x\\\"y\"}\n"
                "{\"id\":\"2\",\"name\":\"\",\"name_2\":\"multi\\nline\","
                "\"we\\\"ird\":\"caf\xc3\xa9\"}\n");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_json_to_csv),
        cmocka_unit_test(test_csv_to_jsonl),
        cmocka_unit_test(test_fuzz_no_columns),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
