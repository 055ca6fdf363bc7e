/* Fault injection and crash points, as a test mode (curl's torture mode and
 * SQLite's sqlite3FaultSim).
 *
 * Configured once at start-up from the environment:
 *
 *   SKIPPR_FAULT=KIND:N[:persist]   the Nth call of KIND fails (and, with
 *                                   persist, every later one too). KIND is
 *                                   alloc, open, write, nospc, fsync, rename,
 *                                   unlink, read or direct; nospc makes
 *                                   write fail with ENOSPC, direct makes a
 *                                   WAL write with O_DIRECT fail with
 *                                   EINVAL (a file system that took
 *                                   O_DIRECT at open refusing a write).
 *   SKIPPR_CRASH=POINT:N[:term]     the process kills itself with SIGKILL the
 *                                   Nth time it passes crash point POINT
 *                                   (the list is crash_points in fault.c:
 *                                   read, sink_write, grow_write, part_put,
 *                                   stage_copy, stage_put, stream_sync,
 *                                   commit, seal, grow_commit, sink_commit,
 *                                   done, gc, ledger_merge), or any for
 *                                   every point); with term it sends
 *                                   itself SIGTERM instead, a stop request
 *                                   at that exact place. An unknown POINT
 *                                   is refused.
 *   SKIPPR_CRASH_TALLY=FILE         at exit, write each crash point the
 *                                   engine defines and how often it was
 *                                   passed ("POINT N" lines), so that a
 *                                   test can crash at each one's first,
 *                                   middle and last hit.
 *
 * With neither set, each check is one predictable branch.
 */
#ifndef SK_FAULT_H
#define SK_FAULT_H

typedef enum sk_fault_kind {
    SK_FAULT_ALLOC,
    SK_FAULT_OPEN,
    SK_FAULT_WRITE,
    SK_FAULT_NOSPC,
    SK_FAULT_FSYNC,
    SK_FAULT_RENAME,
    SK_FAULT_UNLINK,
    SK_FAULT_READ,
    SK_FAULT_DIRECT,
    SK_FAULT_KIND_COUNT
} sk_fault_kind;

extern int sk_fault_enabled;

/* Parse SKIPPR_FAULT and SKIPPR_CRASH. Returns 0, or -1 with a message
 * printed when a variable is malformed. Call before starting threads. */
int sk_fault_init_from_env(void);
/* Arm a fault programmatically (unit tests). n == 0 disarms. */
void sk_fault_arm(sk_fault_kind kind, long n, int persist);

int sk_fault_hit_slow(sk_fault_kind kind);
static inline int sk_fault_hit(sk_fault_kind kind)
{
    return sk_fault_enabled ? sk_fault_hit_slow(kind) : 0;
}

/* Non-zero when write faults are ENOSPC rather than EIO. */
int sk_fault_nospc_armed(void);

extern int sk_crash_enabled;
void sk_crashpoint_slow(const char *point);
/* A named place where a crash test may kill the process. */
static inline void sk_crashpoint(const char *point)
{
    if (sk_crash_enabled)
        sk_crashpoint_slow(point);
}

#endif
