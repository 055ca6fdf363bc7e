/* JSON text helpers outside the scanner (jsontext.c): a string's escapes
 * decoded and a record's insignificant whitespace removed. */
#ifndef SK_JSONTEXT_H
#define SK_JSONTEXT_H

#include <stddef.h>
#include <stdint.h>

/* Copy the JSON text in[0..n) to out (n bytes of room) without the
 * whitespace between tokens (space, tab, CR, LF outside strings); strings
 * are copied as they are. Returns the bytes written. The input is a framed
 * record: a string left open runs to the end unchanged. */
size_t sk_json_compact(const uint8_t *in, size_t n, uint8_t *out);

/* Decode the raw text of a JSON string (without quotes) into out, which must
 * hold at least len bytes (decoding never grows the text). Returns the
 * decoded length. The input must already be validated by the framer. */
size_t sk_json_unescape(const uint8_t *raw, size_t len, uint8_t *out);

#endif
