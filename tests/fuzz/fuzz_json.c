/* libFuzzer target: the JSON framer and peeker (json.c), differential
 * against jansson.
 *
 * Checked on every input:
 * - spans stay inside the buffer, come in order and never overlap, and
 *   every non-whitespace byte lies in a record or an error span;
 * - every record the framer accepts, jansson parses too (unless jansson
 *   refuses a number only for its size), and each peeked path (a, b.c, d)
 *   has jansson's type; a peeked string decodes to jansson's bytes;
 * - input that jansson parses as one value that is not an array is one
 *   record to the framer, spanning exactly that value;
 * - fed in two parts (a prefix not final, then the whole), the framer
 *   gives the same spans as on the whole at once.
 */
#include <jansson.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "format/json.h"

#define MAX_RECS 4096

typedef struct span {
    size_t start, end;
    int rc;
} span;

static const char *const paths[] = {"a", "b.c", "d"};
static sk_peek_spec *spec;

static int ws(uint8_t c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

/* A jansson error that is about its own limits, not JSON's grammar: a
 * number's size, or a \u0000 in an object key (which jansson cannot
 * store even with JSON_ALLOW_NUL). */
static int size_only(const json_error_t *e)
{
    return strstr(e->text, "too big") || strstr(e->text, "overflow") ||
           strstr(e->text, "NUL byte in object key");
}

static json_t *path_get(json_t *root, size_t i)
{
    if (!json_is_object(root))
        return NULL;
    if (i == 1) {
        json_t *b = json_object_get(root, "b");
        return json_is_object(b) ? json_object_get(b, "c") : NULL;
    }
    return json_object_get(root, i == 0 ? "a" : "d");
}

static int same_type(const sk_json_value *v, const json_t *j)
{
    switch (v->type) {
    case SK_JSON_NONE: return j == NULL;
    case SK_JSON_STRING: return json_is_string(j);
    case SK_JSON_NUMBER: return json_is_number(j);
    case SK_JSON_TRUE: return json_is_true(j);
    case SK_JSON_FALSE: return json_is_false(j);
    case SK_JSON_NULL: return json_is_null(j);
    case SK_JSON_OBJECT: return json_is_object(j);
    case SK_JSON_ARRAY: return json_is_array(j);
    }
    return 0;
}

/* The record [r.start, r.end) against jansson. */
static void check_record(const uint8_t *d, const sk_json_record *r)
{
    json_error_t e;
    size_t n = r->end - r->start;
    json_t *j = json_loadb((const char *)d + r->start, n,
                           JSON_DECODE_ANY | JSON_ALLOW_NUL |
                               JSON_REJECT_DUPLICATES,
                           &e);
    if (!j) {
        if (size_only(&e))
            return;
        if (!strstr(e.text, "duplicate"))
            abort(); /* accepted by the framer, refused by jansson */
        j = json_loadb((const char *)d + r->start, n,
                       JSON_DECODE_ANY | JSON_ALLOW_NUL, &e);
        if (!j && !size_only(&e))
            abort();
        json_decref(j);
        return; /* with duplicate names, which value wins may differ */
    }
    for (size_t i = 0; i < 3; i++) {
        const sk_json_value *v = &r->values[i];
        json_t *jv = path_get(j, i);
        if (!same_type(v, jv))
            abort();
        if (v->type != SK_JSON_NONE &&
            (v->off < r->start || v->off + v->len > r->end))
            abort();
        if (v->type == SK_JSON_STRING) {
            uint8_t *out = malloc(v->len + 1);
            if (!out)
                abort();
            size_t k = v->has_escapes
                           ? sk_json_unescape(d + v->off, v->len, out)
                           : (memcpy(out, d + v->off, v->len), v->len);
            if (k != json_string_length(jv) ||
                memcmp(out, json_string_value(jv), k) != 0)
                abort();
            free(out);
        }
    }
    json_decref(j);
}

static size_t frame(const uint8_t *d, size_t n, size_t cut, span *out,
                    int differential)
{
    sk_json_framer f;
    sk_json_framer_init(&f);
    size_t pos = 0, k = 0;
    sk_json_record r;
    for (int phase = cut < n ? 0 : 1; phase < 2; phase++) {
        size_t len = phase == 0 ? cut : n;
        for (;;) {
            size_t before = pos;
            sk_json_rc rc = sk_json_next(&f, spec, d, len, &pos, phase == 1,
                                         &r);
            if (rc == SK_JSON_END || rc == SK_JSON_NEED_MORE) {
                if (rc == SK_JSON_NEED_MORE)
                    pos = r.start;
                if (rc == SK_JSON_END && phase == 1)
                    for (size_t i = before; i < n; i++)
                        if (!ws(d[i]) && d[i] != ']' && d[i] != ',' && d[i] != '[')
                            abort(); /* bytes in no span */
                break;
            }
            if (r.start > r.end || r.end > len || pos > len || pos < r.end)
                abort();
            if (k > 0 && r.start < out[k - 1].end)
                abort();
            if (rc == SK_JSON_RECORD && differential)
                check_record(d, &r);
            if (k < MAX_RECS)
                out[k++] = (span){r.start, r.end, rc};
        }
    }
    return k;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!spec && !(spec = sk_peek_spec_new(paths, 3)))
        abort();
    if (size < 1)
        return 0;
    size_t cut = data[0] % 8 == 0 ? (size - 1) / 2 : size;
    const uint8_t *d = data + 1;
    size_t n = size - 1;
    static span a[MAX_RECS], b[MAX_RECS];
    size_t na = frame(d, n, n, a, 1);
    if (cut < n) {
        size_t nb = frame(d, n, cut, b, 0);
        if (na != nb || memcmp(a, b, na * sizeof *a) != 0)
            abort();
    }
    /* One value that is not an array: one record, exactly it. */
    json_error_t e;
    json_t *j = json_loadb((const char *)d, n, JSON_DECODE_ANY | JSON_ALLOW_NUL,
                           &e);
    /* (jansson stops at a NUL byte outside strings; the framer does not) */
    if (j && !json_is_array(j) && !memchr(d, 0, n)) {
        size_t s = 0, t = n;
        while (s < n && ws(d[s]))
            s++;
        while (t > s && ws(d[t - 1]))
            t--;
        if (sk_json_skip_bom(d, n) == 0 &&
            (na != 1 || a[0].rc != SK_JSON_RECORD || a[0].start != s ||
             a[0].end != t))
            abort();
    }
    json_decref(j);
    return 0;
}
