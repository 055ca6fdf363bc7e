/* Option values as a config writes them: sizes, whole numbers, booleans.
 * Kept apart from the loader so that the SDK's testkit fills a plugin's
 * options exactly as the engine does. */
#ifndef SK_OPTVAL_H
#define SK_OPTVAL_H

#include <stdint.h>

/* Parse s into *out (bytes). k, K, KB, M, MB, G, GB are powers of 1000;
 * KiB, MiB, GiB, TiB powers of 1024. Returns 0, or -1 when s is not a
 * size or overflows. */
int sk_parse_size(const char *s, int64_t *out);

/* An INT option: a size as above, or any whole number (negative too).
 * Returns 0, or -1. */
int sk_parse_int_value(const char *s, int64_t *out);

/* A BOOL option: true/yes/on/1 or false/no/off/0. Returns 0, or -1. */
int sk_parse_bool(const char *s, int *out);

#endif
