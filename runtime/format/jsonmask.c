/* JSON's structural stage: see jsonmask.h. */
#include "format/jsonmask.h"

#include <stdatomic.h>
#include <string.h>

#if defined(__x86_64__)
#include <immintrin.h>
#define HAVE_X86 1
#endif

/* A block's raw classes, before strings and escapes are known. */
typedef struct raw {
    uint64_t quote, backslash, structural, open, close, newline, space,
        ctrl, high;
} raw;

/* A block's masks, by one kernel (the kernel and finish fused, so the
 * raw classes stay in registers). */
typedef void (*block_fn)(sk_jmask_carry *c, const uint8_t *in,
                         sk_jmask *out);

/* ---- escapes and strings, in 64-bit words -------------------------------- */

#define ODD_BITS 0xAAAAAAAAAAAAAAAAull  /* bits 1, 3, 5, ... */
#define EVEN_BITS 0x5555555555555555ull /* bits 0, 2, 4, ... */

/* The bytes escaped by a backslash: in a run of k backslashes each odd
 * one escapes the byte after it, so the 2nd, 4th, ... of the run are
 * escaped, and the byte after the run is when k is odd. *carry: in, the
 * first byte is escaped by the block before; out, the same for the next
 * block. A run costs a few operations; data seldom has many. */
static uint64_t escapes(uint64_t bs, uint64_t *carry)
{
    uint64_t esc = *carry & 1;
    bs &= ~esc; /* an escaped backslash escapes nothing */
    *carry = 0;
    while (bs) {
        unsigned s = (unsigned)__builtin_ctzll(bs);
        uint64_t rest = ~(bs >> s);
        unsigned len = rest ? (unsigned)__builtin_ctzll(rest) : 64 - s;
        uint64_t run = (len == 64 ? ~0ull : (((uint64_t)1 << len) - 1)) << s;
        /* the bytes after each escaping one: run << 1, every other one */
        esc |= (run << 1) & (s & 1 ? EVEN_BITS : ODD_BITS);
        if (s + len == 64 && (len & 1))
            *carry = 1; /* the run escapes the next block's first byte */
        bs &= ~run;
    }
    return esc;
}

/* Bit i of the result is the XOR of bits 0..i of x. */
static uint64_t prefix_xor(uint64_t x)
{
    x ^= x << 1;
    x ^= x << 2;
    x ^= x << 4;
    x ^= x << 8;
    x ^= x << 16;
    x ^= x << 32;
    return x;
}

/* The masks of a block from its raw classes, after the blocks c saw. */
static inline __attribute__((always_inline)) void
finish(sk_jmask_carry *c, const raw *r, sk_jmask *m)
{
    uint64_t esc = escapes(r->backslash, &c->escaped);
    uint64_t quote = r->quote & ~esc;
    uint64_t in = prefix_xor(quote) ^ c->in_string;
    c->in_string = (uint64_t)0 - (in >> 63);
    uint64_t outside = ~(in | quote);
    *m = (sk_jmask){.escaped = esc, .quote = quote, .in_string = in,
                    .structural = r->structural & outside,
                    .open = r->open & outside,
                    .close = r->close & outside,
                    .newline = r->newline & outside,
                    .space = r->space & outside,
                    .ctrl = r->ctrl & in,
                    .high = r->high};
}


/* ---- scalar kernel: a byte at a time ------------------------------------- */

enum { C_QUOTE = 1, C_BS = 2, C_STRUCT = 4, C_NL = 8, C_SPACE = 16,
       C_CTRL = 32, C_HIGH = 64, C_OPEN = 128, C_CLOSE = 256 };

/* The classes of byte b. */
static unsigned class_of(unsigned b)
{
    unsigned c = 0;
    if (b == '"')
        c |= C_QUOTE;
    if (b == '\\')
        c |= C_BS;
    if (b == '{' || b == '}' || b == '[' || b == ']' || b == ':' || b == ',')
        c |= C_STRUCT;
    if (b == '{' || b == '[')
        c |= C_OPEN;
    if (b == '}' || b == ']')
        c |= C_CLOSE;
    if (b == '\n')
        c |= C_NL;
    if (b == ' ' || b == '\t' || b == '\r' || b == '\n')
        c |= C_SPACE;
    if (b < 0x20)
        c |= C_CTRL;
    if (b >= 0x80)
        c |= C_HIGH;
    return c;
}

