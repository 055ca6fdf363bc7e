/* Routing: Hive escaping, bounded segments, and the key layout. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "format/json.h"
#include "route/route.h"

static char *esc(const char *v, size_t n)
{
    static char out[4096];
    skippr_buf b;
    skippr_buf_init(&b, 1 << 20);
    assert_int_equal(sk_escape_append(&b, (const uint8_t *)v, n), 0);
    assert_true(b.len < sizeof out);
    memcpy(out, b.data, b.len);
    out[b.len] = '\0';
    skippr_buf_free(&b);
    return out;
}

static void test_escape(void **state)
{
    (void)state;
    assert_string_equal(esc("acme", 4), "acme");
    assert_string_equal(esc("a/b", 3), "a%2Fb");
    assert_string_equal(esc("../../etc", 9), "..%2F..%2Fetc");
    assert_string_equal(esc("\"#%'*/:=?\\{[]^", 14),
                        "%22%23%25%27%2A%2F%3A%3D%3F%5C%7B%5B%5D%5E");
    assert_string_equal(esc("a\0b", 3), "a%00b");
    assert_string_equal(esc("\x01\x1f\x7f", 3), "%01%1F%7F");
    assert_string_equal(esc("} ~!@$&()+,;<>|`", 16), "} ~!@$&()+,;<>|`");
    /* UTF-8 passes, invalid bytes are escaped. */
    assert_string_equal(esc("caf\xc3\xa9", 5), "caf\xc3\xa9");
    assert_string_equal(esc("\xe2\x82\xac", 3), "\xe2\x82\xac");
    assert_string_equal(esc("\xff\xc3", 2), "%FF%C3");
    assert_string_equal(esc("\xc0\xaf", 2), "%C0%AF"); /* overlong '/' */
}

/* fuzz_escape found it: an empty value escaped into a buffer that had
 * no memory yet added 0 to a NULL pointer (UBSan). */
static void test_fuzz_escape_empty_into_empty_buffer(void **state)
{
    (void)state;
    skippr_buf b;
    skippr_buf_init(&b, 1 << 20);
    assert_int_equal(sk_escape_append(&b, (const uint8_t *)"", 0), 0);
    assert_int_equal(b.len, 0);
    skippr_buf_free(&b);
}

static void test_segment_bound(void **state)
{
    (void)state;
    char big[4096];
    memset(big, 'x', sizeof big);
    skippr_buf a, b;
    skippr_buf_init(&a, 1 << 20);
    skippr_buf_init(&b, 1 << 20);
    assert_int_equal(sk_segment_append(&a, "p_t=", (uint8_t *)big, 4096), 0);
    big[4095] = 'y';
    assert_int_equal(sk_segment_append(&b, "p_t=", (uint8_t *)big, 4096), 0);
    assert_true(a.len <= SK_SEGMENT_MAX);
    assert_true(b.len <= SK_SEGMENT_MAX);
    /* Long values differing only at the end stay distinct. */
    assert_false(a.len == b.len && memcmp(a.data, b.data, a.len) == 0);
    assert_memory_equal(a.data, "p_t=xxx", 7);
    /* Escapes are never cut in half. */
    char slashes[300];
    memset(slashes, '/', sizeof slashes);
    skippr_buf_reset(&a);
    assert_int_equal(sk_segment_append(&a, "", (uint8_t *)slashes, 300), 0);
    assert_true(a.len <= SK_SEGMENT_MAX);
    size_t tilde = (size_t)((uint8_t *)memchr(a.data, '~', a.len) - a.data);
    assert_int_equal(tilde % 3, 0);
    assert_null(memchr(a.data, '/', a.len));
    skippr_buf_free(&a);
    skippr_buf_free(&b);
}

static char *route(const sk_route_config *cfg, const char *json)
{
    static char out[4096];
    const char *err = NULL;
    sk_router *r = sk_router_new(cfg, &err);
    assert_non_null(r);
    sk_json_framer f;
    sk_json_framer_init(&f);
    sk_json_record rec;
    size_t pos = 0;
    assert_int_equal(sk_json_next(&f, sk_router_json_spec(r),
                                  (const uint8_t *)json, strlen(json), &pos, 1,
                                  &rec),
                     SK_JSON_RECORD);
    skippr_buf key, scratch;
    skippr_buf_init(&key, 1 << 20);
    skippr_buf_init(&scratch, 1 << 20);
    assert_int_equal(sk_route_json(r, (const uint8_t *)json, rec.values,
                                   &scratch, &key), 0);
    memcpy(out, key.data, key.len);
    out[key.len] = '\0';
    skippr_buf_free(&key);
    skippr_buf_free(&scratch);
    sk_router_free(r);
    return out;
}

