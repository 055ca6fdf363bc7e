/* Private to the JSON code of format/ (json.c, jsonspec.c, jsontext.c):
 * the small helpers the scanner's files share. Nothing outside
 * format/ includes it; json.h is the contract.
 */
#ifndef SK_FORMAT_JSON_IMPL_H
#define SK_FORMAT_JSON_IMPL_H

#include <stdint.h>
#include <string.h>

#include "format/json.h"
#include "format/jsonhex.h"
#include "format/jsonspec_impl.h"
#if defined(__SSE2__)
#include <emmintrin.h>
#endif


#define ONES 0x0101010101010101ULL
#define HIGHS 0x8080808080808080ULL

/* The skim mode's block classifier: 64 bytes at a time, where strings
 * and brackets are (SSE2 where the compiler has it, else SWAR). */
/* Set bits of a sparse mask (brackets are a few per 64 bytes): cheaper
 * than a popcount call where the target has no popcnt instruction. */
static inline int sparse_count(uint64_t v)
{
    int n = 0;
    while (v) {
        v &= v - 1;
        n++;
    }
    return n;
}

/* Prefix XOR: bit i becomes the XOR of bits 0..i. */
static inline uint64_t prefix_xor(uint64_t v)
{
    v ^= v << 1;
    v ^= v << 2;
    v ^= v << 4;
    v ^= v << 8;
    v ^= v << 16;
    v ^= v << 32;
    return v;
}

/* 64 bytes (fewer at the end, padded with spaces) as bit masks. */
typedef struct block_masks {
    uint64_t quote, bslash, open, close;
} block_masks;

static inline void classify64(const uint8_t *p, block_masks *m)
{
#if defined(__SSE2__)
    const __m128i q = _mm_set1_epi8('"'), b = _mm_set1_epi8('\\');
    const __m128i o1 = _mm_set1_epi8('{'), o2 = _mm_set1_epi8('[');
    const __m128i c1 = _mm_set1_epi8('}'), c2 = _mm_set1_epi8(']');
    uint64_t mq = 0, mb = 0, mo = 0, mc = 0;
    for (int i = 0; i < 4; i++) {
        __m128i v = _mm_loadu_si128((const __m128i *)(const void *)(p + 16 * i));
        int sh = 16 * i;
        mq |= (uint64_t)(unsigned)_mm_movemask_epi8(_mm_cmpeq_epi8(v, q)) << sh;
        mb |= (uint64_t)(unsigned)_mm_movemask_epi8(_mm_cmpeq_epi8(v, b)) << sh;
        mo |= (uint64_t)(unsigned)_mm_movemask_epi8(
                  _mm_or_si128(_mm_cmpeq_epi8(v, o1), _mm_cmpeq_epi8(v, o2)))
              << sh;
        mc |= (uint64_t)(unsigned)_mm_movemask_epi8(
                  _mm_or_si128(_mm_cmpeq_epi8(v, c1), _mm_cmpeq_epi8(v, c2)))
              << sh;
    }
    m->quote = mq;
    m->bslash = mb;
    m->open = mo;
    m->close = mc;
#else
    memset(m, 0, sizeof *m);
    for (int i = 0; i < 64; i++) {
        uint64_t bit = 1ULL << i;
        switch (p[i]) {
        case '"': m->quote |= bit; break;
        case '\\': m->bslash |= bit; break;
        case '{': case '[': m->open |= bit; break;
        case '}': case ']': m->close |= bit; break;
        default: break;
        }
    }
#endif
}

/* ---- the scanner's state (json.c), which jsonframe.c starts ---------- */

/* Skim mode: where the record's scan stands once its groups settle. */
typedef enum skim_state {
    SKIM_READING = 0, /* some group still wants a value */
    SKIM_SETTLED,     /* all settled: skip the rest of the record */
    SKIM_SKIPPED      /* the rest was skipped: unwind to the record's end */
} skim_state;

typedef struct scan {
    const uint8_t *base;
    const uint8_t *p;
    const uint8_t *end;
    const sk_peek_spec *spec;
    sk_json_value *vals;
    const char *err;
    int incomplete; /* ran off the end of the buffer */
    int final;
    /* skim mode */
    int need;       /* groups not yet settled; < 0: never */
    uint32_t found; /* slots that settled their groups */
    skim_state stop;
    unsigned ws_seen; /* ws_table bits of the whitespace skipped so far */
} scan;

/* Non-zero for JSON whitespace; WS_LF marks the line feed, so that skipping
 * whitespace also tells whether a record spans lines (a raw line feed is
 * valid nowhere else in JSON). */
#define WS_LF 2u
static const uint8_t ws_table[256] = {[' '] = 1, ['\t'] = 1,
                                      ['\n'] = 1 | WS_LF, ['\r'] = 1};

static inline void skip_ws(scan *x)
{
    const uint8_t *p = x->p, *e = x->end;
    unsigned seen = 0;
    while (p < e && ws_table[*p])
        seen |= ws_table[*p++];
    x->ws_seen |= seen;
    x->p = p;
}

/* The value at x->p (a record: node root of the spec, -1 for none) is
 * scanned, x->p moving past it. 0, or -1 (x->err, x->incomplete say
 * why). */
int json_scan_record(scan *x, int root);
/* An object member at x->p ("name": value) into *m, its value also in
 * *cap; x->p past the value. 0 or -1. */
int json_scan_member(scan *x, sk_json_member *m, sk_json_value *cap);

#endif
