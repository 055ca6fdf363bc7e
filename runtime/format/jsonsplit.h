/* Where a JSON container ends, from the structural stage's masks
 * (jsonsplit.c): strings and escapes are skipped 64 bytes a step and
 * brackets counted, so a record's end is found without parsing what is
 * inside it. Peek v2's framing builds on it.
 *
 * It does not validate: the bytes between the brackets need not be JSON
 * (a validating read checks them; a skimming one does not).
 *
 * Owns: nothing. Thread: any.
 */
#ifndef SK_JSONSPLIT_H
#define SK_JSONSPLIT_H

#include <stddef.h>
#include <stdint.h>

#include "format/jsonmask.h"

/* The offset just past the bracket that closes the '{' or '[' at
 * buf[start], or 0 when it is not closed within buf[0..len). */
size_t sk_jsplit_end(const uint8_t *buf, size_t len, size_t start);

/* Records one after another: objects separated by whitespace (lines,
 * concatenated, pretty-printed), each block's masks made once. */
typedef struct sk_jsplitter {
    const uint8_t *buf;
    size_t len;
    size_t at;       /* the current block's offset */
    unsigned bit;    /* the next bit of it to look at (64: none left) */
    int started;     /* a block has been read */
    long depth;      /* brackets open in the record being framed */
    size_t start;    /* that record's first byte */
    sk_jmask_carry carry;
    sk_jmask m;
} sk_jsplitter;

enum {
    SK_JSPLIT_RECORD = 1, /* [*start, *end) is a record */
    SK_JSPLIT_END = 0,    /* only whitespace left */
    SK_JSPLIT_CUT = -1,   /* a record starts at *start and is cut off */
    SK_JSPLIT_OTHER = -2  /* at *start is something other than an object
                           * (an array, a scalar, a stray byte): for the
                           * scanner */
};

/* Split buf[0..len) from offset from (outside any string). */
void sk_jsplit_init(sk_jsplitter *s, const uint8_t *buf, size_t len,
                    size_t from);
/* The next record: SK_JSPLIT_RECORD with its span, or what stopped it. */
int sk_jsplit_next(sk_jsplitter *s, size_t *start, size_t *end);

#endif
