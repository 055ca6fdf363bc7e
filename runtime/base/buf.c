/* The engine's bounded byte buffer (buf.h). */
#include "base/buf.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "base/alloc.h"
#include "base/macros.h"

void sk_buf_init(sk_buf *b, size_t max)
{
    b->data = NULL;
    b->len = 0;
    b->cap = 0;
    b->max = max;
}

int sk_buf_reserve(sk_buf *b, size_t extra)
{
    if (extra > b->max || b->len > b->max - extra)
        return SKIPPR_RANGE;
    size_t need = b->len + extra;
    if (need <= b->cap)
        return SKIPPR_OK;
    size_t ncap = b->cap ? b->cap : 256;
    while (ncap < need)
        ncap = ncap > SIZE_MAX / 2 ? need : ncap * 2;
    if (ncap > b->max)
        ncap = b->max;
    uint8_t *p = sk_realloc(b->data, ncap);
    if (!p)
        return SKIPPR_NOMEM;
    b->data = p;
    b->cap = ncap;
    return SKIPPR_OK;
}

int sk_buf_reserve_exact(sk_buf *b, size_t cap)
{
    if (cap > b->max)
        return SKIPPR_RANGE;
    if (cap <= b->cap)
        return SKIPPR_OK;
    uint8_t *p = sk_realloc(b->data, cap);
    if (!p)
        return SKIPPR_NOMEM;
    b->data = p;
    b->cap = cap;
    return SKIPPR_OK;
}

int sk_buf_append(sk_buf *b, const void *p, size_t n)
{
    int rc = sk_buf_reserve(b, n);
    if (rc)
        return rc;
    if (n)
        memcpy(b->data + b->len, p, n);
    b->len += n;
    return SKIPPR_OK;
}

int sk_buf_putc(sk_buf *b, uint8_t c) { return sk_buf_append(b, &c, 1); }

int sk_buf_printf(sk_buf *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0)
        return SKIPPR_INVAL;
    int rc = sk_buf_reserve(b, (size_t)n + 1);
    if (rc)
        return rc;
    va_start(ap, fmt);
    vsnprintf((char *)b->data + b->len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    b->len += (size_t)n;
    return SKIPPR_OK;
}

void sk_buf_free(sk_buf *b)
{
    sk_free(b->data);
    b->data = NULL;
    b->len = b->cap = 0;
}