static inline __attribute__((always_inline)) void
kernel_scalar(const uint8_t *in, raw *r)
{
    *r = (raw){0};
    for (unsigned i = 0; i < SK_JMASK_BLOCK; i++) {
        uint64_t bit = (uint64_t)1 << i;
        unsigned c = class_of(in[i]);
        r->quote |= c & C_QUOTE ? bit : 0;
        r->backslash |= c & C_BS ? bit : 0;
        r->structural |= c & C_STRUCT ? bit : 0;
        r->open |= c & C_OPEN ? bit : 0;
        r->close |= c & C_CLOSE ? bit : 0;
        r->newline |= c & C_NL ? bit : 0;
        r->space |= c & C_SPACE ? bit : 0;
        r->ctrl |= c & C_CTRL ? bit : 0;
        r->high |= c & C_HIGH ? bit : 0;
    }
}

#if HAVE_X86
/* ---- SSE2: four 16-byte lanes ------------------------------------------- */

static inline __attribute__((always_inline)) void
kernel_sse2(const uint8_t *in, raw *r)
{
    const __m128i q = _mm_set1_epi8('"'), bs = _mm_set1_epi8('\\');
    const __m128i lower = _mm_set1_epi8(0x20), curly = _mm_set1_epi8('{');
    const __m128i curly_end = _mm_set1_epi8('}');
    const __m128i colon = _mm_set1_epi8(':'), comma = _mm_set1_epi8(',');
    const __m128i nl = _mm_set1_epi8('\n'), sp = _mm_set1_epi8(' ');
    const __m128i tab = _mm_set1_epi8('\t'), cr = _mm_set1_epi8('\r');
    const __m128i top3 = _mm_set1_epi8((char)0xE0), zero = _mm_setzero_si128();
    *r = (raw){0};
    for (unsigned k = 0; k < 4; k++) {
        __m128i v = _mm_loadu_si128((const __m128i *)(in + 16 * k));
        /* '[' ']' are '{' '}' with 0x20 off */
        __m128i folded = _mm_or_si128(v, lower);
        __m128i op = _mm_cmpeq_epi8(folded, curly);
        __m128i cl = _mm_cmpeq_epi8(folded, curly_end);
        __m128i st = _mm_or_si128(
            _mm_or_si128(op, cl),
            _mm_or_si128(_mm_cmpeq_epi8(v, colon), _mm_cmpeq_epi8(v, comma)));
        __m128i n = _mm_cmpeq_epi8(v, nl);
        __m128i s = _mm_or_si128(
            _mm_or_si128(n, _mm_cmpeq_epi8(v, sp)),
            _mm_or_si128(_mm_cmpeq_epi8(v, tab), _mm_cmpeq_epi8(v, cr)));
        __m128i ctl = _mm_cmpeq_epi8(_mm_and_si128(v, top3), zero);
        unsigned sh = 16 * k;
#define PUT(field, m) r->field |= (uint64_t)(uint16_t)_mm_movemask_epi8(m) << sh
        PUT(quote, _mm_cmpeq_epi8(v, q));
        PUT(backslash, _mm_cmpeq_epi8(v, bs));
        PUT(structural, st);
        PUT(open, op);
        PUT(close, cl);
        PUT(newline, n);
        PUT(space, s);
        PUT(ctrl, ctl);
        PUT(high, v);
#undef PUT
    }
}

/* ---- AVX2: two 32-byte lanes -------------------------------------------- */

