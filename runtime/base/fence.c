#include "base/fence.h"

#include <stdatomic.h>
#include <time.h>

/* INT64_MAX: unarmed; INT64_MIN: closed. */
static atomic_llong deadline = INT64_MAX;

int64_t sk_boot_ms(void)
{
    struct timespec ts;
#ifdef CLOCK_BOOTTIME
    clock_gettime(CLOCK_BOOTTIME, &ts);
#else
    clock_gettime(CLOCK_MONOTONIC, &ts);
#endif
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void sk_fence_extend(int64_t until_ms)
{
    long long cur = atomic_load(&deadline);
    /* Never reopen a closed fence, never move a deadline back. */
    while ((cur == INT64_MAX || (cur != INT64_MIN && cur < until_ms)) &&
           !atomic_compare_exchange_weak(&deadline, &cur, until_ms))
        ;
}

void sk_fence_close(void) { atomic_store(&deadline, INT64_MIN); }

int sk_fence_lapsed(void)
{
    long long d = atomic_load(&deadline);
    return d != INT64_MAX && sk_boot_ms() > d;
}

void sk_fence_reset(void) { atomic_store(&deadline, INT64_MAX); }
