#include "route/timeparse.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Howard Hinnant's days_from_civil / civil_from_days: exact for the
 * proleptic Gregorian calendar, no tables, no libc time zone state. */
int64_t sk_days_from_civil(int y, unsigned m, unsigned d)
{
    y -= m <= 2;
    const int64_t era = (y >= 0 ? y : y - 399) / 400;
    const unsigned yoe = (unsigned)(y - era * 400);
    const unsigned doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
    const unsigned doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    return era * 146097 + (int64_t)doe - 719468;
}

void sk_time_to_civil(int64_t t, sk_civil *out)
{
    int64_t days = t / 86400;
    int64_t secs = t % 86400;
    if (secs < 0) {
        secs += 86400;
        days -= 1;
    }
    days += 719468;
    const int64_t era = (days >= 0 ? days : days - 146096) / 146097;
    const unsigned doe = (unsigned)(days - era * 146097);
    const unsigned yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
    const int64_t y = (int64_t)yoe + era * 400;
    const unsigned doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    const unsigned mp = (5 * doy + 2) / 153;
    const unsigned d = doy - (153 * mp + 2) / 5 + 1;
    const unsigned m = mp < 10 ? mp + 3 : mp - 9;
    out->year = (int)(y + (m <= 2));
    out->month = (int)m;
    out->day = (int)d;
    out->hour = (int)(secs / 3600);
    out->minute = (int)(secs / 60 % 60);
    out->second = (int)(secs % 60);
}

static int digits(const char *s, size_t n, size_t at, size_t count, int *out)
{
    if (at + count > n)
        return -1;
    int v = 0;
    for (size_t i = 0; i < count; i++) {
        char c = s[at + i];
        if (c < '0' || c > '9')
            return -1;
        v = v * 10 + (c - '0');
    }
    *out = v;
    return 0;
}

