/* Where a JSON container ends: see jsonsplit.h. */
#include "format/jsonsplit.h"

#include "format/jsonmask.h"

/* Where depth reaches 0 in a block whose brackets are open and close
 * (outside strings), from *depth before it: the bit's index + 1, or 0
 * (then *depth is the depth after the block). */
static unsigned close_in(uint64_t open, uint64_t close, long *depth)
{
    long d = *depth;
    if (d > (long)__builtin_popcountll(close)) { /* cannot reach 0 here */
        *depth = d + __builtin_popcountll(open) - __builtin_popcountll(close);
        return 0;
    }
    for (uint64_t br = open | close; br; br &= br - 1) {
        unsigned i = (unsigned)__builtin_ctzll(br);
        d += open >> i & 1 ? 1 : -1;
        if (d == 0)
            return i + 1;
    }
    *depth = d;
    return 0;
}

size_t sk_jsplit_end(const uint8_t *buf, size_t len, size_t start)
{
    sk_jmask_carry c = {0, 0};
    long depth = 0;
    for (size_t at = start; at < len; at += SK_JMASK_BLOCK) {
        sk_jmask m;
        if (len - at >= SK_JMASK_BLOCK)
            sk_jmask_block(&c, buf + at, &m);
        else
            sk_jmask_tail(&c, buf + at, len - at, &m);
        unsigned end = close_in(m.open, m.close, &depth);
        if (end)
            return at + end;
    }
    return 0;
}
