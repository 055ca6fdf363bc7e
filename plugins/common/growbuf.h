/* A growable byte buffer for plugins, bounded: it never grows past max
 * bytes (0: no bound but the size of memory), and always keeps a NUL
 * after its bytes, so text in it is a C string. Plugin-side code: it uses
 * only the public ABI.
 *
 * A zeroed skippr_buf is empty and valid; the buffer owns p, which
 * skippr_buf_free() releases. Not thread-safe: one owner at a time.
 */
#ifndef SKIPPR_GROWBUF_H
#define SKIPPR_GROWBUF_H

#include <stddef.h>

typedef struct skippr_buf {
    char *p;      /* n bytes, then a NUL; NULL while empty */
    size_t n;     /* bytes held */
    size_t cap;   /* bytes allocated */
    size_t max;   /* bound on n; 0: none */
} skippr_buf;

/* Append d[0..n). SKIPPR_OK; SKIPPR_RANGE past max (nothing appended);
 * SKIPPR_NOMEM when memory runs out. */
int skippr_buf_put(skippr_buf *b, const void *d, size_t n);

/* Room for n more bytes without another allocation. Same statuses. */
int skippr_buf_reserve(skippr_buf *b, size_t n);

/* Release the bytes; b is then empty, its max kept. */
void skippr_buf_free(skippr_buf *b);

/* Room for one more element in *arrp (an array of len elements of elem
 * bytes, cap allocated): doubled when full, first when empty. arrp is the
 * address of the array pointer (T **). SKIPPR_OK or SKIPPR_NOMEM; the
 * array is untouched on failure. */
int skippr_array_grow(void *arrp, size_t len, size_t *cap, size_t elem,
                      size_t first);

#endif
