/* What the peek benches' corpora share: one deterministic random stream,
 * the event types and tenants, the timestamp forms, and the median of a
 * run's passes. Each bench (bench_peek.c, bench_csv.c, bench_xml.c) is one
 * translation unit, so the state below is its own. */
#ifndef SK_BENCH_GEN_H
#define SK_BENCH_GEN_H

#include <stdint.h>
#include <stdio.h>

#include "route/timeparse.h"

static uint64_t bench_rng = 0x2545F4914F6CDD1DULL;

/* xorshift64: the same stream on every run. */
static inline uint64_t rnd(void)
{
    bench_rng ^= bench_rng << 13;
    bench_rng ^= bench_rng >> 7;
    bench_rng ^= bench_rng << 17;
    return bench_rng;
}

static const char *const types[] = {"login", "logout", "purchase",
                                    "page_view", "truck_ping", "error"};
static const char *const tenants[] = {"acme", "globex", "initech", "umbrella",
                                      "hooli", "stark", "wayne", "tyrell"};

/* A random second of 2021-10-03 .. 07 in one of three forms, at random:
 * RFC 3339 (in double quotes when quoted, for JSON), epoch seconds or
 * epoch milliseconds. */
static inline void bench_time(char *ts, size_t cap, int quoted)
{
    long sec = 1633219200L + (long)(rnd() % (5 * 86400));
    switch (rnd() % 3) {
    case 0: {
        sk_civil c;
        sk_time_to_civil(sec, &c);
        snprintf(ts, cap, "%s%04d-%02d-%02dT%02d:%02d:%02dZ%s",
                 quoted ? "\"" : "", c.year, c.month, c.day, c.hour,
                 c.minute, c.second, quoted ? "\"" : "");
        break;
    }
    case 1: snprintf(ts, cap, "%ld", sec); break;
    default: snprintf(ts, cap, "%ld%03d", sec, (int)(rnd() % 1000));
    }
}

/* The median of v[0..n), which it sorts. */
static inline double bench_median(double *v, int n)
{
    for (int i = 0; i < n; i++)
        for (int k = i + 1; k < n; k++)
            if (v[k] < v[i]) {
                double t = v[i];
                v[i] = v[k];
                v[k] = t;
            }
    return v[n / 2];
}

#endif
