/* libFuzzer target: the time parser (timeparse.c).
 *
 * Checked on every input that parses: the civil date of the result lies in
 * the years the contract allows (an offset may move it one day past
 * either end), converting back gives the same second, and the result
 * written as YYYY-MM-DDTHH:MM:SSZ parses to itself; sk_time_parse agrees
 * with the ISO or the epoch reading.
 */
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "route/timeparse.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *s = (const char *)data;
    int64_t t = 0, iso = 0, ep = 0;
    int ok = sk_time_parse(s, size, &t) == 0;
    int ok_iso = sk_time_parse_iso(s, size, &iso) == 0;
    int ok_ep = sk_time_parse_epoch(s, size, &ep) == 0;
    if (ok != (ok_iso || ok_ep))
        abort();
    if (!ok)
        return 0;
    if (t != (ok_iso ? iso : ep))
        abort();
    sk_civil c;
    sk_time_to_civil(t, &c);
    if (c.month < 1 || c.month > 12 || c.day < 1 || c.day > 31 ||
        c.hour < 0 || c.hour > 23 || c.minute < 0 || c.minute > 59 ||
        c.second < 0 || c.second > 59)
        abort();
    int64_t back = sk_days_from_civil(c.year, (unsigned)c.month,
                                      (unsigned)c.day) * 86400 +
                   c.hour * 3600 + c.minute * 60 + c.second;
    if (back != t)
        abort();
    if (ok_iso && (c.year < -1 || c.year > 10000))
        abort();
    if (c.year >= 0 && c.year <= 9999) {
        char buf[32];
        int n = snprintf(buf, sizeof buf, "%04d-%02d-%02dT%02d:%02d:%02dZ",
                         c.year, c.month, c.day, c.hour, c.minute, c.second);
        int64_t again = 0;
        if (n < 0 || sk_time_parse_iso(buf, (size_t)n, &again) != 0 ||
            again != t)
            abort();
    }
    return 0;
}
