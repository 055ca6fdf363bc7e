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

/* The offset just past the bracket that closes the '{' or '[' at
 * buf[start], or 0 when it is not closed within buf[0..len). */
size_t sk_jsplit_end(const uint8_t *buf, size_t len, size_t start);

#endif
