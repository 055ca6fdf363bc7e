/* A growable byte buffer with a bound, one type for the engine and every
 * plugin: appending past max fails with SKIPPR_RANGE rather than growing
 * without bound (curl's dynbuf rule), and running out of memory fails
 * with SKIPPR_NOMEM, leaving the buffer as it was.
 *
 * Part of the SDK, not of the binary ABI: header-only, so a plugin and the
 * engine compile the same code and no buffer crosses the plugin boundary.
 * The engine defines SKIPPR_BUF_REALLOC and SKIPPR_BUF_FREE (its
 * allocator, which tests make fail on the Nth call) before including it.
 *
 * A zeroed skippr_buf is empty, valid and unbounded (max 0). The buffer
 * owns data, which skippr_buf_free() releases. Its bytes are not
 * NUL-ended; skippr_buf_cstr() ends them for text. Not thread-safe: one
 * owner at a time.
 */
#ifndef SKIPPR_BUF_H
#define SKIPPR_BUF_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <skippr/status.h>

#ifndef SKIPPR_BUF_REALLOC
#define SKIPPR_BUF_REALLOC realloc
#endif
#ifndef SKIPPR_BUF_FREE
#define SKIPPR_BUF_FREE free
#endif

typedef struct skippr_buf {
    uint8_t *data;
    size_t len; /* bytes held */
    size_t cap; /* bytes allocated: at most max + 1, the one more for the
                 * NUL of skippr_buf_cstr */
    size_t max; /* bound on len; 0: none but SIZE_MAX / 2 */
} skippr_buf;

/* An empty buffer bounded by max bytes (0: unbounded). */
static inline void skippr_buf_init(skippr_buf *b, size_t max)
{
    b->data = NULL;
    b->len = b->cap = 0;
    b->max = max;
}

static inline size_t skippr_buf_bound_(const skippr_buf *b)
{
    return b->max ? b->max : SIZE_MAX / 2;
}

/* The capacity to exactly cap bytes (at most the bound and one). */
static inline int skippr_buf_realloc_(skippr_buf *b, size_t cap)
{
    uint8_t *p = (uint8_t *)SKIPPR_BUF_REALLOC(b->data, cap);
    if (!p)
        return SKIPPR_NOMEM;
    b->data = p;
    b->cap = cap;
    return SKIPPR_OK;
}

/* Room for extra more bytes: the capacity doubles from 256 up to the
 * bound. SKIPPR_OK, SKIPPR_RANGE past the bound, SKIPPR_NOMEM. */
static inline int skippr_buf_reserve(skippr_buf *b, size_t extra)
{
    size_t max = skippr_buf_bound_(b);
    if (extra > max || b->len > max - extra)
        return SKIPPR_RANGE;
    size_t need = b->len + extra;
    if (need <= b->cap)
        return SKIPPR_OK;
    size_t ncap = b->cap ? b->cap : 256;
    while (ncap < need)
        ncap = ncap > SIZE_MAX / 2 ? need : ncap * 2;
    if (ncap > max)
        ncap = max + 1; /* all it may hold, and a NUL */
    return skippr_buf_realloc_(b, ncap);
}

/* Grow the capacity to exactly cap bytes (no rounding up) if it is less:
 * at most the bound and one (a body of known length and its NUL). */
static inline int skippr_buf_reserve_exact(skippr_buf *b, size_t cap)
{
    if (cap > skippr_buf_bound_(b) + 1)
        return SKIPPR_RANGE;
    if (cap <= b->cap)
        return SKIPPR_OK;
    return skippr_buf_realloc_(b, cap);
}

/* Append p[0..n). Nothing is appended on failure. */
static inline int skippr_buf_append(skippr_buf *b, const void *p, size_t n)
{
    int rc = skippr_buf_reserve(b, n);
    if (rc)
        return rc;
    if (n)
        memcpy(b->data + b->len, p, n);
    b->len += n;
    return SKIPPR_OK;
}

static inline int skippr_buf_putc(skippr_buf *b, uint8_t c)
{
    return skippr_buf_append(b, &c, 1);
}

/* Append printf's text of fmt (without its NUL). */
static inline int skippr_buf_printf(skippr_buf *b, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
static inline int skippr_buf_printf(skippr_buf *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0)
        return SKIPPR_INVAL;
    int rc = skippr_buf_reserve(b, (size_t)n + 1);
    if (rc)
        return rc;
    va_start(ap, fmt);
    vsnprintf((char *)b->data + b->len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    b->len += (size_t)n;
    return SKIPPR_OK;
}

/* The bytes as text: a NUL is written after them (not counted in len; a
 * full buffer has room for it). NULL when memory runs out. */
static inline char *skippr_buf_cstr(skippr_buf *b)
{
    if (b->len + 1 > b->cap && skippr_buf_realloc_(b, b->len + 1))
        return NULL;
    b->data[b->len] = '\0';
    return (char *)b->data;
}

static inline void skippr_buf_reset(skippr_buf *b)
{
    b->len = 0;
}

/* Release the bytes; b is then empty, its bound kept. */
static inline void skippr_buf_free(skippr_buf *b)
{
    SKIPPR_BUF_FREE(b->data);
    b->data = NULL;
    b->len = b->cap = 0;
}

/* Room for one more element in a growable array *arrp (the address of the
 * array pointer, T **: len elements of elem bytes, *cap allocated): the
 * capacity doubles when full, starts at first when empty. SKIPPR_OK or
 * SKIPPR_NOMEM; the array is untouched on failure. Allocates as the
 * buffers do (SKIPPR_BUF_REALLOC). */
static inline int skippr_array_grow(void *arrp, size_t len, size_t *cap,
                                    size_t elem, size_t first)
{
    if (len < *cap)
        return SKIPPR_OK;
    size_t nc = *cap ? *cap * 2 : first;
    if (nc < len + 1 || nc > SIZE_MAX / elem)
        return SKIPPR_NOMEM;
    void **arr = (void **)arrp;
    void *n = SKIPPR_BUF_REALLOC(*arr, nc * elem);
    if (!n)
        return SKIPPR_NOMEM;
    *arr = n;
    *cap = nc;
    return SKIPPR_OK;
}

#endif
