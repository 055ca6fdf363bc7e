/* libFuzzer target: the conversions (convert.c).
 *
 * The first input byte picks the direction. json -> csv: the data is
 * framed as JSON; every valid record that is an object must learn and
 * convert, and anything else must be refused, never crash. csv -> jsonl:
 * the data is framed as CSV; each accepted row that is valid UTF-8 must
 * convert to one line that jansson parses as an object with as many
 * members as the header has distinct-made names.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "format/convert.h"
#include "format/csvpeek.h"
#include "format/json.h"

static void json_to_csv(const uint8_t *d, size_t n)
{
    sk_conv *c = sk_conv_new(SK_CONV_JSON_CSV, ',');
    skippr_buf out;
    skippr_buf_init(&out, (size_t)1 << 26);
    const char *why;
    for (int pass = 0; pass < 2; pass++) {
        sk_json_framer f;
        sk_json_framer_init(&f);
        size_t pos = 0;
        sk_json_record r;
        if (pass == 1 && sk_conv_begin(c, &out))
            abort();
        for (;;) {
            sk_json_rc rc = sk_json_next(&f, NULL, d, n, &pos, 1, &r);
            if (rc == SK_JSON_END)
                break;
            if (rc != SK_JSON_RECORD)
                continue;
            int is_obj = d[r.start] == '{';
            const uint8_t *rec = d + r.start;
            size_t len = r.end - r.start;
            int lrc = pass == 0 ? sk_conv_learn(c, rec, len, &why)
                                : sk_conv_record(c, rec, len, &out, &why);
            if (is_obj ? lrc != SKIPPR_OK : lrc != SKIPPR_CORRUPT)
                abort();
        }
    }
    skippr_buf_free(&out);
    sk_conv_free(c);
}

static void csv_to_jsonl(const uint8_t *d, size_t n)
{
    sk_conv *c = sk_conv_new(SK_CONV_CSV_JSONL, ',');
    sk_csv_framer f;
    sk_csv_framer_init(&f, ',');
    skippr_buf out;
    skippr_buf_init(&out, (size_t)1 << 26);
    size_t pos = 0, ncols = 0;
    sk_csv_record r;
    const char *why;
    for (;;) {
        sk_csv_rc rc = sk_csv_next(&f, NULL, 0, d, n, &pos, 1, &r);
        if (rc == SK_CSV_END || rc == SK_CSV_NOMEM)
            break;
        if (rc == SK_CSV_ERROR)
            continue;
        const uint8_t *row = d + r.start;
        size_t len = r.end - r.start;
        if (!sk_utf8_valid(row, len)) {
            if (rc == SK_CSV_HEADER)
                break; /* every row of the unit is dead-lettered */
            continue;  /* dead-lettered at ingest */
        }
        skippr_buf_reset(&out);
        int crc = sk_conv_record(c, row, len, &out, &why);
        if (crc)
            abort();
        if (rc == SK_CSV_HEADER) {
            if (out.len != 0)
                abort();
            ncols = f.hdr.ncols;
            /* jansson reads no NUL in a member name back, though the
             * JSON (\u0000) is valid: check only NUL-free headers. */
            if (memchr(row, 0, len))
                break;
            continue;
        }
        json_error_t err;
        json_t *j = json_loadb((const char *)out.data, out.len,
                               JSON_ALLOW_NUL, &err);
        if (!j || !json_is_object(j) || json_object_size(j) != ncols)
            abort();
        json_decref(j);
    }
    skippr_buf_free(&out);
    sk_csv_framer_free(&f);
    sk_conv_free(c);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    if (data[0] & 1)
        csv_to_jsonl(data + 1, size - 1);
    else
        json_to_csv(data + 1, size - 1);
    return 0;
}
