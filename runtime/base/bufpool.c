/* Size-classed reuse of freed buffers: see bufpool.h. */
#include "base/bufpool.h"

#include <string.h>

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#define POISON(p, n) ASAN_POISON_MEMORY_REGION(p, n)
#define UNPOISON(p, n) ASAN_UNPOISON_MEMORY_REGION(p, n)
#else
#define POISON(p, n) ((void)(p), (void)(n))
#define UNPOISON(p, n) ((void)(p), (void)(n))
#endif

#define MIN_SIZE ((size_t)1 << SK_POOL_MIN_SHIFT)

void sk_bufpool_init(sk_bufpool *p, uint64_t limit)
{
    memset(p, 0, sizeof *p);
    p->limit = limit;
}

static size_t class_size(int c)
{
    size_t base = MIN_SIZE << (c / 8);
    return base + (size_t)(c % 8) * (base / 8);
}

/* The smallest class that holds n bytes, or -1 above the largest. */
static int class_for(size_t n)
{
    if (n <= MIN_SIZE)
        return 0;
    int k = 63 - __builtin_clzll((unsigned long long)n);
    size_t base = (size_t)1 << k, step = base / 8;
    int c = (k - SK_POOL_MIN_SHIFT) * 8 + (int)((n - base + step - 1) / step);
    return c < SK_POOL_CLASSES ? c : -1;
}

/* The class of size n, or -1 if none is exactly n. */
static int class_of(size_t n)
{
    int c = class_for(n);
    return c >= 0 && class_size(c) == n ? c : -1;
}

size_t sk_bufpool_size(size_t n)
{
    int c = class_for(n);
    return c < 0 ? n : class_size(c);
}

/* Free idle buffers, the largest first, until live + idle + want fits the
 * limit or none is left. */
static void make_room(sk_bufpool *p, uint64_t live, uint64_t want)
{
    for (int c = SK_POOL_CLASSES - 1; c >= 0 && p->idle &&
                                      live + p->idle + want > p->limit;
         c--) {
        while (p->cls[c].n && live + p->idle + want > p->limit) {
            void *b = p->cls[c].v[--p->cls[c].n];
            UNPOISON(b, class_size(c));
            sk_free(b);
            p->idle -= class_size(c);
        }
    }
}

void sk_bufpool_clear(sk_bufpool *p)
{
    for (int c = 0; c < SK_POOL_CLASSES; c++) {
        for (size_t i = 0; i < p->cls[c].n; i++) {
            UNPOISON(p->cls[c].v[i], class_size(c));
            sk_free(p->cls[c].v[i]);
        }
        sk_free(p->cls[c].v);
        p->cls[c].v = NULL;
        p->cls[c].n = p->cls[c].cap = 0;
    }
    p->idle = 0;
}

void sk_bufpool_release(sk_bufpool *p, skippr_buf *b, uint64_t live)
{
    uint8_t *d = b->data;
    size_t cap = b->cap;
    b->data = NULL;
    b->len = b->cap = 0;
    if (!d)
        return;
    int c = class_of(cap);
    if (c < 0 || live + p->idle + cap > p->limit ||
        skippr_array_grow(&p->cls[c].v, p->cls[c].n, &p->cls[c].cap,
                          sizeof *p->cls[c].v, 16)) {
        sk_free(d);
        return;
    }
    POISON(d, cap);
    p->cls[c].v[p->cls[c].n++] = d;
    p->idle += cap;
}

int sk_bufpool_reserve(sk_bufpool *p, skippr_buf *b, size_t cap, uint64_t live)
{
    if (cap > b->max)
        return SKIPPR_RANGE;
    if (cap <= b->cap)
        return SKIPPR_OK;
    size_t size = sk_bufpool_size(cap);
    if (size > b->max)
        size = cap;
    int c = class_of(size);
    uint8_t *d = NULL;
    if (c >= 0 && p->cls[c].n) {
        d = p->cls[c].v[--p->cls[c].n];
        p->idle -= size;
        UNPOISON(d, size);
        p->reused++;
    } else {
        make_room(p, live + b->cap, size);
        if (!(d = sk_malloc(size)))
            return SKIPPR_NOMEM;
        p->fresh++;
    }
    if (b->len)
        memcpy(d, b->data, b->len);
    skippr_buf old = *b;
    b->data = d;
    b->cap = size;
    sk_bufpool_release(p, &old, live + size);
    return SKIPPR_OK;
}
