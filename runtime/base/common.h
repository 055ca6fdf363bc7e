/* Shared runtime vocabulary: allocation, logging, asserts, small helpers.
 *
 * Allocation goes through sk_malloc/sk_calloc/sk_realloc so that a test can
 * make the Nth allocation fail (see fault.h). Every function returns NULL on
 * failure and never aborts; callers check.
 */
#ifndef SK_COMMON_H
#define SK_COMMON_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <skippr/plugin.h>

#define SK_ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))
#define SK_MIN(a, b) ((a) < (b) ? (a) : (b))
#define SK_MAX(a, b) ((a) > (b) ? (a) : (b))
#define SK_UNUSED(x) ((void)(x))

/* Append name to the list "a, b, c" in list[cap] (cut short if it does
 * not fit): the "known: ..." of an error message, built one way. */
void sk_list_add(char *list, size_t cap, const char *name);

/* Caller owns the result and frees it with sk_free(). */
void *sk_malloc(size_t n);
void *sk_calloc(size_t count, size_t size);
void *sk_realloc(void *p, size_t n);
char *sk_strdup(const char *s);
char *sk_strndup(const char *s, size_t n);
void sk_free(void *p);
/* n bytes at an address that is a multiple of align (a power of two, at
 * least sizeof(void *)), for O_DIRECT buffers; sk_free() frees it. */
void *sk_malloc_aligned(size_t align, size_t n);
/* sk_asprintf: caller frees; NULL on failure. */
char *sk_asprintf(const char *fmt, ...) SKIPPR_PRINTF(1, 2);

/* Logging. Lines go to stderr as "skipprd: LEVEL: message". Thread-safe. */
extern int sk_log_level;
/* Set while a progress line is on the terminal, so log lines clear it. */
extern int sk_log_progress_active;
/* Log lines as JSON objects, one a line (--log-format json):
 * {"time": RFC 3339 UTC with ms, "level", "source" (the plugin instance,
 * when a plugin logs), "msg"}. */
extern int sk_log_json;
void sk_log(int level, const char *fmt, ...) SKIPPR_PRINTF(2, 3);
void sk_vlog(int level, const char *prefix, const char *fmt, va_list ap);
/* A figure a line reports: with --log-format json each is a field of its
 * own (a number), beside the msg that says them in words. */
typedef struct sk_figure {
    const char *name; /* a field name, e.g. "records" */
    double value;     /* whole numbers are written as integers */
} sk_figure;
void sk_log_figures(int level, const sk_figure *f, size_t n,
                    const char *fmt, ...) SKIPPR_PRINTF(4, 5);
#define sk_error(...) sk_log(SKIPPR_LOG_ERROR, __VA_ARGS__)
#define sk_warn(...) sk_log(SKIPPR_LOG_WARN, __VA_ARGS__)
#define sk_info(...) sk_log(SKIPPR_LOG_INFO, __VA_ARGS__)
#define sk_debug(...)                                                          \
    do {                                                                       \
        if (sk_log_level >= SKIPPR_LOG_DEBUG)                                  \
            sk_log(SKIPPR_LOG_DEBUG, __VA_ARGS__);                             \
    } while (0)

/* Make room for one more element in a growable array: if *len == *cap,
 * double the capacity (or start at first). *arrp is a pointer to the array
 * pointer. Returns SKIPPR_OK or SKIPPR_NOMEM (the array is then unchanged).
 */
int sk_array_grow(void *arrp, size_t len, size_t *cap, size_t elem,
                  size_t first);

/* Growable byte buffer with a hard cap: appending past cap fails with
 * SKIPPR_RANGE rather than growing without bound (curl's dynbuf rule). */
typedef struct sk_buf {
    uint8_t *data;
    size_t len;
    size_t cap;
    size_t max; /* hard cap in bytes */
} sk_buf;

