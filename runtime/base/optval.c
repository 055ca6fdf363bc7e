#include "base/optval.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

int sk_parse_size(const char *s, int64_t *out)
{
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (end == s || errno || v < 0)
        return -1;
    while (*end == ' ')
        end++;
    long long mul = 1;
    if (*end) {
        static const struct {
            const char *suffix;
            long long mul;
        } units[] = {{"k", 1000LL},     {"K", 1000LL},
                     {"KB", 1000LL},    {"KiB", 1LL << 10},
                     {"M", 1000000LL},  {"MB", 1000000LL},
                     {"MiB", 1LL << 20}, {"G", 1000000000LL},
                     {"GB", 1000000000LL}, {"GiB", 1LL << 30},
                     {"TiB", 1LL << 40}};
        mul = 0;
        for (size_t i = 0; i < sizeof units / sizeof units[0]; i++)
            if (strcmp(end, units[i].suffix) == 0)
                mul = units[i].mul;
        if (!mul)
            return -1;
    }
    if (v > INT64_MAX / mul)
        return -1;
    *out = v * mul;
    return 0;
}

int sk_parse_int_value(const char *s, int64_t *out)
{
    if (sk_parse_size(s, out) == 0)
        return 0;
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (end == s || *end || errno)
        return -1;
    *out = v;
    return 0;
}

int sk_parse_bool(const char *s, int *out)
{
    static const char *const yes[] = {"true", "yes", "on", "1"};
    static const char *const no[] = {"false", "no", "off", "0"};
    for (size_t i = 0; i < 4; i++) {
        if (strcmp(s, yes[i]) == 0) {
            *out = 1;
            return 0;
        }
        if (strcmp(s, no[i]) == 0) {
            *out = 0;
            return 0;
        }
    }
    return -1;
}
