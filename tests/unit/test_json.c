/* JSON framing and peeking, checked against jansson.
 *
 * - hand-written cases for every framing the engine accepts;
 * - a differential test on a generated corpus: every record span parses
 *   with jansson to the value that was generated, and every peeked value
 *   equals jansson's;
 * - mutated records: our verdict (valid or not) equals jansson's;
 * - JSONTestSuite: no crash, every byte accounted for, y_ files fully
 *   accepted, n_ files never accepted as one whole record.
 */
#include <dirent.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <jansson.h>

#include "base/common.h"
#include "format/json.h"
#include "testdata.h"

typedef struct span {
    size_t start, end;
    int err;
} span;

/* Frame a whole buffer (final). Returns the number of spans. */
static size_t frame_all(const char *buf, size_t len, span *out, size_t cap,
                        const sk_peek_spec *spec, sk_json_record *last)
{
    sk_json_framer f;
    sk_json_framer_init(&f);
    size_t pos = sk_json_skip_bom((const uint8_t *)buf, len), n = 0;
    sk_json_record r;
    for (;;) {
        sk_json_rc rc = sk_json_next(&f, spec, (const uint8_t *)buf, len,
                                     &pos, 1, &r);
        if (rc == SK_JSON_END)
            break;
        assert_true(rc == SK_JSON_RECORD || rc == SK_JSON_ERROR);
        assert_true(n < cap);
        out[n++] = (span){r.start, r.end, rc == SK_JSON_ERROR};
        if (last)
            *last = r;
    }
    return n;
}

static void expect_records(const char *buf, const char *const *want,
                           size_t nwant)
{
    span s[64];
    size_t n = frame_all(buf, strlen(buf), s, 64, NULL, NULL);
    assert_int_equal(n, nwant);
    for (size_t i = 0; i < n; i++) {
        assert_false(s[i].err);
        assert_int_equal(s[i].end - s[i].start, strlen(want[i]));
        assert_memory_equal(buf + s[i].start, want[i], strlen(want[i]));
    }
}

static void test_framings(void **state)
{
    (void)state;
    const char *two[] = {"{\"a\":1}", "{\"b\":[1,2]}"};
    expect_records("{\"a\":1}\n{\"b\":[1,2]}\n", two, 2);    /* JSONL */
    expect_records("{\"a\":1}{\"b\":[1,2]}", two, 2);        /* Firehose */
    expect_records("{\"a\":1}\r\n\r\n{\"b\":[1,2]}\r\n", two, 2); /* CRLF */
    expect_records("\xEF\xBB\xBF{\"a\":1}\n{\"b\":[1,2]}", two, 2); /* BOM */
    expect_records("[{\"a\":1},{\"b\":[1,2]}]", two, 2);     /* array */
    expect_records("[\n  {\"a\":1},\n  {\"b\":[1,2]}\n]\n", two, 2);
    expect_records("\n\n  {\"a\":1}  \t {\"b\":[1,2]}  \n\n", two, 2);
    const char *pretty[] = {"{\n  \"a\": {\n    \"b\": \"x\"\n  }\n}",
                            "{\n  \"c\": 2\n}"};
    expect_records("{\n  \"a\": {\n    \"b\": \"x\"\n  }\n}\n{\n  \"c\": 2\n}",
                   pretty, 2);
    const char *scalars[] = {"1", "\"s\"", "true", "null", "-2.5e3"};
    expect_records("1 \"s\" true\nnull -2.5e3", scalars, 5);
    const char *none[] = {NULL};
    expect_records("", none, 0);
    expect_records("  \n [] \n", none, 0);
}