static int days_in_month(int y, int m)
{
    static const int dm[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    if (m == 2 && ((y % 4 == 0 && y % 100 != 0) || y % 400 == 0))
        return 29;
    return dm[m - 1];
}

int sk_time_parse_iso(const char *s, size_t n, int64_t *epoch_s)
{
    int y, mo, d, h = 0, mi = 0, se = 0;
    if (digits(s, n, 0, 4, &y) || n < 10 || s[4] != '-' ||
        digits(s, n, 5, 2, &mo) || s[7] != '-' || digits(s, n, 8, 2, &d))
        return -1;
    if (mo < 1 || mo > 12 || d < 1 || d > days_in_month(y, mo))
        return -1;
    size_t i = 10;
    if (i < n && (s[i] == 'T' || s[i] == 't' || s[i] == ' ')) {
        i++;
        if (digits(s, n, i, 2, &h) || i + 2 >= n || s[i + 2] != ':' ||
            digits(s, n, i + 3, 2, &mi))
            return -1;
        i += 5;
        if (i < n && s[i] == ':') {
            if (digits(s, n, i + 1, 2, &se))
                return -1;
            i += 3;
            if (i < n && (s[i] == '.' || s[i] == ',')) {
                i++;
                size_t f = i;
                while (i < n && s[i] >= '0' && s[i] <= '9')
                    i++;
                if (i == f)
                    return -1;
            }
        }
        if (h > 23 || mi > 59 || se > 60)
            return -1;
    }
    int64_t off = 0;
    if (i < n) {
        if (s[i] == 'Z' || s[i] == 'z') {
            i++;
        } else if (s[i] == '+' || s[i] == '-') {
            int sign = s[i] == '-' ? -1 : 1;
            int oh, om = 0;
            if (digits(s, n, i + 1, 2, &oh))
                return -1;
            i += 3;
            if (i < n && s[i] == ':') {
                if (digits(s, n, i + 1, 2, &om))
                    return -1;
                i += 3;
            } else if (i < n) {
                if (digits(s, n, i, 2, &om))
                    return -1;
                i += 2;
            }
            if (oh > 23 || om > 59)
                return -1;
            off = sign * (oh * 3600 + om * 60);
        }
    }
    if (i != n)
        return -1;
    int64_t days = sk_days_from_civil(y, (unsigned)mo, (unsigned)d);
    *epoch_s = days * 86400 + h * 3600 + mi * 60 + se - off;
    return 0;
}

/* A decimal number's parts: its sign, its integer part, whether a
 * fraction and an exponent follow. */
typedef struct num_shape {
    int neg, has_frac, has_exp;
    uint64_t ip;
} num_shape;

/* Digits from *i; how many. */
static size_t digit_run(const char *s, size_t n, size_t *i)
{
    size_t from = *i;
    while (*i < n && s[*i] >= '0' && s[*i] <= '9')
        (*i)++;
    return *i - from;
}

/* s[0..n) as a number into *x. 0, or -1 when s is no number or its
 * integer part needs more than 64 bits. */
static int number_shape(const char *s, size_t n, num_shape *x)
{
    x->neg = n > 0 && s[0] == '-';
    size_t i = (size_t)x->neg;
    size_t int_start = i;
    size_t nd = digit_run(s, n, &i);
    if (!nd)
        return -1;
    /* 19 digits cannot overflow; more are checked. */
    x->ip = 0;
    for (size_t k = int_start; k < i; k++) {
        unsigned dgt = (unsigned)(s[k] - '0');
        if (nd > 19 && x->ip > (UINT64_MAX - dgt) / 10)
            return -1;
        x->ip = x->ip * 10 + dgt;
    }
    x->has_frac = i < n && s[i] == '.';
    if (x->has_frac && (i++, !digit_run(s, n, &i)))
        return -1;
    x->has_exp = i < n && (s[i] == 'e' || s[i] == 'E');
    if (x->has_exp) {
        i++;
        if (i < n && (s[i] == '+' || s[i] == '-'))
            i++;
        if (!digit_run(s, n, &i))
            return -1;
    }
    return i == n ? 0 : -1;
}

/* Scientific notation: precision beyond a second is irrelevant. */
static int epoch_scientific(const char *s, size_t n, int64_t *epoch_s)
{
    char tmp[64];
    if (n >= sizeof tmp)
        return -1;
    memcpy(tmp, s, n);
    tmp[n] = '\0';
    double v = strtod(tmp, NULL);
    double mag = fabs(v);
    double div = mag < 1e11 ? 1 : mag < 1e14 ? 1e3 : mag < 1e17 ? 1e6 : 1e9;
    double secs = floor(v / div);
    if (!(secs > -1e13 && secs < 1e13))
        return -1;
    *epoch_s = (int64_t)secs;
    return 0;
}

int sk_time_parse_epoch(const char *s, size_t n, int64_t *epoch_s)
{
    num_shape x;
    if (number_shape(s, n, &x))
        return -1;
    if (x.has_exp)
        return epoch_scientific(s, n, epoch_s);
    /* The integer part decides the unit; a fraction only matters for
     * flooring negative values. Constant divisors: the compiler turns each
     * into a multiply. */
    uint64_t ip = x.ip, q, r;
    if (ip < 100000000000ULL) {
        q = ip;
        r = 0;
    } else if (ip < 100000000000000ULL) {
        q = ip / 1000;
        r = ip % 1000;
    } else if (ip < 100000000000000000ULL) {
        q = ip / 1000000;
        r = ip % 1000000;
    } else {
        q = ip / 1000000000;
        r = ip % 1000000000;
    }
    int inexact = r != 0 || x.has_frac;
    if (q > (uint64_t)INT64_MAX / 2)
        return -1;
    int64_t v = (int64_t)q;
    if (x.neg)
        v = -v - (inexact ? 1 : 0);
    *epoch_s = v;
    return 0;
}

int sk_time_parse(const char *s, size_t n, int64_t *epoch_s)
{
    if (sk_time_parse_iso(s, n, epoch_s) == 0)
        return 0;
    return sk_time_parse_epoch(s, n, epoch_s);
}
