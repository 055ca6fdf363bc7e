/* Sizes in config values: "64MiB", "1GiB", "512k" or plain integers. Kept
 * apart from config.c so that the SDK's testkit fills options exactly as
 * the engine does. */
#ifndef SK_SIZE_H
#define SK_SIZE_H

#include <stdint.h>

/* Parse s into *out (bytes). k, K, KB, M, MB, G, GB are powers of 1000;
 * KiB, MiB, GiB, TiB powers of 1024. Returns 0, or -1 when s is not a
 * size or overflows. */
int sk_parse_size(const char *s, int64_t *out);

#endif