static const sk_route_config seed = {
    "event_type", "detail.tenant_id,truck.tenant_id", "timestamp",
    SK_TIME_UNIT_DAY, "p_", 0, 0, NULL, 0};

static void test_seed_layout(void **state)
{
    (void)state;
    assert_string_equal(
        route(&seed, "{\"event_type\":\"login\",\"timestamp\":"
                     "\"2021-10-03T10:00:00Z\",\"detail\":{\"tenant_id\":"
                     "\"acme\"}}"),
        "login/p_tenant_id=acme/p_year=2021/p_month=10/p_day=03");
    /* Coalescing: the second field's value, under the column's name. */
    assert_string_equal(
        route(&seed, "{\"event_type\":\"x\",\"timestamp\":1633219200,"
                     "\"truck\":{\"tenant_id\":\"t1\"}}"),
        "x/p_tenant_id=t1/p_year=2021/p_month=10/p_day=03");
    /* Defaults. */
    assert_string_equal(route(&seed, "{\"a\":1}"),
                        "_default/p_tenant_id=__HIVE_DEFAULT_PARTITION__"
                        "/p_year=__HIVE_DEFAULT_PARTITION__"
                        "/p_month=__HIVE_DEFAULT_PARTITION__"
                        "/p_day=__HIVE_DEFAULT_PARTITION__");
    /* null, empty string, objects fall through; numbers and bools count. */
    assert_string_equal(
        route(&seed, "{\"event_type\":\"\",\"detail\":{\"tenant_id\":null},"
                     "\"truck\":{\"tenant_id\":42},\"timestamp\":\"bad\"}"),
        "_default/p_tenant_id=42/p_year=__HIVE_DEFAULT_PARTITION__"
        "/p_month=__HIVE_DEFAULT_PARTITION__/p_day=__HIVE_DEFAULT_PARTITION__");
    assert_string_equal(
        route(&seed, "{\"event_type\":true,\"detail\":{\"tenant_id\":{}},"
                     "\"truck\":{\"tenant_id\":false},\"timestamp\":\"2021"
                     "-01-02\"}"),
        "true/p_tenant_id=false/p_year=2021/p_month=01/p_day=02");
    /* Escaped key names match after unescaping. */
    assert_string_equal(
        route(&seed, "{\"event\\u005ftype\":\"e\\u0301\",\"timestamp\":"
                     "\"2021-10-03\"}"),
        "e\xcc\x81/p_tenant_id=__HIVE_DEFAULT_PARTITION__/p_year=2021"
        "/p_month=10/p_day=03");
}

/* The column's name: given, and with per_path each path's own (the old
 * layout); the heads a state's definition records. */
static void test_partition_names(void **state)
{
    (void)state;
    const char *truck = "{\"event_type\":\"x\",\"truck\":{\"tenant_id\":"
                        "\"t1\"}}";
    sk_route_config c = seed;
    c.time_unit = SK_TIME_UNIT_NONE;
    c.partition_name = "tenant";
    assert_string_equal(route(&c, truck), "x/p_tenant=t1");
    c.partition_name = "a=b";
    assert_string_equal(route(&c, truck), "x/p_a%3Db=t1");
    c.partition_name = NULL;
    c.partition_per_path = 1;
    assert_string_equal(route(&c, truck), "x/p_truck.tenant_id=t1");
    assert_string_equal(route(&c, "{\"event_type\":\"x\"}"),
                        "x/p_detail.tenant_id=__HIVE_DEFAULT_PARTITION__");
    const char *err = NULL;
    sk_router *r = sk_router_new(&c, &err);
    char *heads = sk_router_part_heads(r);
    assert_string_equal(heads, "p_detail.tenant_id=,p_truck.tenant_id=");
    sk_free(heads);
    sk_router_free(r);
    c.partition_per_path = 0;
    r = sk_router_new(&c, &err);
    heads = sk_router_part_heads(r);
    assert_string_equal(heads, "p_tenant_id=");
    sk_free(heads);
    sk_router_free(r);
    /* An XML attribute's '@' is no part of the name. */
    c.partition_fields = "detail.@tid";
    assert_string_equal(route(&c, "{\"event_type\":\"x\"}"),
                        "x/p_tid=__HIVE_DEFAULT_PARTITION__");
    c.partition_name = "";
    assert_null(sk_router_new(&c, &err));
    c.partition_name = "a/b";
    assert_null(sk_router_new(&c, &err));
}

static void test_namespace_dots(void **state)
{
    (void)state;
    sk_route_config c = {"ns", NULL, NULL, SK_TIME_UNIT_NONE, NULL, 0, 0, NULL, 0};
    assert_string_equal(route(&c, "{\"ns\":\".\"}"), "%2E");
    assert_string_equal(route(&c, "{\"ns\":\"..\"}"), "%2E%2E");
    assert_string_equal(route(&c, "{\"ns\":\"...\"}"), "...");
    assert_string_equal(route(&c, "{\"ns\":\"../x\"}"), "..%2Fx");
}