__attribute__((target("avx2"), always_inline)) static inline void
kernel_avx2(const uint8_t *in, raw *r)
{
    const __m256i q = _mm256_set1_epi8('"'), bs = _mm256_set1_epi8('\\');
    const __m256i lower = _mm256_set1_epi8(0x20);
    const __m256i curly = _mm256_set1_epi8('{');
    const __m256i curly_end = _mm256_set1_epi8('}');
    const __m256i colon = _mm256_set1_epi8(':');
    const __m256i comma = _mm256_set1_epi8(',');
    const __m256i nl = _mm256_set1_epi8('\n'), sp = _mm256_set1_epi8(' ');
    const __m256i tab = _mm256_set1_epi8('\t'), cr = _mm256_set1_epi8('\r');
    const __m256i top3 = _mm256_set1_epi8((char)0xE0);
    const __m256i zero = _mm256_setzero_si256();
    *r = (raw){0};
    for (unsigned k = 0; k < 2; k++) {
        __m256i v = _mm256_loadu_si256((const __m256i *)(in + 32 * k));
        __m256i folded = _mm256_or_si256(v, lower);
        __m256i op = _mm256_cmpeq_epi8(folded, curly);
        __m256i cl = _mm256_cmpeq_epi8(folded, curly_end);
        __m256i st = _mm256_or_si256(
            _mm256_or_si256(op, cl),
            _mm256_or_si256(_mm256_cmpeq_epi8(v, colon),
                            _mm256_cmpeq_epi8(v, comma)));
        __m256i n = _mm256_cmpeq_epi8(v, nl);
        __m256i s = _mm256_or_si256(
            _mm256_or_si256(n, _mm256_cmpeq_epi8(v, sp)),
            _mm256_or_si256(_mm256_cmpeq_epi8(v, tab),
                            _mm256_cmpeq_epi8(v, cr)));
        __m256i ctl = _mm256_cmpeq_epi8(_mm256_and_si256(v, top3), zero);
        unsigned sh = 32 * k;
#define PUT(field, m)                                                          \
    r->field |= (uint64_t)(uint32_t)_mm256_movemask_epi8(m) << sh
        PUT(quote, _mm256_cmpeq_epi8(v, q));
        PUT(backslash, _mm256_cmpeq_epi8(v, bs));
        PUT(structural, st);
        PUT(open, op);
        PUT(close, cl);
        PUT(newline, n);
        PUT(space, s);
        PUT(ctrl, ctl);
        PUT(high, v);
#undef PUT
    }
}
#endif

/* ---- kernels fused with finish ------------------------------------------ */

static void block_scalar(sk_jmask_carry *c, const uint8_t *in, sk_jmask *out)
{
    raw r;
    kernel_scalar(in, &r);
    finish(c, &r, out);
}

#if HAVE_X86
static void block_sse2(sk_jmask_carry *c, const uint8_t *in, sk_jmask *out)
{
    raw r;
    kernel_sse2(in, &r);
    finish(c, &r, out);
}

__attribute__((target("avx2"))) static void
block_avx2(sk_jmask_carry *c, const uint8_t *in, sk_jmask *out)
{
    raw r;
    kernel_avx2(in, &r);
    finish(c, &r, out);
}
#endif

/* ---- choosing a kernel -------------------------------------------------- */

typedef struct named {
    const char *name;
    block_fn fn;
} named;

static const named kernels[] = {
#if HAVE_X86
    {"avx2", block_avx2},
    {"sse2", block_sse2},
#endif
    {"scalar", block_scalar},
};
#define NKERNELS (sizeof kernels / sizeof *kernels)

static _Atomic(const named *) chosen;

/* Whether this CPU runs kernel k. */
static int runs(const named *k)
{
#if HAVE_X86
    if (k->fn == block_avx2)
        return __builtin_cpu_supports("avx2");
#endif
    (void)k;
    return 1;
}

/* The kernel in use, chosen at the first call: the first this CPU runs. */
static const named *kernel(void)
{
    const named *k = atomic_load_explicit(&chosen, memory_order_acquire);
    if (k)
        return k;
    size_t i = 0;
    while (!runs(&kernels[i]))
        i++;
    atomic_store_explicit(&chosen, &kernels[i], memory_order_release);
    return &kernels[i];
}

const char *sk_jmask_kernel(void)
{
    return kernel()->name;
}

int sk_jmask_use(const char *name)
{
    for (size_t i = 0; i < NKERNELS; i++)
        if (strcmp(kernels[i].name, name) == 0 && runs(&kernels[i])) {
            atomic_store_explicit(&chosen, &kernels[i],
                                  memory_order_release);
            return 0;
        }
    return -1;
}

void sk_jmask_block(sk_jmask_carry *c, const uint8_t *in, sk_jmask *out)
{
    kernel()->fn(c, in, out);
}

void sk_jmask_tail(sk_jmask_carry *c, const uint8_t *in, size_t n,
                   sk_jmask *out)
{
    uint8_t pad[SK_JMASK_BLOCK];
    memset(pad, ' ', sizeof pad);
    if (n > SK_JMASK_BLOCK)
        n = SK_JMASK_BLOCK;
    memcpy(pad, in, n);
    sk_jmask_block(c, pad, out);
    uint64_t keep = n == SK_JMASK_BLOCK ? ~0ull : ((uint64_t)1 << n) - 1;
    out->escaped &= keep;
    out->quote &= keep;
    out->in_string &= keep;
    out->structural &= keep;
    out->open &= keep;
    out->close &= keep;
    out->newline &= keep;
    out->ctrl &= keep;
    out->high &= keep;
}
