/* The plugins' growable buffer: see growbuf.h. */
#include "growbuf.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <skippr/plugin.h>

int skippr_buf_reserve(skippr_buf *b, size_t n)
{
    if ((b->max && n > b->max - b->n) || n > SIZE_MAX / 2 - b->n)
        return SKIPPR_RANGE;
    if (b->n + n + 1 <= b->cap)
        return SKIPPR_OK;
    size_t nc = b->cap ? b->cap : 4096;
    while (nc < b->n + n + 1)
        nc *= 2;
    char *q = realloc(b->p, nc);
    if (!q)
        return SKIPPR_NOMEM;
    b->p = q;
    b->cap = nc;
    return SKIPPR_OK;
}

int skippr_buf_put(skippr_buf *b, const void *d, size_t n)
{
    int rc = skippr_buf_reserve(b, n);
    if (rc)
        return rc;
    if (n)
        memcpy(b->p + b->n, d, n);
    b->n += n;
    b->p[b->n] = '\0';
    return SKIPPR_OK;
}

void skippr_buf_free(skippr_buf *b)
{
    free(b->p);
    b->p = NULL;
    b->n = b->cap = 0;
}

int skippr_array_grow(void *arrp, size_t len, size_t *cap, size_t elem,
                      size_t first)
{
    if (len < *cap)
        return SKIPPR_OK;
    size_t nc = *cap ? *cap * 2 : first;
    if (nc < len + 1 || nc > SIZE_MAX / elem)
        return SKIPPR_NOMEM;
    void **arr = arrp;
    void *n = realloc(*arr, nc * elem);
    if (!n)
        return SKIPPR_NOMEM;
    *arr = n;
    *cap = nc;
    return SKIPPR_OK;
}
