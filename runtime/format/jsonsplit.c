/* Where a JSON container ends: see jsonsplit.h. */
#include "format/jsonsplit.h"

/* Where depth reaches 0 in a block whose brackets are open and close
 * (outside strings), from *depth before it: the bit's index + 1, or 0
 * (then *depth is the depth after the block). A block with no close
 * cannot end the record: its opens are only counted. (Bits are walked,
 * not counted with popcount, which the portable build makes a call.) */
static unsigned close_in(uint64_t open, uint64_t close, long *depth)
{
    long d = *depth;
    uint64_t br = close ? open | close : open;
    for (; br; br &= br - 1) {
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

void sk_jsplit_init(sk_jsplitter *s, const uint8_t *buf, size_t len,
                    size_t from)
{
    *s = (sk_jsplitter){.buf = buf, .len = len, .at = from, .bit = 64};
}

/* The next block's masks; 0 when the buffer is done. */
static int next_block(sk_jsplitter *s)
{
    if (s->started)
        s->at += SK_JMASK_BLOCK;
    s->started = 1;
    if (s->at >= s->len)
        return 0;
    if (s->len - s->at >= SK_JMASK_BLOCK)
        sk_jmask_block(&s->carry, s->buf + s->at, &s->m);
    else
        sk_jmask_tail(&s->carry, s->buf + s->at, s->len - s->at, &s->m);
    s->bit = 0;
    return 1;
}

/* Between records: where the next one starts, if it is an object. */
static int record_start(sk_jsplitter *s, uint64_t live, size_t *start)
{
    uint64_t tok = ~s->m.space & live;
    if (!tok) {
        s->bit = 64;
        return 0;
    }
    unsigned i = (unsigned)__builtin_ctzll(tok);
    *start = s->start = s->at + i;
    if (!(s->m.open >> i & 1) || s->buf[s->at + i] != '{')
        return SK_JSPLIT_OTHER;
    s->depth = 1;
    s->bit = i + 1;
    return 0;
}

int sk_jsplit_next(sk_jsplitter *s, size_t *start, size_t *end)
{
    for (;;) {
        if (s->bit >= SK_JMASK_BLOCK && !next_block(s)) {
            *start = s->start;
            return s->depth ? SK_JSPLIT_CUT : SK_JSPLIT_END;
        }
        uint64_t live = ~0ull << s->bit;
        if (!s->depth) {
            int rc = record_start(s, live, start);
            if (rc)
                return rc;
            continue;
        }
        unsigned e = close_in(s->m.open & live, s->m.close & live,
                              &s->depth);
        if (!e) {
            s->bit = 64;
            continue;
        }
        s->depth = 0;
        s->bit = e;
        *start = s->start;
        *end = s->at + e;
        return SK_JSPLIT_RECORD;
    }
}
