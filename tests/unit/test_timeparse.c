/* Time parsing: every accepted form, offsets across midnight, epoch units by
 * magnitude, and the inputs that must not parse. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "route/timeparse.h"

static int64_t parse(const char *s)
{
    int64_t t = 0;
    assert_int_equal(sk_time_parse(s, strlen(s), &t), 0);
    return t;
}

static void rejects(const char *s)
{
    int64_t t;
    if (sk_time_parse(s, strlen(s), &t) == 0)
        fail_msg("'%s' parsed as %lld but must be rejected", s, (long long)t);
}

/* 2021-10-03T00:00:00Z */
#define D 1633219200LL

static void test_iso_forms(void **state)
{
    (void)state;
    assert_int_equal(parse("2021-10-03"), D);
    assert_int_equal(parse("2021-10-03T04:05"), D + 4 * 3600 + 5 * 60);
    assert_int_equal(parse("2021-10-03T04:05:06"), D + 14706);
    assert_int_equal(parse("2021-10-03 04:05:06"), D + 14706);
    assert_int_equal(parse("2021-10-03t04:05:06z"), D + 14706);
    assert_int_equal(parse("2021-10-03T04:05:06.123456789Z"), D + 14706);
    assert_int_equal(parse("2021-10-03T04:05:06,5Z"), D + 14706);
    assert_int_equal(parse("2021-10-03T04:05:06Z"), D + 14706);
    assert_int_equal(parse("2021-10-03T04:05:06+02:00"), D + 14706 - 7200);
    assert_int_equal(parse("2021-10-03T04:05:06+0200"), D + 14706 - 7200);
    assert_int_equal(parse("2021-10-03T04:05:06+02"), D + 14706 - 7200);
    assert_int_equal(parse("2021-10-03T04:05:06-05:30"),
                     D + 14706 + 5 * 3600 + 1800);
    assert_int_equal(parse("1970-01-01T00:00:00Z"), 0);
    assert_int_equal(parse("2020-02-29"), 1582934400LL);
}

static void test_offsets_cross_midnight(void **state)
{
    (void)state;
    sk_civil c;
    /* 23:30 at -02:00 is 01:30 the next day in UTC. */
    sk_time_to_civil(parse("2021-10-03T23:30:00-02:00"), &c);
    assert_int_equal(c.day, 4);
    assert_int_equal(c.hour, 1);
    /* 00:30 at +01:00 is 23:30 the previous day, and month and year roll. */
    sk_time_to_civil(parse("2022-01-01T00:30:00+01:00"), &c);
    assert_int_equal(c.year, 2021);
    assert_int_equal(c.month, 12);
    assert_int_equal(c.day, 31);
    assert_int_equal(c.hour, 23);
}

static void test_epoch_by_magnitude(void **state)
{
    (void)state;
    assert_int_equal(parse("1633219200"), D);          /* seconds */
    assert_int_equal(parse("1633219200.75"), D);       /* fraction */
    assert_int_equal(parse("1633219200123"), D);       /* ms */
    assert_int_equal(parse("1633219200123456"), D);    /* us */
    assert_int_equal(parse("1633219200123456789"), D); /* ns */
    assert_int_equal(parse("99999999999"), 99999999999LL); /* < 1e11: s */
    assert_int_equal(parse("100000000000"), 100000000LL);  /* 1e11: ms */
    assert_int_equal(parse("1.6332192e9"), D);
    assert_int_equal(parse("0"), 0);
    assert_int_equal(parse("-1"), -1);
    assert_int_equal(parse("-0.5"), -1); /* floored */
    assert_int_equal(parse("-1633219200001"), -1633219201LL); /* ms, floored */
    /* 19 digits take the fast path; 20 fit in 64 bits only up to 2^64-1. */
    assert_int_equal(parse("9999999999999999999"), 9999999999LL);
    assert_int_equal(parse("18446744073709551615"), 18446744073LL);
    assert_int_equal(parse("00000000001633219200"), D);
    rejects("18446744073709551616");
    int64_t t;
    assert_int_equal(sk_time_parse_epoch("1633219200", 10, &t), 0);
    assert_int_equal(t, D);
}

static void test_rejects(void **state)
{
    (void)state;
    rejects("");
    rejects("now");
    rejects("2021-13-01");
    rejects("2021-02-29");
    rejects("2021-10-32");
    rejects("2021-10-03T24:00:00Z");
    rejects("2021-10-03T04:60Z");
    rejects("2021-10-03T04:05:06+25:00");
    rejects("2021-10-03T04");
    rejects("2021-10-03Tfoo");
    rejects("21-10-03");
    rejects("2021/10/03");
    rejects("2021-10-03T04:05:06Zjunk");
    rejects("12abc");
    rejects("1.");
    rejects("99999999999999999999999");
}

static void test_civil_roundtrip(void **state)
{
    (void)state;
    /* Every day from 1900 to 2100 maps back to itself. */
    for (int64_t d = -25567; d < 47482; d++) {
        sk_civil c;
        sk_time_to_civil(d * 86400, &c);
        assert_int_equal(sk_days_from_civil(c.year, (unsigned)c.month,
                                            (unsigned)c.day), d);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_iso_forms),
        cmocka_unit_test(test_offsets_cross_midnight),
        cmocka_unit_test(test_epoch_by_magnitude),
        cmocka_unit_test(test_rejects),
        cmocka_unit_test(test_civil_roundtrip),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
