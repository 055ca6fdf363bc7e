/* Event time for sealing: the time bucket a partition key names (its
 * {prefix}year=/month=/day=/hour= segments, route.c writes them) and the
 * arrival time a source unit's key names (a Firehose YYYY/MM/DD/HH/
 * prefix or Hive year=/month=/day=/hour= folders, or a pattern given as
 * arrival_key_pattern). The pipeline seals a
 * slice once every unit that could still hold its records is done
 * (docs/EXACTLY_ONCE.md, "Event-time sealing").
 *
 * Thread: any; no state.
 */
#include "route/route.h"

#include <string.h>

#include "route/timeparse.h"

/* Digits at p..p+n as a number, or -1. */
static int digits(const char *p, const char *end, size_t n)
{
    if ((size_t)(end - p) < n)
        return -1;
    int v = 0;
    for (size_t i = 0; i < n; i++) {
        if (p[i] < '0' || p[i] > '9')
            return -1;
        v = v * 10 + (p[i] - '0');
    }
    return v;
}

/* Seconds since the epoch of y-m-d h:00, or -1 when out of range. */
static int64_t civil_time(int y, int m, int d, int h)
{
    if (y < 1970 || y > 9999 || m < 1 || m > 12 || d < 1 || d > 31 ||
        h < 0 || h > 23)
        return -1;
    return sk_days_from_civil(y, (unsigned)m, (unsigned)d) * 86400 +
           (int64_t)h * 3600;
}

/* The last occurrence of needle in [p, end), or NULL. */
static const char *last_of(const char *p, const char *end, const char *needle)
{
    size_t nl = strlen(needle);
    if (nl == 0)
        return end;
    const char *last = NULL;
    for (const char *q = p; (q = memmem(q, (size_t)(end - q), needle, nl));
         q++)
        last = q;
    return last;
}

int sk_route_key_bucket(const sk_router *r, const char *key, size_t len,
                        int64_t *start, int64_t *end)
{
    sk_time_unit unit = sk_router_time_unit(r);
    if (unit == SK_TIME_UNIT_NONE)
        return 0;
    int v[4] = {0, 1, 1, 0};
    const char *p = key, *kend = key + len;
    for (int u = 0; u < (int)unit; u++) {
        const char *h = sk_router_time_head(r, u);
        const char *at = last_of(p, kend, h);
        if (!at)
            return 0;
        at += strlen(h);
        if ((v[u] = digits(at, kend, u == 0 ? 4 : 2)) < 0)
            return 0; /* the default partition: no time */
        p = at;
    }
    *start = civil_time(v[0], v[1], v[2], v[3]);
    if (*start < 0)
        return 0;
    switch (unit) {
    case SK_TIME_UNIT_YEAR:
        *end = civil_time(v[0] + 1, 1, 1, 0);
        break;
    case SK_TIME_UNIT_MONTH:
        *end = v[1] == 12 ? civil_time(v[0] + 1, 1, 1, 0)
                          : civil_time(v[0], v[1] + 1, 1, 0);
        break;
    case SK_TIME_UNIT_DAY:
        *end = *start + 86400;
        break;
    default:
        *end = *start + 3600;
        break;
    }
    return *end > *start;
}

/* Hive folders: year=YYYY/month=MM[/day=DD[/hour=HH]], anywhere. */
static int hive_arrival(const char *id, const char *end, int64_t *t)
{
    const char *y = last_of(id, end, "year=");
    if (!y || (y != id && y[-1] != '/'))
        return 0;
    int v[4] = {digits(y + 5, end, 4), 1, 1, 0};
    if (v[0] < 0)
        return 0;
    static const char *const next[] = {"/month=", "/day=", "/hour="};
    const char *p = y + 9;
    for (int u = 0; u < 3; u++) {
        size_t nl = strlen(next[u]);
        if ((size_t)(end - p) < nl + 2 || memcmp(p, next[u], nl) != 0)
            break;
        v[u + 1] = digits(p + nl, end, 2);
        p += nl + 2;
    }
    if (v[0] < 0 || v[1] < 0 || v[2] < 0 || v[3] < 0)
        return 0;
    *t = civil_time(v[0], v[1], v[2], v[3]);
    return *t >= 0;
}

/* Firehose: /YYYY/MM/DD/HH/ (or at the start of the key). */
static int firehose_arrival(const char *id, const char *end, int64_t *t)
{
    if (end - id < 14)
        return 0;
    /* From the last place a match can start back to the first: the key's
     * start and each place after a '/'. */
    const char *scan = end - 14; /* candidates are at or before it */
    for (int at_start = 0; !at_start;) {
        const char *slash = scan > id ? memrchr(id, '/', (size_t)(scan - id))
                                       : NULL;
        const char *p = slash ? slash + 1 : id;
        at_start = !slash;
        scan = slash;
        if (p[4] != '/' || p[7] != '/' || p[10] != '/' || p[13] != '/')
            continue;
        int y = digits(p, end, 4), m = digits(p + 5, end, 2),
            d = digits(p + 8, end, 2), h = digits(p + 11, end, 2);
        if (y < 0 || m < 0 || d < 0 || h < 0)
            continue;
        *t = civil_time(y, m, d, h);
        if (*t >= 0)
            return 1;
    }
    return 0;
}

/* pattern matched at p: 1 and the fields in v (year, month, day, hour),
 * else 0. */
static int pattern_at(const char *pattern, const char *p, const char *end,
                      int v[4])
{
    for (const char *q = pattern; *q; q++) {
        if (*q == '%' && q[1] && q[1] != '%') {
            const char *f = strchr("YmdH", q[1]);
            if (!f)
                return 0; /* not a checked pattern */
            int k = (int)(f - "YmdH");
            int n = k == 0 ? 4 : 2;
            if ((v[k] = digits(p, end, (size_t)n)) < 0)
                return 0;
            p += n;
            q++;
            continue;
        }
        if (*q == '%')
            q++; /* %% is a percent sign */
        if (p >= end || *p != *q)
            return 0;
        p++;
    }
    return 1;
}

int sk_route_arrival_pattern_check(const char *pattern)
{
    int year = 0;
    for (const char *q = pattern; *q; q++) {
        if (*q != '%')
            continue;
        if (!q[1] || !strchr("YmdH%", q[1]))
            return 0;
        year |= q[1] == 'Y';
        q++;
    }
    return year;
}

/* The last place in [id, end) where pattern matches (a checked one). */
static int pattern_arrival(const char *pattern, const char *id,
                           const char *end, int64_t *t)
{
    for (size_t i = (size_t)(end - id) + 1; i-- > 0;) {
        int v[4] = {-1, 1, 1, 0};
        if (!pattern_at(pattern, id + i, end, v))
            continue;
        *t = civil_time(v[0], v[1], v[2], v[3]);
        if (*t >= 0)
            return 1;
    }
    return 0;
}

int sk_route_unit_arrival(const char *pattern, const char *id, int64_t *t)
{
    const char *end = id + strlen(id);
    if (pattern && *pattern)
        return pattern_arrival(pattern, id, end, t);
    return hive_arrival(id, end, t) || firehose_arrival(id, end, t);
}
