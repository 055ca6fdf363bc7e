/* JSON text helpers outside the scanner (jsontext.c): a string's escapes
 * decoded and a record's insignificant whitespace removed; and the hex
 * digits of a \u escape, which the scanner reads too. */
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

static inline int hexval(uint8_t c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    c |= 0x20;
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    return -1;
}

/* Reads 4 hex digits at p; -1 if invalid. Caller checked the bounds. */
static inline long hex4(const uint8_t *p)
{
    long v = 0;
    for (int i = 0; i < 4; i++) {
        int h = hexval(p[i]);
        if (h < 0)
            return -1;
        v = (v << 4) | h;
    }
    return v;
}

#endif
