/* FNV-1a for what is stored, a fast hash for tables (hash.h). */
#include "base/hash.h"

#include <string.h>

uint64_t sk_hash64(const void *p, size_t n)
{
    const uint8_t *s = p;
    uint64_t h = 1469598103934665603ULL;
    for (size_t i = 0; i < n; i++) {
        h ^= s[i];
        h *= 1099511628211ULL;
    }
    return h;
}

#if defined(__SIZEOF_INT128__)
/* The 128-bit product of a and b, its halves folded by XOR. */
static inline uint64_t fold_mul(uint64_t a, uint64_t b)
{
    unsigned __int128 r = (unsigned __int128)a * b;
    return (uint64_t)r ^ (uint64_t)(r >> 64);
}

/* Sixteen bytes per multiply: table keys are short (partition signatures,
 * unit ids), so a step costs one multiply instead of three. */
uint64_t sk_hash_fast(const void *p, size_t n)
{
    const uint64_t k0 = 0x9E3779B97F4A7C15ULL, k1 = 0xd6e8feb86659fd93ULL;
    const uint8_t *s = p;
    uint64_t h = k0 ^ ((uint64_t)n * k1);
    size_t left = n;
    while (left > 16) {
        uint64_t a, b;
        memcpy(&a, s, 8);
        memcpy(&b, s + 8, 8);
        h = fold_mul(a ^ h, b ^ k1);
        s += 16;
        left -= 16;
    }
    uint64_t a = 0, b = 0;
    if (left > 8) {
        memcpy(&a, s, 8);
        memcpy(&b, s + 8, left - 8);
    } else {
        memcpy(&a, s, left);
    }
    h = fold_mul(a ^ h, b ^ k1);
    return fold_mul(h ^ k0, k1 ^ (uint64_t)n);
}
#else
static inline uint64_t mix64(uint64_t x)
{
    x ^= x >> 32;
    x *= 0xd6e8feb86659fd93ULL;
    x ^= x >> 32;
    x *= 0xd6e8feb86659fd93ULL;
    x ^= x >> 32;
    return x;
}

uint64_t sk_hash_fast(const void *p, size_t n)
{
    const uint8_t *s = p;
    uint64_t h = 0x9E3779B97F4A7C15ULL ^ n;
    while (n >= 8) {
        uint64_t v;
        memcpy(&v, s, 8);
        h = (h ^ mix64(v)) * 0x9E3779B97F4A7C15ULL;
        s += 8;
        n -= 8;
    }
    uint64_t tail = 0;
    memcpy(&tail, s, n);
    return mix64(h ^ tail ^ ((uint64_t)n << 56));
}
#endif
