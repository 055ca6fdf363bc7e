/* The process's fence: whether it may still write its pipeline's sink and
 * state. With the state in a bucket (skipprd_el_storage_mode: s3) a lease
 * says who runs the pipeline; a process whose lease lapsed (it was paused,
 * its box cut off) or was taken must not write, because another process
 * may be copying the same data by now. The lease's holder arms the fence
 * and moves its deadline on with each renewal that went through; every
 * write (S3 requests, through the plugin host's fenced(), checked by libcurl
 * right before a request's first byte goes out; the state's own stores)
 * asks sk_fence_lapsed() first.
 *
 * Time is the boot clock (CLOCK_BOOTTIME: it runs on while the process is
 * stopped and while the machine sleeps), never the wall clock.
 *
 * Unarmed (state in a folder, whose flock guards it) nothing is fenced.
 * Thread: any; the state is atomics.
 */
#ifndef SK_FENCE_H
#define SK_FENCE_H

#include <stdint.h>

/* Milliseconds on the boot clock. */
int64_t sk_boot_ms(void);

/* Arm the fence, or move its deadline: writes are allowed until
 * until_ms (sk_boot_ms() time). */
void sk_fence_extend(int64_t until_ms);
/* The lease is gone for good (another process took it): nothing more. */
void sk_fence_close(void);
/* Non-zero once the fence is armed and its deadline passed or closed. */
int sk_fence_lapsed(void);
/* Disarm (tests; a process that let its lease go cleanly). */
void sk_fence_reset(void);

#endif
