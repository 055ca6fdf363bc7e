/* Key segments: values escaped Hive-style and bounded to SK_SEGMENT_MAX
 * bytes with a hash that keeps long values apart (route.h,
 * ../shared/DESIGN.md's escaping rules). */
#include "route/escape.h"

#include <stdio.h>
#include <string.h>

#include "format/json.h" /* sk_utf8_valid */

static const uint8_t must_escape[256] = {
    [0x00] = 1, [0x01] = 1, [0x02] = 1, [0x03] = 1, [0x04] = 1, [0x05] = 1,
    [0x06] = 1, [0x07] = 1, [0x08] = 1, [0x09] = 1, [0x0A] = 1, [0x0B] = 1,
    [0x0C] = 1, [0x0D] = 1, [0x0E] = 1, [0x0F] = 1, [0x10] = 1, [0x11] = 1,
    [0x12] = 1, [0x13] = 1, [0x14] = 1, [0x15] = 1, [0x16] = 1, [0x17] = 1,
    [0x18] = 1, [0x19] = 1, [0x1A] = 1, [0x1B] = 1, [0x1C] = 1, [0x1D] = 1,
    [0x1E] = 1, [0x1F] = 1, [0x7F] = 1, ['"'] = 1,  ['#'] = 1,  ['%'] = 1,
    ['\''] = 1, ['*'] = 1,  ['/'] = 1,  [':'] = 1,  ['='] = 1,  ['?'] = 1,
    ['\\'] = 1, ['{'] = 1,  ['['] = 1,  [']'] = 1,  ['^'] = 1,
};

static int utf8_len_at(const uint8_t *p, const uint8_t *end)
{
    /* Reuses the JSON validator's rules for one sequence. */
    size_t avail = (size_t)(end - p);
    int n = p[0] < 0xC0 ? 0 : p[0] < 0xE0 ? 2 : p[0] < 0xF0 ? 3 : 4;
    if (n == 0 || (size_t)n > avail || !sk_utf8_valid(p, (size_t)n))
        return 0;
    return n;
}

/* Escape into out; stop before exceeding limit bytes. Returns how many input
 * bytes were consumed; *written is what was appended. */
static size_t escape_bounded(uint8_t *out, size_t limit, const uint8_t *v,
                             size_t n, size_t *written)
{
    static const char hex[] = "0123456789ABCDEF";
    size_t i = 0, o = 0;
    while (i < n) {
        uint8_t c = v[i];
        if (c >= 0x20 && c < 0x80 && !must_escape[c]) {
            /* Plain ASCII: the common case, one byte at a time. */
            if (o + 1 > limit)
                break;
            out[o++] = c;
            i++;
            continue;
        }
        int seq = 1;
        int esc = must_escape[c];
        if (c >= 0x80) {
            seq = utf8_len_at(v + i, v + n);
            if (seq == 0) {
                seq = 1;
                esc = 1;
            }
        }
        size_t need = esc ? 3 : (size_t)seq;
        if (o + need > limit)
            break;
        if (esc) {
            out[o++] = '%';
            out[o++] = (uint8_t)hex[c >> 4];
            out[o++] = (uint8_t)hex[c & 15];
        } else {
            memcpy(out + o, v + i, (size_t)seq);
            o += (size_t)seq;
        }
        i += (size_t)seq;
    }
    *written = o;
    return i;
}

int sk_escape_append(skippr_buf *out, const uint8_t *v, size_t n)
{
    if (n == 0)
        return SKIPPR_OK; /* out->data may still be NULL */
    if (n > out->max / 3)
        return SKIPPR_RANGE;
    int rc = skippr_buf_reserve(out, 3 * n);
    if (rc)
        return rc;
    size_t w;
    escape_bounded(out->data + out->len, 3 * n, v, n, &w);
    out->len += w;
    return SKIPPR_OK;
}

int sk_segment_append(skippr_buf *out, const char *head, const uint8_t *v,
                      size_t n)
{
    size_t hl = strlen(head);
    if (hl + 20 > SK_SEGMENT_MAX)
        return SKIPPR_RANGE;
    int rc = skippr_buf_reserve(out, SK_SEGMENT_MAX);
    if (rc)
        return rc;
    memcpy(out->data + out->len, head, hl);
    uint8_t *dst = out->data + out->len + hl;
    size_t room = SK_SEGMENT_MAX - hl, w;
    size_t used = escape_bounded(dst, room, v, n, &w);
    if (used < n) {
        /* Too long: keep a prefix and make it unique with a hash. */
        used = escape_bounded(dst, room - 17, v, n, &w);
        snprintf((char *)dst + w, 18, "~%016llx",
                 (unsigned long long)sk_hash64(v, n));
        w += 17;
    }
    out->len += hl + w;
    return SKIPPR_OK;
}
