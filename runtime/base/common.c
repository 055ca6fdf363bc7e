/* The two helpers of common.h: the monotonic clock and the "known: a, b"
 * list of an error message. */
#include "base/common.h"

#include <stdio.h>
#include <string.h>
#include <time.h>

uint64_t sk_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

void sk_list_add(char *list, size_t cap, const char *name)
{
    size_t n = strnlen(list, cap);
    if (n + 1 >= cap)
        return;
    snprintf(list + n, cap - n, "%s%s", n ? ", " : "", name);
}
