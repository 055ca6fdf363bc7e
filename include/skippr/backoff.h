/* Waits between retries, one schedule for the engine and every plugin:
 * retry k waits a random time in [w/2, w], where w = base_ms << k, at
 * most cap_ms. The jitter comes from a generator each skippr_backoff
 * holds, seeded from the clock, the thread and the struct's address, so
 * that instances and threads that fail together do not retry together;
 * never from rand(), whose one hidden state is shared by every thread of
 * the process, unseeded and not thread-safe.
 *
 * Part of the SDK, not of the binary ABI: header-only, using only the C
 * library and POSIX threads, so a plugin and the engine compile the same
 * schedule and nothing crosses the plugin boundary.
 *
 * Not thread-safe: one skippr_backoff per thread (or per instance, which
 * one thread uses at a time).
 */
#ifndef SKIPPR_BACKOFF_H
#define SKIPPR_BACKOFF_H

#include <pthread.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

typedef struct skippr_backoff {
    uint64_t base_ms; /* the first retry waits up to 2 x this */
    uint64_t cap_ms;  /* no wait is longer */
    uint64_t rng;     /* xorshift64* state; never 0 */
} skippr_backoff;

/* The same schedule with a given seed (tests: a reproducible sequence). */
static inline void skippr_backoff_seed(skippr_backoff *b, uint64_t seed)
{
    /* splitmix64 of the seed: any seed, 0 included, gives a good state */
    uint64_t z = seed + 0x9E3779B97F4A7C15ULL;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    z ^= z >> 31;
    b->rng = z ? z : 1;
}

/* A schedule from base_ms up to cap_ms, its generator seeded. */
static inline void skippr_backoff_init(skippr_backoff *b, uint64_t base_ms,
                                       uint64_t cap_ms)
{
    b->base_ms = base_ms;
    b->cap_ms = cap_ms < base_ms ? base_ms : cap_ms;
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    pthread_t self = pthread_self();
    uint64_t tid = 0;
    memcpy(&tid, &self, sizeof self < sizeof tid ? sizeof self : sizeof tid);
    skippr_backoff_seed(b, (uint64_t)ts.tv_nsec ^ ((uint64_t)ts.tv_sec << 30) ^
                               tid ^ (uint64_t)(uintptr_t)b);
}

static inline uint64_t skippr_backoff_next_(skippr_backoff *b)
{
    uint64_t x = b->rng;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    b->rng = x;
    return x * 0x2545F4914F6CDD1DULL;
}

/* Milliseconds to wait before retry number attempt (1, 2, ...). */
static inline uint64_t skippr_backoff_ms(skippr_backoff *b, int attempt)
{
    int k = attempt < 1 ? 1 : attempt > 40 ? 40 : attempt;
    uint64_t w = b->base_ms;
    for (int i = 0; i < k && w < b->cap_ms; i++)
        w <<= 1;
    if (w > b->cap_ms)
        w = b->cap_ms;
    return w / 2 + skippr_backoff_next_(b) % (w / 2 + 1);
}

/* Sleep that long. */
static inline void skippr_backoff_sleep(skippr_backoff *b, int attempt)
{
    uint64_t ms = skippr_backoff_ms(b, attempt);
    struct timespec ts = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

#endif
