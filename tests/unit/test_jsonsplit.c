/* Where a container ends by the structural masks (format/jsonsplit.c)
 * is where the validating scanner (format/json.c) ends the record, over
 * random nested records (objects, their arrays) with brackets, quotes
 * and backslashes inside strings, in three framings (lines,
 * concatenated, pretty), with every kernel; and a record cut short has
 * no end. The splitter yields the scanner's records in order, says where
 * a cut record starts, and leaves what is not an object to the
 * scanner. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "format/json.h"
#include "format/jsonmask.h"
#include "format/jsonsplit.h"

#define CAP (1 << 20)

typedef struct out {
    char *p;
    size_t n;
    int pretty;
} out;

static void put(out *o, const char *s)
{
    size_t k = strlen(s);
    assert_true(o->n + k < CAP);
    memcpy(o->p + o->n, s, k);
    o->n += k;
}

/* A string whose text is hard for a bracket counter: brackets, escaped
 * quotes and backslashes, runs of backslashes before the closing quote. */
static void gen_string(out *o)
{
    static const char *const bits[] = {"{", "}", "[", "]", "\\\"", "\\\\",
                                       ",", ":", "a", "tenant", "\\u00e9",
                                       "\xc3\xa9", " ", "\\\\\\\\"};
    put(o, "\"");
    for (int i = rand() % 12; i > 0; i--)
        put(o, bits[rand() % 14]);
    put(o, "\"");
}

static void gen_value(out *o, int depth);

static void gap(out *o)
{
    if (o->pretty)
        put(o, rand() % 2 ? "\n  " : " ");
}

static void gen_container(out *o, int depth, int object)
{
    put(o, object ? "{" : "[");
    int n = rand() % 5;
    for (int i = 0; i < n; i++) {
        if (i)
            put(o, ",");
        gap(o);
        if (object) {
            gen_string(o);
            put(o, ":");
            gap(o);
        }
        gen_value(o, depth + 1);
    }
    gap(o);
    put(o, object ? "}" : "]");
}

static void gen_value(out *o, int depth)
{
    int k = rand() % (depth > 6 ? 4 : 6);
    if (k == 0)
        gen_string(o);
    else if (k == 1)
        put(o, rand() % 2 ? "-12.5e3" : "7");
    else if (k == 2)
        put(o, rand() % 2 ? "true" : "null");
    else if (k == 3)
        put(o, "\"\"");
    else
        gen_container(o, depth, k == 4);
}

/* Records framed by the scanner end where the masks say they do. */
static void frame_and_compare(const char *framing)
{
    static char buf[CAP];
    out o = {.p = buf, .pretty = strcmp(framing, "pretty") == 0};
    for (int r = 0; r < 400; r++) {
        gen_container(&o, 0, 1); /* (a top-level array is unwrapped) */
        put(&o, strcmp(framing, "concat") == 0 ? "" : "\n");
    }
    sk_json_framer f;
    sk_json_framer_init(&f);
    sk_json_record rec;
    size_t pos = 0, n = 0;
    const uint8_t *b = (const uint8_t *)buf;
    while (sk_json_next(&f, NULL, b, o.n, &pos, 1, &rec) == SK_JSON_RECORD) {
        assert_int_equal(sk_jsplit_end(b, o.n, rec.start), rec.end);
        /* cut short by one byte: no end */
        assert_int_equal(sk_jsplit_end(b, rec.end - 1, rec.start), 0);
        n++;
    }
    assert_int_equal(n, 400);
}

/* The splitter yields the scanner's records, in order, whole buffers
 * and cut ones. */
static void split_and_compare(const char *framing)
{
    static char buf[CAP];
    out o = {.p = buf, .pretty = strcmp(framing, "pretty") == 0};
    for (int r = 0; r < 300; r++) {
        gen_container(&o, 0, 1);
        put(&o, strcmp(framing, "concat") == 0 ? "" : "\n");
    }
    const uint8_t *b = (const uint8_t *)buf;
    for (size_t cut = o.n; cut + 4000 > o.n && cut > 0; cut -= 397) {
        sk_json_framer f;
        sk_json_framer_init(&f);
        sk_json_record rec;
        sk_jsplitter sp;
        sk_jsplit_init(&sp, b, cut, 0);
        size_t pos = 0, st = 0, en = 0;
        sk_json_rc rc;
        while ((rc = sk_json_next(&f, NULL, b, cut, &pos, 0, &rec)) ==
               SK_JSON_RECORD) {
            assert_int_equal(sk_jsplit_next(&sp, &st, &en),
                             SK_JSPLIT_RECORD);
            assert_int_equal(st, rec.start);
            assert_int_equal(en, rec.end);
        }
        int last = sk_jsplit_next(&sp, &st, &en);
        if (rc == SK_JSON_NEED_MORE) {
            assert_int_equal(last, SK_JSPLIT_CUT);
            assert_int_equal(st, rec.start);
        } else {
            assert_int_equal(rc, SK_JSON_END);
            assert_int_equal(last, SK_JSPLIT_END);
        }
    }
}

static void test_splits_as_the_scanner_frames(void **state)
{
    (void)state;
    static const char *const kernels[] = {"scalar", "sse2", "avx2"};
    for (size_t k = 0; k < 3; k++) {
        if (sk_jmask_use(kernels[k]))
            continue;
        srand(7 + (int)k);
        split_and_compare("lines");
        split_and_compare("concat");
        split_and_compare("pretty");
    }
    /* what is not an object is left to the scanner */
    const char *text = "{\"a\":1}\n[1,2]\n";
    sk_jsplitter sp;
    size_t st, en;
    sk_jsplit_init(&sp, (const uint8_t *)text, strlen(text), 0);
    assert_int_equal(sk_jsplit_next(&sp, &st, &en), SK_JSPLIT_RECORD);
    assert_int_equal(en, 7);
    assert_int_equal(sk_jsplit_next(&sp, &st, &en), SK_JSPLIT_OTHER);
    assert_int_equal(st, 8);
}

static void test_ends_where_the_scanner_ends(void **state)
{
    (void)state;
    static const char *const kernels[] = {"scalar", "sse2", "avx2"};
    for (size_t k = 0; k < 3; k++) {
        if (sk_jmask_use(kernels[k]))
            continue;
        srand(42 + (int)k);
        frame_and_compare("lines");
        frame_and_compare("concat");
        frame_and_compare("pretty");
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ends_where_the_scanner_ends),
        cmocka_unit_test(test_splits_as_the_scanner_frames),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
