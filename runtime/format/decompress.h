/* Streaming input decompression, chosen by magic bytes, never by file name
 * (Firehose objects often have no extension).
 *
 *   1f 8b        gzip (every member of a multi-member file is read)
 *   28 b5 2f fd  zstd (every frame)
 *   anything else: passed through unchanged
 */
#ifndef SK_DECOMPRESS_H
#define SK_DECOMPRESS_H

#include <stddef.h>
#include <stdint.h>

typedef enum sk_comp {
    SK_COMP_NONE = 0,
    SK_COMP_GZIP = 1,
    SK_COMP_ZSTD = 2
} sk_comp;

/* Detect from the first bytes of a unit. Needs 4 bytes unless the unit is
 * shorter (pass all of it then). */
sk_comp sk_comp_detect(const uint8_t *p, size_t n);
const char *sk_comp_name(sk_comp c);

typedef struct sk_decomp sk_decomp;

/* Caller owns the result: sk_decomp_free(). NULL on allocation failure. */
sk_decomp *sk_decomp_new(sk_comp kind);
void sk_decomp_free(sk_decomp *d);

/* Decompress from in into out. Sets *consumed and *produced. Returns
 * SKIPPR_OK, or SKIPPR_CORRUPT with *why set to a static reason. Call with
 * in_len == 0 and at_eof set to learn whether the stream ended cleanly:
 * SKIPPR_CORRUPT "truncated ... stream" if not. */
int sk_decomp_run(sk_decomp *d, const uint8_t *in, size_t in_len,
                  size_t *consumed, uint8_t *out, size_t out_cap,
                  size_t *produced, int at_eof, const char **why);

#endif
