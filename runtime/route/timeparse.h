/* Time parsing for time partitions (the contract users depend on).
 *
 * Accepted, and nothing else (never a silent fall back to "now" or 1970):
 *  - RFC 3339 / ISO 8601: YYYY-MM-DD[(T|t| )HH:MM[:SS[.frac]]][Z|z|+-HH:MM|
 *    +-HHMM|+-HH]; no offset means UTC.
 *  - Epoch numbers, as a JSON number lexeme or a string of digits with an
 *    optional fraction, read by magnitude: below 1e11 seconds, below 1e14
 *    milliseconds, below 1e17 microseconds, otherwise nanoseconds.
 * Results are floored to whole seconds since 1970-01-01T00:00:00Z. Years must
 * fall in 0000..9999.
 */
#ifndef SK_TIMEPARSE_H
#define SK_TIMEPARSE_H

#include <stddef.h>
#include <stdint.h>

/* Returns 0 and sets *epoch_s, or -1 if s is not a time. */
int sk_time_parse_iso(const char *s, size_t n, int64_t *epoch_s);
int sk_time_parse_epoch(const char *s, size_t n, int64_t *epoch_s);
/* Tries ISO, then epoch digits. */
int sk_time_parse(const char *s, size_t n, int64_t *epoch_s);

typedef struct sk_civil {
    int year, month, day, hour, minute, second;
} sk_civil;

void sk_time_to_civil(int64_t epoch_s, sk_civil *out);
int64_t sk_days_from_civil(int y, unsigned m, unsigned d);

#endif
