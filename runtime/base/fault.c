#include "base/fault.h"

#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int sk_fault_enabled;
int sk_crash_enabled;

static const char *const kind_names[SK_FAULT_KIND_COUNT] = {
    "alloc", "open", "write", "nospc", "fsync", "rename", "unlink", "read",
    "direct"};

static struct {
    long at;      /* fire on this call number (1-based); 0 = off */
    int persist;  /* keep failing after the first */
    atomic_long calls;
} faults[SK_FAULT_KIND_COUNT];

static char crash_point[32];
static long crash_at;
static int crash_signal = SIGKILL;
static atomic_long crash_calls;

/* Every crash point the engine defines, in the order a copy meets them
 * (roughly). A test enumerates them from the tally. */
static const char *const crash_points[] = {
    "read",        "sink_write", "grow_write", "part_put",  "stage_copy",
    "stage_put",   "stream_sync", "commit",    "seal",      "grow_commit",
    "sink_commit", "done",       "gc",         "ledger_merge"};
#define CRASH_POINTS (sizeof crash_points / sizeof *crash_points)
static atomic_long crash_hits[CRASH_POINTS];
static char tally_path[4096]; /* SKIPPR_CRASH_TALLY: "" when not asked */

/* The index of point in crash_points, or CRASH_POINTS. */
static size_t point_find(const char *point)
{
    size_t i = 0;
    while (i < CRASH_POINTS && strcmp(crash_points[i], point) != 0)
        i++;
    return i;
}

/* The index of point; aborts on a name not in the list, so that a new
 * crash point cannot be missed by the enumeration. */
static size_t point_index(const char *point)
{
    size_t i = point_find(point);
    if (i == CRASH_POINTS) {
        fprintf(stderr, "skipprd: crash point '%s' is not in fault.c's "
                        "list\n", point);
        abort();
    }
    return i;
}

/* At exit: each point and how often it was passed, one "POINT N" line. */
static void write_tally(void)
{
    FILE *f = fopen(tally_path, "w");
    if (!f) {
        fprintf(stderr, "skipprd: cannot write SKIPPR_CRASH_TALLY %s\n",
                tally_path);
        return;
    }
    for (size_t i = 0; i < CRASH_POINTS; i++)
        fprintf(f, "%s %ld\n", crash_points[i], atomic_load(&crash_hits[i]));
    fclose(f);
}

void sk_fault_arm(sk_fault_kind kind, long n, int persist)
{
    faults[kind].at = n;
    faults[kind].persist = persist;
    atomic_store(&faults[kind].calls, 0);
    sk_fault_enabled = 0;
    for (int i = 0; i < SK_FAULT_KIND_COUNT; i++)
        if (faults[i].at > 0)
            sk_fault_enabled = 1;
}

int sk_fault_hit_slow(sk_fault_kind kind)
{
    /* nospc is counted on write calls. */
    if (kind == SK_FAULT_WRITE && faults[SK_FAULT_NOSPC].at > 0)
        kind = SK_FAULT_NOSPC;
    if (faults[kind].at <= 0)
        return 0;
    long n = atomic_fetch_add(&faults[kind].calls, 1) + 1;
    return n == faults[kind].at || (faults[kind].persist && n > faults[kind].at);
}

int sk_fault_nospc_armed(void) { return faults[SK_FAULT_NOSPC].at > 0; }

void sk_crashpoint_slow(const char *point)
{
    atomic_fetch_add(&crash_hits[point_index(point)], 1);
    if (!*crash_point)
        return; /* a tally only */
    if (strcmp(crash_point, "any") != 0 && strcmp(crash_point, point) != 0)
        return;
    if (atomic_fetch_add(&crash_calls, 1) + 1 == crash_at) {
        fprintf(stderr, "skipprd: crash point %s reached, %s\n", point,
                crash_signal == SIGKILL ? "killing self" : "asking to stop");
        raise(crash_signal);
    }
}

int sk_fault_init_from_env(void)
{
    const char *f = getenv("SKIPPR_FAULT");
    if (f && *f) {
        char kind[32];
        long n = 0;
        char persist[16] = "";
        if (sscanf(f, "%31[a-z]:%ld:%15s", kind, &n, persist) < 2 || n <= 0) {
            fprintf(stderr, "skipprd: error: bad SKIPPR_FAULT '%s' "
                            "(want KIND:N[:persist])\n", f);
            return -1;
        }
        int found = 0;
        for (int i = 0; i < SK_FAULT_KIND_COUNT; i++) {
            if (strcmp(kind, kind_names[i]) == 0) {
                sk_fault_arm((sk_fault_kind)i, n,
                             strcmp(persist, "persist") == 0);
                found = 1;
            }
        }
        if (!found) {
            fprintf(stderr, "skipprd: error: unknown fault kind '%s'\n", kind);
            return -1;
        }
    }
    const char *c = getenv("SKIPPR_CRASH");
    if (c && *c) {
        char how[16] = "";
        int got = sscanf(c, "%31[a-z_]:%ld:%15s", crash_point, &crash_at, how);
        if (got < 2 || crash_at <= 0 ||
            (got == 3 && strcmp(how, "term") != 0)) {
            fprintf(stderr, "skipprd: error: bad SKIPPR_CRASH '%s' "
                            "(want POINT:N[:term])\n", c);
            return -1;
        }
        if (got == 3)
            crash_signal = SIGTERM;
        if (strcmp(crash_point, "any") != 0 &&
            point_find(crash_point) == CRASH_POINTS) {
            fprintf(stderr, "skipprd: error: unknown crash point '%s'\n",
                    crash_point);
            return -1;
        }
        sk_crash_enabled = 1;
    }
    const char *t = getenv("SKIPPR_CRASH_TALLY");
    if (t && *t) {
        if (strlen(t) >= sizeof tally_path || atexit(write_tally) != 0) {
            fprintf(stderr, "skipprd: error: bad SKIPPR_CRASH_TALLY\n");
            return -1;
        }
        memcpy(tally_path, t, strlen(t) + 1);
        sk_crash_enabled = 1;
    }
    return 0;
}