static void test_time_units(void **state)
{
    (void)state;
    sk_route_config c = {"none", NULL, "t", SK_TIME_UNIT_HOUR, "", 0, 0, NULL, 0};
    assert_string_equal(route(&c, "{\"t\":\"2021-10-03T23:30:00-02:00\"}"),
                        "_default/year=2021/month=10/day=04/hour=01");
    c.time_unit = SK_TIME_UNIT_YEAR;
    assert_string_equal(route(&c, "{\"t\":1633219200000}"),
                        "_default/year=2021");
    c.time_unit = SK_TIME_UNIT_MONTH;
    c.time_fields = "a,b";
    assert_string_equal(route(&c, "{\"a\":\"nope\",\"b\":\"2020-02-29\"}"),
                        "_default/year=2020/month=02");
}

/* Event time: a key's time bucket and a unit's arrival time. */
static void test_event_time(void **state)
{
    (void)state;
    const char *err = NULL;
    sk_router *r = sk_router_new(&seed, &err);
    assert_non_null(r);
    int64_t a = 0, b = 0;
    const char *k = "login/p_tenant_id=a%2Fp_year=1999"
                    "/p_year=2021/p_month=03/p_day=01";
    assert_int_equal(sk_route_key_bucket(r, k, strlen(k), &a, &b), 1);
    assert_int_equal(a, 1614556800); /* 2021-03-01T00:00:00Z */
    assert_int_equal(b - a, 86400);
    k = "_default/p_tenant_id=x/p_year=__HIVE_DEFAULT_PARTITION__"
        "/p_month=__HIVE_DEFAULT_PARTITION__/p_day=__HIVE_DEFAULT_PARTITION__";
    assert_int_equal(sk_route_key_bucket(r, k, strlen(k), &a, &b), 0);
    sk_router_free(r);
    sk_route_config m = seed;
    m.time_unit = SK_TIME_UNIT_MONTH;
    r = sk_router_new(&m, &err);
    k = "x/p_tenant_id=t/p_year=2021/p_month=12";
    assert_int_equal(sk_route_key_bucket(r, k, strlen(k), &a, &b), 1);
    assert_int_equal(b, 1640995200); /* 2022-01-01 */
    sk_router_free(r);

    assert_int_equal(
        sk_route_unit_arrival(NULL, "in/2021/03/01/05/events-1", &a), 1);
    assert_int_equal(a, 1614556800 + 5 * 3600);
    assert_int_equal(sk_route_unit_arrival(NULL, "2021/03/01/05/x", &a), 1);
    assert_int_equal(
        sk_route_unit_arrival(NULL, "t/year=2021/month=03/day=02/f", &a), 1);
    assert_int_equal(a, 1614556800 + 86400);
    assert_int_equal(sk_route_unit_arrival(NULL, "t/year=2021/month=3/x", &a),
                     0);
    assert_int_equal(sk_route_unit_arrival(NULL, "logs/2021-03-01.json", &a),
                     0);
    assert_int_equal(sk_route_unit_arrival(NULL, "a/2021/13/01/05/x", &a), 0);
    assert_int_equal(sk_route_unit_arrival(NULL, "", &a), 0);
    /* A pattern: its last match counts; the fields it lacks start the
     * period; "" is no pattern. */
    assert_int_equal(
        sk_route_unit_arrival("%Y-%m-%d", "logs/2021-03-01.json", &a), 1);
    assert_int_equal(a, 1614556800);
    assert_int_equal(sk_route_unit_arrival("dt=%Y%m%d/%H",
                                           "dt=20200101/00/dt=20210302/07/x",
                                           &a), 1);
    assert_int_equal(a, 1614556800 + 86400 + 7 * 3600);
    assert_int_equal(sk_route_unit_arrival("%Y", "y/2021/x", &a), 1);
    assert_int_equal(a, 1609459200); /* 2021-01-01 */
    assert_int_equal(sk_route_unit_arrival("100%%/%Y-%m", "100%/2021-03", &a),
                     1);
    assert_int_equal(a, 1614556800);
    assert_int_equal(sk_route_unit_arrival("%Y-%m-%d", "logs/2021-13-01", &a),
                     0);
    assert_int_equal(sk_route_unit_arrival("%Y-%m-%d", "logs/20210301", &a),
                     0);
    assert_int_equal(sk_route_unit_arrival("", "2021/03/01/05/x", &a), 1);
    assert_true(sk_route_arrival_pattern_check("dt=%Y-%m-%d/%H"));
    assert_true(sk_route_arrival_pattern_check("%%%Y"));
    assert_false(sk_route_arrival_pattern_check("%m/%d"));
    assert_false(sk_route_arrival_pattern_check("%Y/%j"));
    assert_false(sk_route_arrival_pattern_check("%Y%"));
}

