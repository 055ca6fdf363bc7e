/* Private to the JSON code of format/ (json.c, jsonspec.c, jsontext.c):
 * the peek spec's trie and the small helpers they share. Nothing outside
 * format/ includes it; json.h is the contract.
 */
#ifndef SK_FORMAT_JSON_IMPL_H
#define SK_FORMAT_JSON_IMPL_H

#include <stdint.h>
#include <string.h>

#include "format/json.h"
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

/* The peek spec: a trie of path segments. */
typedef struct peek_node {
    const char *name;
    size_t name_len;
    int slot;        /* path index ending here, or -1 */
    int first_child; /* node index, or -1 */
    int next;        /* sibling node index, or -1 */
    uint64_t child_lens; /* bit L set: some child's name is L bytes (L<64) */
} peek_node;

struct sk_peek_spec {
    size_t npaths;
    size_t nnodes;
    size_t cap;
    peek_node *nodes; /* node 0 is the root */
    char **names;     /* owned copies of segment names, one per node */
    /* skim mode (sk_peek_spec_set_skim) */
    int skim;
    int need;                                 /* groups to settle */
    uint8_t settles[SK_PEEK_MAX_PATHS];       /* groups path i settles */
    uint8_t settle_kind[SK_PEEK_MAX_PATHS];
    int lines; /* skim: a settled record ends with its line */
};

/* a and b hold n bytes each; 1 if they are equal. Member names are short,
 * so this compares by overlapping 8- or 4-byte loads, never reading past
 * n, instead of calling memcmp. */
static inline int short_equal(const uint8_t *a, const uint8_t *b, size_t n)
{
    if (n >= 8) {
        uint64_t x, y;
        size_t i = 0;
        for (; i + 8 < n; i += 8) {
            memcpy(&x, a + i, 8);
            memcpy(&y, b + i, 8);
            if (x != y)
                return 0;
        }
        memcpy(&x, a + n - 8, 8);
        memcpy(&y, b + n - 8, 8);
        return x == y;
    }
    if (n >= 4) {
        uint32_t x0, y0, x1, y1;
        memcpy(&x0, a, 4);
        memcpy(&y0, b, 4);
        memcpy(&x1, a + n - 4, 4);
        memcpy(&y1, b + n - 4, 4);
        return x0 == y0 && x1 == y1;
    }
    for (size_t i = 0; i < n; i++)
        if (a[i] != b[i])
            return 0;
    return 1;
}

static inline int spec_child(const sk_peek_spec *s, int node,
                             const uint8_t *name, size_t len)
{
    /* Most member names in a record are not wanted: reject them by length
     * before walking the children. */
    if (len < 64 && !(s->nodes[node].child_lens >> len & 1))
        return -1;
    for (int c = s->nodes[node].first_child; c >= 0; c = s->nodes[c].next) {
        if (s->nodes[c].name_len == len &&
            short_equal((const uint8_t *)s->nodes[c].name, name, len))
            return c;
    }
    return -1;
}

static inline int hexval(uint8_t c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    c |= 0x20;
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    return -1;
}

/* Reads 4 hex digits at p; -1 if invalid. Caller checked the bounds. */
static inline long hex4(const uint8_t *p)
{
    long v = 0;
    for (int i = 0; i < 4; i++) {
        int h = hexval(p[i]);
        if (h < 0)
            return -1;
        v = (v << 4) | h;
    }
    return v;
}

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

#endif
