/* Growable arrays for plugins (array.c). Plugin-side code: it uses only
 * the C library and the public ABI. (Byte buffers are the SDK's
 * skippr_buf, include/skippr/buf.h.) */
#ifndef SKIPPR_ARRAY_H
#define SKIPPR_ARRAY_H

#include <stddef.h>

/* Room for one more element in *arrp (an array of len elements of elem
 * bytes, cap allocated): doubled when full, first when empty. arrp is the
 * address of the array pointer (T **). SKIPPR_OK or SKIPPR_NOMEM; the
 * array is untouched on failure. */
int skippr_array_grow(void *arrp, size_t len, size_t *cap, size_t elem,
                      size_t first);

#endif
