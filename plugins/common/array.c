/* The plugins' growable arrays: see array.h. */
#include "array.h"

#include <stdint.h>
#include <stdlib.h>

#include <skippr/plugin.h>

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
