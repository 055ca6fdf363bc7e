/* Allocation with fault injection, malloc's tuning and trimming (alloc.h). */
#include "base/alloc.h"

#ifdef __GLIBC__
#include <malloc.h>
#endif
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/fault.h"
#include "base/macros.h"

void *sk_malloc(size_t n)
{
    if (sk_fault_hit(SK_FAULT_ALLOC))
        return NULL;
    return malloc(n ? n : 1);
}

void *sk_calloc(size_t count, size_t size)
{
    if (sk_fault_hit(SK_FAULT_ALLOC))
        return NULL;
    return calloc(count ? count : 1, size ? size : 1);
}

void *sk_realloc(void *p, size_t n)
{
    if (sk_fault_hit(SK_FAULT_ALLOC))
        return NULL;
    return realloc(p, n ? n : 1);
}

void sk_free(void *p) { free(p); }

void *sk_malloc_aligned(size_t align, size_t n)
{
    void *p = NULL;
    if (sk_fault_hit(SK_FAULT_ALLOC) || posix_memalign(&p, align, n ? n : 1))
        return NULL;
    return p;
}

char *sk_strndup(const char *s, size_t n)
{
    char *d = sk_malloc(n + 1);
    if (!d)
        return NULL;
    memcpy(d, s, n);
    d[n] = '\0';
    return d;
}

char *sk_strdup(const char *s) { return sk_strndup(s, strlen(s)); }

char *sk_asprintf(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0)
        return NULL;
    char *s = sk_malloc((size_t)n + 1);
    if (!s)
        return NULL;
    va_start(ap, fmt);
    vsnprintf(s, (size_t)n + 1, fmt, ap);
    va_end(ap);
    return s;
}

void sk_release_free_memory(void)
{
#ifdef __GLIBC__
    malloc_trim(0);
#endif
}

int sk_release_slack_memory(void)
{
    sk_memstats m;
    sk_memory_stats(&m);
    if (m.heap_used == 0 || m.rss <= m.heap_used ||
        m.rss - m.heap_used <= SK_MAX((uint64_t)SK_SLACK_MIN, m.heap_used / 2))
        return 0;
    sk_release_free_memory();
    return 1;
}

void sk_malloc_tune(void)
{
#ifdef __GLIBC__
    /* Setting it also stops glibc's dynamic adjustment of it. */
    mallopt(M_MMAP_THRESHOLD, (int)SK_MMAP_MIN);
    mallopt(M_TRIM_THRESHOLD, (int)SK_MMAP_MIN);
#endif
}

void sk_memory_stats(sk_memstats *out)
{
    memset(out, 0, sizeof *out);
#if defined(__GLIBC__) && (__GLIBC__ > 2 || __GLIBC_MINOR__ >= 33)
    struct mallinfo2 mi = mallinfo2();
    out->heap_used = (uint64_t)mi.uordblks + mi.hblkhd;
    out->heap_held = (uint64_t)mi.arena + mi.hblkhd;
#endif
    FILE *f = fopen("/proc/self/statm", "r");
    if (!f)
        return;
    unsigned long long size = 0, resident = 0;
    long page = sysconf(_SC_PAGESIZE);
    if (fscanf(f, "%llu %llu", &size, &resident) == 2 && page > 0)
        out->rss = (uint64_t)resident * (uint64_t)page;
    fclose(f);
}
