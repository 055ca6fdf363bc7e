/* Private to format/'s JSON files (json.c, jsontext.c): the hex digits of
 * a \u escape. Not included by json.h, so its short names stay here. */
#ifndef SK_JSONHEX_H
#define SK_JSONHEX_H

#include <stdint.h>

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
