/* JSON text helpers outside the scanner: a string's escapes decoded
 * (sk_json_unescape) and a record's insignificant whitespace removed
 * (sk_json_compact, for multiline_records: compact).
 */
#include "format/jsontext.h"

#include <stdlib.h>
#include <string.h>

#include "format/jsonhex.h"

static void put_utf8(uint8_t **o, unsigned long cp)
{
    uint8_t *p = *o;
    if (cp < 0x80) {
        *p++ = (uint8_t)cp;
    } else if (cp < 0x800) {
        *p++ = (uint8_t)(0xC0 | (cp >> 6));
        *p++ = (uint8_t)(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
        *p++ = (uint8_t)(0xE0 | (cp >> 12));
        *p++ = (uint8_t)(0x80 | ((cp >> 6) & 0x3F));
        *p++ = (uint8_t)(0x80 | (cp & 0x3F));
    } else {
        *p++ = (uint8_t)(0xF0 | (cp >> 18));
        *p++ = (uint8_t)(0x80 | ((cp >> 12) & 0x3F));
        *p++ = (uint8_t)(0x80 | ((cp >> 6) & 0x3F));
        *p++ = (uint8_t)(0x80 | (cp & 0x3F));
    }
    *o = p;
}

size_t sk_json_unescape(const uint8_t *raw, size_t len, uint8_t *out)
{
    const uint8_t *p = raw, *end = raw + len;
    uint8_t *o = out;
    while (p < end) {
        if (*p != '\\' || p + 1 >= end) {
            *o++ = *p++;
            continue;
        }
        uint8_t e = p[1];
        p += 2;
        switch (e) {
        case 'b': *o++ = '\b'; break;
        case 'f': *o++ = '\f'; break;
        case 'n': *o++ = '\n'; break;
        case 'r': *o++ = '\r'; break;
        case 't': *o++ = '\t'; break;
        case 'u': {
            if (end - p < 4)
                return (size_t)(o - out);
            long u = hex4(p);
            p += 4;
            if (u < 0)
                u = 0xFFFD;
            if (u >= 0xD800 && u <= 0xDBFF && end - p >= 6 && p[0] == '\\' &&
                p[1] == 'u') {
                long lo = hex4(p + 2);
                if (lo >= 0xDC00 && lo <= 0xDFFF) {
                    u = 0x10000 + ((u - 0xD800) << 10) + (lo - 0xDC00);
                    p += 6;
                }
            }
            put_utf8(&o, (unsigned long)u);
            break;
        }
        default:
            *o++ = e; /* \" \\ \/ */
        }
    }
    return (size_t)(o - out);
}

size_t sk_json_compact(const uint8_t *in, size_t n, uint8_t *out)
{
    size_t k = 0;
    int in_str = 0, esc = 0;
    for (size_t i = 0; i < n; i++) {
        uint8_t c = in[i];
        if (in_str) {
            if (esc)
                esc = 0;
            else if (c == '\\')
                esc = 1;
            else if (c == '"')
                in_str = 0;
        } else if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
            continue;
        } else if (c == '"') {
            in_str = 1;
        }
        out[k++] = c;
    }
    return k;
}