static void test_errors_resync(void **state)
{
    (void)state;
    const char *buf = "{\"a\":1}\n{\"bad\": tru}\n{\"c\":3}\n\xff\xfe\n{\"d\":"
                      "\"\xc3\"}\n{\"e\":5}\n{\"cut\":";
    span s[16];
    size_t n = frame_all(buf, strlen(buf), s, 16, NULL, NULL);
    assert_int_equal(n, 7);
    int errs[] = {0, 1, 0, 1, 1, 0, 1};
    for (size_t i = 0; i < n; i++)
        assert_int_equal(s[i].err, errs[i]);
    /* The error spans hold exactly the bad line's bytes. */
    assert_int_equal(s[1].end - s[1].start, strlen("{\"bad\": tru}"));
    assert_int_equal(s[3].end - s[3].start, 2);
    assert_int_equal(s[6].end, strlen(buf));
}

static void test_need_more(void **state)
{
    (void)state;
    const char *buf = "{\"a\":1}\n{\"b\":\"xy";
    sk_json_framer f;
    sk_json_framer_init(&f);
    sk_json_record r;
    size_t pos = 0;
    assert_int_equal(sk_json_next(&f, NULL, (const uint8_t *)buf, strlen(buf),
                                  &pos, 0, &r), SK_JSON_RECORD);
    assert_int_equal(sk_json_next(&f, NULL, (const uint8_t *)buf, strlen(buf),
                                  &pos, 0, &r), SK_JSON_NEED_MORE);
    assert_int_equal(pos, 8);
    /* A number at the end of a partial buffer may still go on. */
    pos = 0;
    assert_int_equal(sk_json_next(&f, NULL, (const uint8_t *)"123", 3, &pos, 0,
                                  &r), SK_JSON_NEED_MORE);
    assert_int_equal(sk_json_next(&f, NULL, (const uint8_t *)"123", 3, &pos, 1,
                                  &r), SK_JSON_RECORD);
}

static void test_deep_nesting(void **state)
{
    (void)state;
    size_t depth = 100000;
    char *buf = malloc(2 * depth + 1);
    memset(buf, '[', depth);
    memset(buf + depth, ']', depth);
    buf[2 * depth] = '\0';
    /* Wrapped in an object so the top-level array is not unwrapped. */
    char *obj = malloc(2 * depth + 16);
    sprintf(obj, "{\"a\":%s}", buf);
    span s[4];
    size_t n = frame_all(obj, strlen(obj), s, 4, NULL, NULL);
    assert_int_equal(n, 1);
    assert_true(s[0].err);
    free(buf);
    free(obj);
}

static void test_peek(void **state)
{
    (void)state;
    const char *paths[] = {"event_type", "detail.tenant_id", "detail",
                           "x.y.z"};
    sk_peek_spec *spec = sk_peek_spec_new(paths, 4);
    assert_non_null(spec);
    const char *buf = "{\"detail\":{\"other\":{\"tenant_id\":\"no\"},"
                      "\"tenant\\u005fid\":\"a\\\"b\"},\"event_type\":12.5e1,"
                      "\"x\":{\"y\":[{\"z\":1}]}}";
    span s[2];
    sk_json_record r;
    memset(&r, 0, sizeof r);
    assert_int_equal(frame_all(buf, strlen(buf), s, 2, spec, &r), 1);
    assert_int_equal(r.values[0].type, SK_JSON_NUMBER);
    assert_memory_equal(buf + r.values[0].off, "12.5e1", 6);
    assert_int_equal(r.values[1].type, SK_JSON_STRING);
    assert_true(r.values[1].has_escapes);
    uint8_t dec[16];
    size_t dn = sk_json_unescape((const uint8_t *)buf + r.values[1].off,
                                 r.values[1].len, dec);
    assert_int_equal(dn, 3);
    assert_memory_equal(dec, "a\"b", 3);
    assert_int_equal(r.values[2].type, SK_JSON_OBJECT);
    assert_int_equal(r.values[3].type, SK_JSON_NONE); /* array in the way */
    sk_peek_spec_free(spec);
}

/* ---- generated corpus ----------------------------------------------------- */