/* A Firehose date, the slow way: every start from the end back, each
 * date converted by timegm. The offset of the match that counts, or -1. */
static long firehose_reference(const char *id, int64_t *t)
{
    size_t n = strlen(id);
    for (size_t i = n >= 14 ? n - 14 + 1 : 0; i-- > 0;) {
        const char *p = id + i;
        if ((i && p[-1] != '/') || p[4] != '/' || p[7] != '/' ||
            p[10] != '/' || p[13] != '/')
            continue;
        int v[4], ok = 1;
        const int at[4] = {0, 5, 8, 11}, len[4] = {4, 2, 2, 2};
        for (int f = 0; f < 4; f++) {
            v[f] = 0;
            for (int k = 0; k < len[f]; k++) {
                char ch = p[at[f] + k];
                ok &= ch >= '0' && ch <= '9';
                v[f] = v[f] * 10 + (ch - '0');
            }
        }
        /* The ranges the engine takes; a day past the month's end rolls
         * over, as timegm does. */
        if (!ok || v[0] < 1970 || v[0] > 9999 || v[1] < 1 || v[1] > 12 ||
            v[2] < 1 || v[2] > 31 || v[3] > 23)
            continue;
        struct tm tm = {.tm_year = v[0] - 1900, .tm_mon = v[1] - 1,
                        .tm_mday = v[2], .tm_hour = v[3]};
        *t = (int64_t)timegm(&tm);
        return (long)i;
    }
    return -1;
}

/* Keys made of date-like pieces: the Firehose scan finds the same date as
 * the slow way, including keys with several dates, invalid ones, a
 * leading '/' and dates that end the key. */
static void test_firehose_arrival_matches_reference(void **state)
{
    (void)state;
    static const char *const piece[] = {"/", "/", "/", "2021", "1999",
                                        "02", "13", "30", "05", "24",
                                        "x", "a-b", "0", "2020/",
                                        "2021/03/01/05/", "1999/12/31/23",
                                        "2021/02/30/01/", "2021/03/01/24/",
                                        "03/01/"};
    uint32_t rng = 12345;
    char key[256];
    int found = 0;
    for (int round = 0; round < 50000; round++) {
        size_t n = 0;
        int pieces = 1 + (int)((rng = rng * 1103515245u + 12345u) >> 16) % 14;
        for (int k = 0; k < pieces; k++) {
            rng = rng * 1103515245u + 12345u;
            const char *s = piece[(rng >> 16) % (sizeof piece /
                                                sizeof *piece)];
            size_t l = strlen(s);
            memcpy(key + n, s, l);
            n += l;
        }
        key[n] = '\0';
        int64_t want = 0, got = 0;
        long at = firehose_reference(key, &want);
        int has = sk_route_unit_arrival(NULL, key, &got);
        if (has != (at >= 0) || (has && got != want))
            fail_msg("key \"%s\": %d %lld, want %ld %lld", key, has,
                     (long long)got, at, (long long)want);
        found += has;
    }
    assert_true(found > 1000); /* the pieces do make dates */
    int64_t a = 0;
    /* The last "year=" counts, overlapping or not. */
    assert_int_equal(sk_route_unit_arrival(
                         NULL, "year=1999/x/year=2021/month=03", &a), 1);
    assert_int_equal(a, 1614556800);
    assert_int_equal(sk_route_unit_arrival(NULL, "t/year=year=2021", &a), 0);
}

static void test_bad_config(void **state)
{
    (void)state;
    const char *err = NULL;
    sk_route_config c = {"a..b", NULL, NULL, SK_TIME_UNIT_NONE, NULL, 0, 0, NULL, 0};
    assert_null(sk_router_new(&c, &err));
    assert_non_null(err);
    sk_route_config d = {NULL, NULL, NULL, SK_TIME_UNIT_DAY, NULL, 0, 0, NULL, 0};
    assert_null(sk_router_new(&d, &err));
    sk_route_config e = {NULL, NULL, NULL, SK_TIME_UNIT_NONE, "a/b", 0, 0, NULL, 0};
    assert_null(sk_router_new(&e, &err));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_escape),
        cmocka_unit_test(test_fuzz_escape_empty_into_empty_buffer),
        cmocka_unit_test(test_segment_bound),
        cmocka_unit_test(test_seed_layout),
        cmocka_unit_test(test_partition_names),
        cmocka_unit_test(test_namespace_dots),
        cmocka_unit_test(test_time_units),
        cmocka_unit_test(test_event_time),
        cmocka_unit_test(test_firehose_arrival_matches_reference),
        cmocka_unit_test(test_bad_config),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
