/* The engine's byte buffer (buf.c). */
#ifndef SK_BUF_H
#define SK_BUF_H

#include <stddef.h>
#include <stdint.h>

#include <skippr/plugin.h> /* SKIPPR_PRINTF */

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

#endif
