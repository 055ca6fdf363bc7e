/* Shared runtime vocabulary: each part in a header of its own, all of
 * them here for the files that use several (most do): allocation
 * (alloc.h), logging (log.h), the byte buffer (buf.h), hashes (hash.h),
 * little-endian integers (endian.h) and the small macros (macros.h); and
 * two helpers of common.c, below.
 */
#ifndef SK_COMMON_H
#define SK_COMMON_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <skippr/plugin.h>

#include "base/alloc.h"
#include "base/buf.h"
#include "base/endian.h"
#include "base/hash.h"
#include "base/log.h"
#include "base/macros.h"

/* Append name to the list "a, b, c" in list[cap] (cut short if it does
 * not fit): the "known: ..." of an error message, built one way. */
void sk_list_add(char *list, size_t cap, const char *name);

/* Monotonic clock in nanoseconds. */
uint64_t sk_now_ns(void);

#endif