static uint64_t rng = 88172645463325252ULL;
static uint64_t rnd(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

static const char *const keys[] = {"event_type", "detail", "tenant_id", "a",
                                   "b", "ts", "\xc3\xa9t\xc3\xa9", "k\"q"};

static json_t *gen_value(int depth)
{
    int kind = (int)(rnd() % (depth > 3 ? 5 : 7));
    switch (kind) {
    case 0: {
        static const char *const strs[] = {"acme", "", "tab\there",
                                           "uni\xe2\x82\xac", "q\"\\/",
                                           "nul\0x", "\xf0\x9f\x98\x80"};
        size_t i = rnd() % 7;
        return json_stringn(strs[i], i == 5 ? 5 : strlen(strs[i]));
    }
    case 1: return json_integer((json_int_t)(rnd() % 2000000) - 1000000);
    case 2: return json_real((double)(rnd() % 100000) / 64.0);
    case 3: return rnd() % 2 ? json_true() : json_false();
    case 4: return json_null();
    case 5: {
        json_t *a = json_array();
        for (int i = (int)(rnd() % 4); i > 0; i--)
            json_array_append_new(a, gen_value(depth + 1));
        return a;
    }
    default: {
        json_t *o = json_object();
        for (int i = (int)(rnd() % 5); i > 0; i--)
            json_object_set_new(o, keys[rnd() % 8], gen_value(depth + 1));
        return o;
    }
    }
}

static json_t *gen_record(void)
{
    json_t *o = json_object();
    json_object_set_new(o, "event_type", gen_value(3));
    json_t *d = json_object();
    json_object_set_new(d, "tenant_id", gen_value(3));
    json_object_set_new(d, "a", gen_value(1));
    json_object_set_new(o, rnd() % 4 ? "detail" : "b", d);
    json_object_set_new(o, "ts", gen_value(2));
    return o;
}

/* Compare a peeked value with jansson's view of the same path. */
static void check_peek(const char *buf, const sk_json_value *v, json_t *want)
{
    if (!want) {
        assert_int_equal(v->type, SK_JSON_NONE);
        return;
    }
    switch (json_typeof(want)) {
    case JSON_STRING: {
        assert_int_equal(v->type, SK_JSON_STRING);
        uint8_t *d = malloc(v->len + 1);
        size_t n = sk_json_unescape((const uint8_t *)buf + v->off, v->len, d);
        assert_int_equal(n, json_string_length(want));
        assert_memory_equal(d, json_string_value(want), n);
        free(d);
        break;
    }
    case JSON_INTEGER:
    case JSON_REAL: {
        assert_int_equal(v->type, SK_JSON_NUMBER);
        json_t *mine = json_loadb(buf + v->off, v->len, JSON_DECODE_ANY, NULL);
        assert_non_null(mine);
        assert_true(json_equal(mine, want));
        json_decref(mine);
        break;
    }
    case JSON_TRUE: assert_int_equal(v->type, SK_JSON_TRUE); break;
    case JSON_FALSE: assert_int_equal(v->type, SK_JSON_FALSE); break;
    case JSON_NULL: assert_int_equal(v->type, SK_JSON_NULL); break;
    case JSON_OBJECT: assert_int_equal(v->type, SK_JSON_OBJECT); break;
    case JSON_ARRAY: assert_int_equal(v->type, SK_JSON_ARRAY); break;
    }
}

/* skim: each path its own group, settled by any value, so a record is
 * skipped only after all four are found; every container no path enters
 * (most arrays and objects of the corpus) is skipped structurally. Spans
 * and values must still equal jansson's. */
static void differential_corpus(int skim)
{
    const char *paths[] = {"event_type", "detail.tenant_id", "ts",
                           "detail.a"};
    sk_peek_spec *spec = sk_peek_spec_new(paths, 4);
    if (skim) {
        sk_peek_group g[4];
        for (size_t i = 0; i < 4; i++)
            g[i] = (sk_peek_group){i, SK_SETTLE_ANY};
        assert_int_equal(sk_peek_spec_set_skim(spec, g, 4), 0);
    }
    enum { N = 3000 };
    static const size_t flags[] = {JSON_COMPACT, JSON_INDENT(2),
                                   JSON_INDENT(0), JSON_COMPACT |
                                   JSON_ENSURE_ASCII};
    static const char *const seps[] = {"\n", "", "\r\n", " \n\n"};
    for (int framing = 0; framing < 4; framing++) {
        json_t *recs[N];
        skippr_buf all;
        skippr_buf_init(&all, 1 << 30);
        if (framing == 3)
            skippr_buf_append(&all, "[", 1);
        for (int i = 0; i < N; i++) {
            recs[i] = gen_record();
            char *s = json_dumps(recs[i], flags[rnd() % 4] | JSON_ENCODE_ANY);
            skippr_buf_append(&all, s, strlen(s));
            if (framing == 3 && i + 1 < N)
                skippr_buf_append(&all, ",\n", 2);
            else if (framing < 3)
                skippr_buf_append(&all, seps[framing], strlen(seps[framing]));
            free(s);
        }
        if (framing == 3)
            skippr_buf_append(&all, "]", 1);
        /* Frame with partial buffers too: grow the visible length in
         * steps, as the engine's windows do. */
        sk_json_framer f;
        sk_json_framer_init(&f);
        size_t pos = 0, visible = 0;
        int idx = 0;
        sk_json_record r;
        while (idx < N) {
            int final = visible >= all.len;
            sk_json_rc rc = sk_json_next(&f, spec, all.data, visible, &pos,
                                         final, &r);
            if (rc == SK_JSON_NEED_MORE || rc == SK_JSON_END) {
                assert_false(final);
                visible = SK_MIN(all.len, visible + 1 + rnd() % 5000);
                continue;
            }
            assert_int_equal(rc, SK_JSON_RECORD);
            json_error_t err;
            json_t *got = json_loadb((const char *)all.data + r.start,
                                     r.end - r.start,
                                     JSON_DECODE_ANY | JSON_ALLOW_NUL, &err);
            if (!got)
                fail_msg("record %d: jansson: %s", idx, err.text);
            assert_true(json_equal(got, recs[idx]));
            json_t *detail = json_object_get(recs[idx], "detail");
            check_peek((const char *)all.data, &r.values[0],
                       json_object_get(recs[idx], "event_type"));
            check_peek((const char *)all.data, &r.values[1],
                       detail ? json_object_get(detail, "tenant_id") : NULL);
            check_peek((const char *)all.data, &r.values[2],
                       json_object_get(recs[idx], "ts"));
            check_peek((const char *)all.data, &r.values[3],
                       detail ? json_object_get(detail, "a") : NULL);
            json_decref(got);
            json_decref(recs[idx]);
            idx++;
        }
        skippr_buf_free(&all);
    }
    sk_peek_spec_free(spec);
}

static void test_differential_corpus(void **state)
{
    (void)state;
    differential_corpus(0);
}

static void test_differential_corpus_skim(void **state)
{
    (void)state;
    differential_corpus(1);
}

/* Skim mode's structural skip on hand-made records: brackets and escaped
 * quotes inside strings, backslash runs, a record end on each side of a
 * 64-byte block edge, and a record cut off. */
static void test_skim_skip(void **state)
{
    (void)state;
    const char *paths[] = {"t"};
    sk_peek_spec *spec = sk_peek_spec_new(paths, 1);
    sk_peek_group g = {0, SK_SETTLE_ANY};
    sk_peek_spec_set_skim(spec, &g, 1);
    const char *recs[] = {
        "{\"t\":\"x\",\"a\":{\"s\":\"}}]]\\\"{{\",\"b\":[1,{\"c\":\"\\\\\"}]}}",
        "{\"a\":[\"[\",\"\\\\\\\\\"],\"t\":7,\"z\":{\"q\":\"\\\"}\"}}",
        "{\"t\":1}",
        "{\"t\":true,\"pad\":\"0123456789012345678901234567890123456789012\",\"o\":{}}",
    };
    /* Every record at every offset of a 64-byte block. */
    for (size_t r = 0; r < sizeof recs / sizeof *recs; r++) {
        for (size_t lead = 0; lead < 130; lead++) {
            char buf[512];
            size_t rl = strlen(recs[r]);
            memset(buf, ' ', lead);
            memcpy(buf + lead, recs[r], rl);
            memcpy(buf + lead + rl, "\n{\"t\":2}\n", 9);
            size_t len = lead + rl + 9;
            json_error_t err;
            json_t *j = json_loadb(recs[r], rl, 0, &err);
            if (!j)
                fail_msg("case %zu is not JSON: %s", r, err.text);
            json_decref(j);
            span sp[4];
            size_t n = frame_all(buf, len, sp, 4, spec, NULL);
            assert_int_equal(n, 2);
            assert_false(sp[0].err);
            assert_int_equal(sp[0].start, lead);
            assert_int_equal(sp[0].end, lead + rl);
            assert_int_equal(sp[1].start, lead + rl + 1);
            /* Cut anywhere inside: the framer waits for more. */
            for (size_t cut = lead + 1; cut < lead + rl; cut++) {
                sk_json_framer f;
                sk_json_framer_init(&f);
                size_t pos = 0;
                sk_json_record rec;
                assert_int_equal(sk_json_next(&f, spec, (const uint8_t *)buf,
                                              cut, &pos, 0, &rec),
                                 SK_JSON_NEED_MORE);
            }
        }
    }
    /* What is skipped is not validated: the bad literal after the settled
     * field passes in skim mode, and is an error without it. */
    const char *bad = "{\"t\":1,\"x\":tru,\"y\":[1 2]}\n";
    span sp[4];
    assert_int_equal(frame_all(bad, strlen(bad), sp, 4, spec, NULL), 1);
    assert_false(sp[0].err);
    assert_int_equal(sp[0].end, strlen(bad) - 1);
    sk_peek_spec *full = sk_peek_spec_new(paths, 1);
    assert_int_equal(frame_all(bad, strlen(bad), sp, 4, full, NULL), 1);
    assert_true(sp[0].err);
    sk_peek_spec_free(full);
    sk_peek_spec_free(spec);
}

/* Each record says whether its span holds a line feed, found while the
 * whitespace is skipped (or, for skimmed bytes, looked for): the same
 * answer as memchr over the span, with no spec, a full one and a skim
 * one, and never counting the whitespace around the record. */
static void test_multiline_flag(void **state)
{
    (void)state;
    const char *paths[] = {"t"};
    sk_peek_spec *full = sk_peek_spec_new(paths, 1);
    sk_peek_spec *skim = sk_peek_spec_new(paths, 1);
    sk_peek_group g = {0, SK_SETTLE_ANY};
    sk_peek_spec_set_skim(skim, &g, 1);
    const sk_peek_spec *specs[] = {NULL, full, skim};
    const char *bufs[] = {
        "{\"t\":1,\"a\":[1,2]}\n\n{\"t\":2}\r\n",
        "{\n  \"t\": 1,\n  \"a\": {\"b\": 2}\n}\n{\"t\":\"x\\ny\"}",
        "{\"t\":1,\"a\":{\"b\":\n2}}{\"t\":2,\"a\":[\n1]}",
        "[\n {\"t\":1},\n {\"a\":\n 1}\n]\n",
        "\n\n  {\"t\":1}  \n  {\"z\":{\"y\":[1,\n2]},\"t\":3}",
    };
    int seen[2] = {0, 0};
    for (size_t k = 0; k < sizeof specs / sizeof *specs; k++) {
        for (size_t b = 0; b < sizeof bufs / sizeof *bufs; b++) {
            const uint8_t *buf = (const uint8_t *)bufs[b];
            size_t len = strlen(bufs[b]), pos = 0;
            sk_json_framer f;
            sk_json_framer_init(&f);
            sk_json_record r;
            sk_json_rc rc;
            while ((rc = sk_json_next(&f, specs[k], buf, len, &pos, 1,
                                      &r)) != SK_JSON_END) {
                assert_int_equal(rc, SK_JSON_RECORD);
                int want = memchr(buf + r.start, '\n', r.end - r.start) != 0;
                assert_int_equal(r.multiline, want);
                seen[want]++;
            }
        }
    }
    assert_true(seen[0] > 0 && seen[1] > 0);
    sk_peek_spec_free(full);
    sk_peek_spec_free(skim);
}

/* skim on newline-delimited input (format: jsonl): once routing is
 * settled, a record runs to the end of its line. CRLF and trailing blanks
 * are not part of it, a last line needs no newline, a cut-off line waits
 * for more, and a line that does not end with '}' is an error. */
static void test_skim_lines(void **state)
{
    (void)state;
    const char *paths[] = {"t"};
    sk_peek_spec *spec = sk_peek_spec_new(paths, 1);
    sk_peek_group g = {0, SK_SETTLE_ANY};
    sk_peek_spec_set_skim(spec, &g, 1);
    sk_peek_spec_set_lines(spec, 1);
    const char *buf = "{\"t\":1,\"a\":{\"s\":\"}\"}}\r\n"
                      "{\"t\":2,\"b\":[1,2]}  \n"
                      "\n"
                      "{\"b\":{\"x\":[]},\"t\":\"z\"}";
    span sp[8];
    size_t n = frame_all(buf, strlen(buf), sp, 8, spec, NULL);
    assert_int_equal(n, 3);
    const char *want[] = {"{\"t\":1,\"a\":{\"s\":\"}\"}}",
                          "{\"t\":2,\"b\":[1,2]}",
                          "{\"b\":{\"x\":[]},\"t\":\"z\"}"};
    for (size_t i = 0; i < n; i++) {
        assert_false(sp[i].err);
        assert_int_equal(sp[i].end - sp[i].start, strlen(want[i]));
        assert_memory_equal(buf + sp[i].start, want[i], strlen(want[i]));
    }
    /* Not final and no newline yet: wait for more. */
    sk_json_framer f;
    sk_json_framer_init(&f);
    size_t pos = 0;
    sk_json_record rec;
    const char *cut = "{\"t\":1,\"a\":[1,";
    assert_int_equal(sk_json_next(&f, spec, (const uint8_t *)cut,
                                  strlen(cut), &pos, 0, &rec),
                     SK_JSON_NEED_MORE);
    /* A line holding a record cut short: an error, and the next line is
     * still a record. */
    const char *bad = "{\"t\":1,\"a\":[1,\n{\"t\":3}\n";
    n = frame_all(bad, strlen(bad), sp, 8, spec, NULL);
    assert_int_equal(n, 2);
    assert_true(sp[0].err);
    assert_false(sp[1].err);
    assert_int_equal(sp[1].end - sp[1].start, 7);
    /* Without skim, lines mode changes nothing: the record is scanned to
     * its closing brace, whatever follows on the line. */
    sk_peek_spec *full = sk_peek_spec_new(paths, 1);
    sk_peek_spec_set_lines(full, 1);
    const char *two = "{\"t\":1} {\"t\":2}\n";
    assert_int_equal(frame_all(two, strlen(two), sp, 8, full, NULL), 2);
    sk_peek_spec_free(full);
    sk_peek_spec_free(spec);
}

static void test_differential_mutations(void **state)
{
    (void)state;
    int checked = 0;
    for (int i = 0; i < 20000; i++) {
        json_t *rec = gen_record();
        char *s = json_dumps(rec, JSON_COMPACT);
        json_decref(rec);
        size_t n = strlen(s);
        /* One mutation: truncate, or overwrite a byte. */
        static const char bytes[] = "{}[]\",:\\ 0e-.tfnx\x80\xc3\x01";
        if (rnd() % 3 == 0)
            n = rnd() % n;
        else
            s[rnd() % n] = bytes[rnd() % (sizeof bytes - 1)];
        json_error_t err;
        json_t *j = json_loadb(s, n, JSON_DECODE_ANY | JSON_ALLOW_NUL, &err);
        if (!j && strstr(err.text, "overflow")) {
            free(s);
            continue; /* jansson's number range, not JSON's grammar */
        }
        span sp[8];
        size_t k = frame_all(s, n, sp, 8, NULL, NULL);
        /* "Valid" for us: one record covering every non-space byte. */
        size_t a = 0, b = n;
        while (a < n && strchr(" \t\r\n", s[a]))
            a++;
        while (b > a && strchr(" \t\r\n", s[b - 1]))
            b--;
        int ours = k == 1 && !sp[0].err && sp[0].start == a && sp[0].end == b;
        int theirs = j != NULL && s[a] == '{';
        if (ours != theirs)
            fail_msg("verdicts differ on '%.*s': ours %d, jansson %d (%s)",
                     (int)n, s, ours, theirs, j ? "ok" : err.text);
        json_decref(j);
        free(s);
        checked++;
    }
    assert_true(checked > 19000);
}

/* ---- JSONTestSuite ---------------------------------------------------------- */

static void test_jsontestsuite(void **state)
{
    (void)state;
    char dir[4096];
    snprintf(dir, sizeof dir, "%s/JSONTestSuite/test_parsing", SKIPPR_TESTDATA);
    testdata_require(dir);
    DIR *d = opendir(dir);
    if (!d)
        fail_msg("cannot open %s", dir);
    struct dirent *e;
    int files = 0;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.')
            continue;
        char path[8192];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        FILE *f = fopen(path, "rb");
        assert_non_null(f);
        static char buf[1 << 20];
        size_t n = fread(buf, 1, sizeof buf, f);
        fclose(f);
        span sp[4096];
        size_t k = frame_all(buf, n, sp, 4096, NULL, NULL);
        /* Every byte is in a span, whitespace, or top-level [ ] ,. */
        unsigned char *cov = calloc(n + 1, 1);
        size_t bom = sk_json_skip_bom((const uint8_t *)buf, n);
        memset(cov, 1, bom);
        int errors = 0;
        for (size_t i = 0; i < k; i++) {
            memset(cov + sp[i].start, 1, sp[i].end - sp[i].start);
            errors += sp[i].err;
        }
        for (size_t i = 0; i < n; i++)
            if (!cov[i] && !strchr(" \t\r\n[],", buf[i]))
                fail_msg("%s: byte %zu (0x%02x) is in no span", e->d_name, i,
                         (unsigned char)buf[i]);
        free(cov);
        if (e->d_name[0] == 'y') {
            if (errors)
                fail_msg("%s: valid JSON gave an error", e->d_name);
        } else if (e->d_name[0] == 'n') {
            size_t a = bom;
            while (a < n && strchr(" \t\r\n", buf[a]))
                a++;
            size_t b = n;
            while (b > a && strchr(" \t\r\n", buf[b - 1]))
                b--;
            if (k == 1 && !sp[0].err && sp[0].start == a && sp[0].end == b)
                fail_msg("%s: invalid JSON accepted as one record", e->d_name);
        }
        files++;
    }
    closedir(d);
    assert_true(files > 300);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_framings),
        cmocka_unit_test(test_errors_resync),
        cmocka_unit_test(test_need_more),
        cmocka_unit_test(test_deep_nesting),
        cmocka_unit_test(test_peek),
        cmocka_unit_test(test_differential_corpus),
        cmocka_unit_test(test_differential_corpus_skim),
        cmocka_unit_test(test_skim_skip),
        cmocka_unit_test(test_skim_lines),
        cmocka_unit_test(test_multiline_flag),
        cmocka_unit_test(test_differential_mutations),
        cmocka_unit_test(test_jsontestsuite),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
