/* LEB128 varints and zigzag for signed values: the ledger's run files
 * (state/ledger_run.h) are written in them. Header only. */
#ifndef SK_BASE_VARINT_H
#define SK_BASE_VARINT_H

#include <stddef.h>
#include <stdint.h>

#include "base/buf.h"

/* Appends v as a LEB128 varint (at most 10 bytes) to b, unless *rc is set
 * already; sets *rc when b cannot grow. */
static inline void sk_put_varint(skippr_buf *b, uint64_t v, int *rc)
{
    uint8_t t[10];
    size_t n = 0;
    do {
        t[n++] = (uint8_t)(v & 0x7F) | (v >= 0x80 ? 0x80 : 0);
        v >>= 7;
    } while (v);
    if (!*rc)
        *rc = skippr_buf_append(b, t, n);
}

/* Reads a varint at p[*pos], below end, into *v; *pos moves past it. -1
 * when it is cut off or longer than 64 bits. */
static inline int sk_get_varint(const uint8_t *p, size_t end, size_t *pos,
                                uint64_t *v)
{
    uint64_t x = 0;
    for (unsigned shift = 0; shift < 70; shift += 7) {
        if (*pos >= end)
            return -1;
        uint8_t c = p[(*pos)++];
        if (shift == 63 && c > 1)
            return -1;
        x |= (uint64_t)(c & 0x7F) << shift;
        if (!(c & 0x80)) {
            *v = x;
            return 0;
        }
    }
    return -1;
}

/* Signed values as zigzag varints (small magnitudes stay short). */
static inline uint64_t sk_zigzag(int64_t v)
{
    return v < 0 ? ~((uint64_t)v << 1) : (uint64_t)v << 1;
}

static inline int64_t sk_unzigzag(uint64_t u)
{
    return u & 1 ? (int64_t)~(u >> 1) : (int64_t)(u >> 1);
}

#endif
