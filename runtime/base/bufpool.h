/* A pool of freed buffers for reuse: the slices' open-block buffers.
 *
 * Each slice's buffer grows by doubling and is given back when the slice
 * seals, spills or puts a part. Through malloc, every growth takes fresh
 * heap and every release leaves a hole that malloc_trim() may return to
 * the system; a fresh page costs a fault and zeroing (on a VM, 3 to 11 us
 * each: more than copying the page). Through the pool, a released buffer
 * waits in its size class for the next slice that grows to that size.
 *
 * Sizes are rounded up to a class: 4 KiB, then eight steps per power of
 * two (2^k, 2^k + 2^k/8, ..., 2^k + 7 2^k/8), so at most an eighth is
 * spare. The holders' buffers (live: the caller counts them and passes
 * the sum) and the idle ones together stay within `limit` bytes as long
 * as what is live fits: a release keeps a buffer only if that holds, and
 * a fresh allocation first frees idle buffers to make it hold. Sizes
 * above the largest class bypass the pool.
 *
 * Thread: one thread at a time (the state's: the pipeline thread).
 * Under ASan, idle buffers are poisoned, so a use after release is caught.
 */
#ifndef SK_BUFPOOL_H
#define SK_BUFPOOL_H

#include <stddef.h>
#include <stdint.h>

#include "base/common.h"

#define SK_POOL_MIN_SHIFT 12 /* the smallest class: 4 KiB */
#define SK_POOL_MAX_SHIFT 28 /* the largest class: 2^28 + 7 2^25 bytes */
#define SK_POOL_CLASSES ((SK_POOL_MAX_SHIFT - SK_POOL_MIN_SHIFT + 1) * 8)

typedef struct sk_bufpool {
    struct {
        void **v; /* idle buffers of this class */
        size_t n, cap;
    } cls[SK_POOL_CLASSES];
    uint64_t idle;  /* bytes waiting in cls[] */
    uint64_t limit; /* live + idle stays within it while live does */
    uint64_t reused, fresh; /* buffers taken from the pool; from malloc */
} sk_bufpool;

void sk_bufpool_init(sk_bufpool *p, uint64_t limit);
/* Free every idle buffer (live ones stay the holders'). */
void sk_bufpool_clear(sk_bufpool *p);
/* The class size for n bytes (at least n); n itself above the largest. */
size_t sk_bufpool_size(size_t n);
/* Grow b to at least cap bytes (not past b->max: SKIPPR_RANGE), keeping
 * its bytes, with a buffer from the pool or malloc; b's old buffer goes to
 * the pool. live: the bytes of the other holders' buffers, b's excluded.
 * SKIPPR_NOMEM leaves b as it was. The buffer is plain heap memory: the
 * holder owns it, and gives it back with sk_bufpool_release() (or
 * skippr_buf_free(), which the pool does not mind). */
int sk_bufpool_reserve(sk_bufpool *p, skippr_buf *b, size_t cap, uint64_t live);
/* b's buffer to the pool (or freed), live as above; b is left empty with
 * its max. */
void sk_bufpool_release(sk_bufpool *p, skippr_buf *b, uint64_t live);

#endif