void sk_buf_init(sk_buf *b, size_t max);
int sk_buf_reserve(sk_buf *b, size_t extra);
/* Grow the capacity to exactly cap bytes (no rounding up) if it is less. */
int sk_buf_reserve_exact(sk_buf *b, size_t cap);
int sk_buf_append(sk_buf *b, const void *p, size_t n);
int sk_buf_putc(sk_buf *b, uint8_t c);
int sk_buf_printf(sk_buf *b, const char *fmt, ...) SKIPPR_PRINTF(2, 3);
void sk_buf_free(sk_buf *b);
static inline void sk_buf_reset(sk_buf *b) { b->len = 0; }

/* Little-endian integer encoding for on-disk formats. */
static inline void sk_put_u16(uint8_t *p, uint16_t v)
{
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
}
static inline void sk_put_u32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}
static inline void sk_put_u64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}
static inline uint16_t sk_get_u16(const uint8_t *p)
{
    return (uint16_t)(p[0] | (p[1] << 8));
}
static inline uint32_t sk_get_u32(const uint8_t *p)
{
    uint32_t v = 0;
    for (int i = 3; i >= 0; i--)
        v = (v << 8) | p[i];
    return v;
}
static inline uint64_t sk_get_u64(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = (v << 8) | p[i];
    return v;
}

/* 64-bit FNV-1a: stable across runs and machines (used in object names:
 * never change it). */
uint64_t sk_hash64(const void *p, size_t n);
/* A fast 64-bit hash for in-memory tables, eight bytes per step. Not stable
 * across versions: never persist it. */
uint64_t sk_hash_fast(const void *p, size_t n);

/* Monotonic clock in nanoseconds. */
uint64_t sk_now_ns(void);

/* Give memory that malloc holds free back to the system (glibc's
 * malloc_trim; nothing elsewhere). A long-running process calls it when
 * idle: buffers of many sizes come and go, and without it the freed pages
 * stay resident, so RSS creeps although live memory is flat. */
void sk_release_free_memory(void);

/* sk_release_free_memory(), but only when the free pages the process
 * holds (RSS beyond what malloc has handed out) exceed SK_SLACK_MIN and
 * half of what is live; returns 1 when it trimmed. A busy copy calls it
 * every few seconds: trimming pages that the next buffers would reuse
 * costs a page fault per page to take them again (on a VM, microseconds
 * each), so a flat working set is left alone and only a real surplus,
 * after a burst, goes back. */
int sk_release_slack_memory(void);
#define SK_SLACK_MIN (64u << 20)

/* Have malloc serve only blocks of SK_MMAP_MIN bytes or more from their
 * own mappings, and keep up to that much free at the top of each heap
 * (glibc; nothing elsewhere). Every block below it (fetched objects,
 * slice buffers, whole parts, request bodies) comes from the heap, where
 * a freed block's pages stay mapped for the next one: mapping and
 * unmapping each costs a page fault per page and a TLB shootdown on
 * every thread per unmap, and trimming each heap's top whenever a free
 * left 128 KiB there (glibc's default) did the same. At a 1 MiB threshold
 * and the default trim, an S3 -> S3 copy of 1,200 objects took 140,000
 * page faults for a 285 MiB peak RSS; at these, about 100,000 for
 * 312 MiB, and 0.83x the CPU (paired, 5 runs each; PERFORMANCE.md). The
 * threshold is fixed so that glibc does not move it.
 * What a long run frees and does not reuse goes back through
 * sk_release_slack_memory(). Call once at start, before any thread. */
#define SK_MMAP_MIN (32u << 20)
void sk_malloc_tune(void);

/* Memory as malloc and the kernel see it, in bytes; 0 where unknown. */
typedef struct sk_memstats {
    uint64_t heap_used; /* handed out by malloc and not freed */
    uint64_t heap_held; /* what malloc holds from the system */
    uint64_t rss;       /* resident set of the process */
} sk_memstats;
void sk_memory_stats(sk_memstats *out);

#endif
