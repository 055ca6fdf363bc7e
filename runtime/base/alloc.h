/* Allocation (alloc.c). Everything goes through sk_malloc/sk_calloc/
 * sk_realloc so that a test can make the Nth allocation fail (fault.h);
 * each returns NULL on failure and never aborts; callers check. Also how
 * malloc is tuned and trimmed, and what it holds. */
#ifndef SK_ALLOC_H
#define SK_ALLOC_H

#include <stddef.h>
#include <stdint.h>

#include <skippr/plugin.h> /* SKIPPR_PRINTF */

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
