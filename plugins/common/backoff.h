/* Waits between retries, one schedule for the engine and every plugin:
 * retry k waits a random time in [w/2, w], where w = base_ms << k, at
 * most cap_ms. The jitter comes from a generator each skippr_backoff
 * holds, seeded from the clock, the thread and the struct's address, so
 * that instances and threads that fail together do not retry together;
 * never from rand(), whose one hidden state is shared by every thread of
 * the process, unseeded and not thread-safe. Plugin-side code (the engine
 * compiles it too): it uses only the C library.
 *
 * Not thread-safe: one skippr_backoff per thread (or per instance, which
 * one thread uses at a time).
 */
#ifndef SKIPPR_BACKOFF_H
#define SKIPPR_BACKOFF_H

#include <stdint.h>

typedef struct skippr_backoff {
    uint64_t base_ms; /* the first retry waits up to 2 x this */
    uint64_t cap_ms;  /* no wait is longer */
    uint64_t rng;     /* xorshift64* state; never 0 */
} skippr_backoff;

/* A schedule from base_ms up to cap_ms, its generator seeded. */
void skippr_backoff_init(skippr_backoff *b, uint64_t base_ms,
                         uint64_t cap_ms);

/* The same with a given seed (tests: a reproducible sequence). */
void skippr_backoff_seed(skippr_backoff *b, uint64_t seed);

/* Milliseconds to wait before retry number attempt (1, 2, ...). */
uint64_t skippr_backoff_ms(skippr_backoff *b, int attempt);

/* Sleep that long. */
void skippr_backoff_sleep(skippr_backoff *b, int attempt);

#endif
