/* Where a WAL segment lives: one name for the WAL (wal.c), which writes
 * segments, and the remote state (remote.c), which restores them. */
#ifndef SK_WALNAME_H
#define SK_WALNAME_H

#include <inttypes.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* The path of segment seg in the WAL folder dir, into out (cap bytes,
 * cut to fit). */
static inline void sk_wal_segment_path(const char *dir, uint64_t seg,
                                       char *out, size_t cap)
{
    snprintf(out, cap, "%s/wal-%016" PRIx64 ".log", dir, seg);
}

#endif
