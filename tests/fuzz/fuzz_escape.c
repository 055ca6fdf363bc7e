/* libFuzzer target: the key escaper and router (route.c).
 *
 * Checked on every input:
 * - sk_escape_append's output holds no '/', control byte, '=' or other
 *   escaped character, every '%' starts an uppercase %XX, and decoding
 *   it gives back the input exactly;
 * - a bounded segment is at most SK_SEGMENT_MAX bytes, holds no '/' and
 *   is neither "." nor "..";
 * - a whole partition key made from the input as every field has exactly
 *   the layout's number of levels, none empty, "." or "..".
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "route/route.h"

static int hexval(uint8_t c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

static sk_router *router;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!router) {
        sk_route_config cfg = {"event_type", "detail.tenant_id", "timestamp",
                               SK_TIME_UNIT_DAY, "p_", 0, 0, NULL, 0};
        const char *err = NULL;
        if (!(router = sk_router_new(&cfg, &err)))
            abort();
    }
    skippr_buf out;
    skippr_buf_init(&out, (size_t)1 << 26);
    if (sk_escape_append(&out, data, size))
        abort();
    /* decode */
    uint8_t *dec = malloc(out.len + 1);
    if (!dec)
        abort();
    size_t k = 0;
    for (size_t i = 0; i < out.len; i++) {
        uint8_t c = out.data[i];
        if (c < 0x20 || c == 0x7f || c == '/' || c == '=' || c == '\\' ||
            c == ':' || c == '*' || c == '?' || c == '#')
            abort();
        if (c == '%') {
            if (i + 2 >= out.len)
                abort();
            int h = hexval(out.data[i + 1]), l = hexval(out.data[i + 2]);
            if (h < 0 || l < 0)
                abort();
            dec[k++] = (uint8_t)(h * 16 + l);
            i += 2;
        } else {
            dec[k++] = c;
        }
    }
    if (k != size || (size && memcmp(dec, data, size) != 0))
        abort();
    free(dec);
    /* one bounded segment */
    skippr_buf_reset(&out);
    if (sk_segment_append(&out, "p_x=", data, size))
        abort();
    if (out.len > SK_SEGMENT_MAX || memchr(out.data, '/', out.len) ||
        (out.len == 1 && out.data[0] == '.') ||
        (out.len == 2 && memcmp(out.data, "..", 2) == 0))
        abort();
    /* a whole key: the input as namespace, partition and time */
    sk_field f[3];
    for (int i = 0; i < 3; i++)
        f[i] = (sk_field){SK_FIELD_STRING, data, size};
    skippr_buf_reset(&out);
    if (sk_route_key(router, f, &out))
        abort();
    size_t levels = 1;
    for (size_t i = 0, from = 0; i <= out.len; i++) {
        if (i < out.len && out.data[i] != '/')
            continue;
        size_t n = i - from;
        if (n == 0 || (n == 1 && out.data[from] == '.') ||
            (n == 2 && memcmp(out.data + from, "..", 2) == 0))
            abort();
        if (i < out.len)
            levels++;
        from = i + 1;
    }
    if (levels != 5) /* namespace, partition, year, month, day */
        abort();
    skippr_buf_free(&out);
    return 0;
}
