#include "base/crc32c.h"

#include <pthread.h>
#include <stdatomic.h>
#include <string.h>

#define POLY 0x82F63B78u /* Castagnoli, bit-reflected */

static uint32_t table[256];
/* x2n[k] = x^(2^k) mod P. No wrap-around: enough entries for any size_t
 * shift in bytes (2^3 * 2^64). */
static uint32_t x2n[3 + 64 + 1];
static pthread_once_t tables_once = PTHREAD_ONCE_INIT;
#define LANE 4096           /* bytes per chain in the three-way loop */
static uint32_t shift_lane; /* x^(8 LANE) mod P */

/* a * b mod P, both bit-reflected (x^0 is the top bit). */
static uint32_t multmodp(uint32_t a, uint32_t b)
{
    uint32_t m = 1u << 31, p = 0;
    for (;;) {
        if (a & m) {
            p ^= b;
            if ((a & (m - 1)) == 0)
                break;
        }
        m >>= 1;
        b = b & 1 ? (b >> 1) ^ POLY : b >> 1;
    }
    return p;
}

/* x^(n * 2^k) mod P. */
static uint32_t x2nmodp(uint64_t n, unsigned k)
{
    uint32_t p = 1u << 31; /* x^0 */
    while (n) {
        if (n & 1)
            p = multmodp(x2n[k], p);
        n >>= 1;
        k++;
    }
    return p;
}

static void make_tables(void)
{
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++)
            c = c & 1 ? (c >> 1) ^ POLY : c >> 1;
        table[i] = c;
    }
    uint32_t p = 1u << 30; /* x^1 */
    x2n[0] = p;
    for (size_t k = 1; k < sizeof x2n / sizeof *x2n; k++)
        x2n[k] = p = multmodp(p, p);
    shift_lane = x2nmodp(LANE, 3);
}

static uint32_t crc_sw(uint32_t crc, const uint8_t *p, size_t n)
{
    while (n--)
        crc = table[(crc ^ *p++) & 0xFF] ^ (crc >> 8);
    return crc;
}

#if defined(__x86_64__) && defined(__GNUC__)

__attribute__((target("sse4.2"))) static uint32_t crc_hw1(uint64_t c,
                                                          const uint8_t *p,
                                                          size_t n)
{
    while (n >= 8) {
        uint64_t v;
        memcpy(&v, p, 8);
        c = __builtin_ia32_crc32di(c, v);
        p += 8;
        n -= 8;
    }
    uint32_t c32 = (uint32_t)c;
    while (n--)
        c32 = __builtin_ia32_crc32qi(c32, *p++);
    return c32;
}

/* The crc32 instruction has a latency of three cycles and a throughput of
 * one: three independent chains over adjacent lanes run about three times
 * faster than one, and are joined by shifting (multiplying by x^(8 LANE)). */
__attribute__((target("sse4.2"))) static uint32_t crc_hw(uint32_t crc,
                                                         const uint8_t *p,
                                                         size_t n)
{
    if (n >= 3 * LANE) {
        while (n >= 3 * LANE) {
            uint64_t a = crc, b = 0, c = 0;
            for (size_t i = 0; i < LANE; i += 8) {
                uint64_t va, vb, vc;
                memcpy(&va, p + i, 8);
                memcpy(&vb, p + LANE + i, 8);
                memcpy(&vc, p + 2 * LANE + i, 8);
                a = __builtin_ia32_crc32di(a, va);
                b = __builtin_ia32_crc32di(b, vb);
                c = __builtin_ia32_crc32di(c, vc);
            }
            crc = multmodp(shift_lane, (uint32_t)a) ^ (uint32_t)b;
            crc = multmodp(shift_lane, crc) ^ (uint32_t)c;
            p += 3 * LANE;
            n -= 3 * LANE;
        }
    }
    return crc_hw1(crc, p, n);
}

static int have_hw(void)
{
    static atomic_int hw = -1;
    int v = atomic_load_explicit(&hw, memory_order_relaxed);
    if (v < 0) {
        __builtin_cpu_init();
        v = __builtin_cpu_supports("sse4.2") ? 1 : 0;
        atomic_store_explicit(&hw, v, memory_order_relaxed);
    }
    return v;
}
#endif

uint32_t sk_crc32c(uint32_t crc, const void *p, size_t n)
{
    crc = ~crc;
#if defined(__x86_64__) && defined(__GNUC__)
    /* Short buffers (one record) need no table: no pthread_once for them. */
    if (have_hw()) {
        if (n >= 3 * LANE)
            pthread_once(&tables_once, make_tables);
        return ~crc_hw(crc, p, n);
    }
#endif
    pthread_once(&tables_once, make_tables);
    return ~crc_sw(crc, p, n);
}

uint32_t sk_crc32c_xpow(uint64_t len)
{
    pthread_once(&tables_once, make_tables);
    return x2nmodp(len, 3);
}

uint32_t sk_crc32c_combine_x(uint32_t crc1, uint32_t crc2, uint32_t xpow)
{
    return multmodp(xpow, crc1) ^ crc2;
}

uint32_t sk_crc32c_combine(uint32_t crc1, uint32_t crc2, uint64_t len2)
{
    return sk_crc32c_combine_x(crc1, crc2, sk_crc32c_xpow(len2));
}
