/* libFuzzer target: the CSV row scanner (csvpeek.c).
 *
 * The first input byte picks the delimiter and whether the columns are
 * configured; the rest is the data. Checked on every input:
 * - spans stay inside the buffer, rows come in order and never overlap;
 * - fed in two parts (a prefix not final, then the whole, final), the
 *   scanner reports exactly the spans it reports on the whole at once;
 * - every picked cell of a row it accepts decodes with libcsv.
 */
#include <stdint.h>
#include <stdlib.h>

#include "format/csvpeek.h"

#define MAX_ROWS 4096

typedef struct span {
    size_t start, end;
    int rc;
} span;

static const char *const paths[] = {"a", "b", "c", "d"};
static const char *const cols[] = {"a", "b", "c", "d"};

static size_t frame(const uint8_t *d, size_t n, size_t cut, uint8_t delim,
                    int fixed, span *out, sk_csv_decoder *dec)
{
    sk_csv_framer f;
    sk_csv_framer_init(&f, delim);
    if (fixed && sk_csv_framer_set_columns(&f, cols, 4, paths, 4))
        abort();
    size_t pos = 0, k = 0;
    sk_csv_record r;
    skippr_buf cell;
    skippr_buf_init(&cell, (size_t)1 << 24);
    for (int phase = cut < n ? 0 : 1; phase < 2; phase++) {
        size_t len = phase == 0 ? cut : n;
        for (;;) {
            sk_csv_rc rc = sk_csv_next(&f, paths, 4, d, len, &pos, phase == 1,
                                       &r);
            if (rc == SK_CSV_END || rc == SK_CSV_NEED_MORE)
                break;
            if (rc == SK_CSV_NOMEM)
                abort();
            if (r.start > r.end || r.end > len || pos > len || pos < r.end)
                abort();
            if (k > 0 && r.start < out[k - 1].end)
                abort();
            if (rc == SK_CSV_RECORD) {
                for (int i = 0; i < 4; i++) {
                    if (!r.cells[i].present)
                        continue;
                    if (r.cells[i].off < r.start ||
                        r.cells[i].off + r.cells[i].len > r.end)
                        abort();
                    skippr_buf_reset(&cell);
                    if (sk_csv_decode_cell(dec, d + r.cells[i].off,
                                           r.cells[i].len, &cell))
                        abort();
                }
            }
            if (k == MAX_ROWS)
                goto done;
            out[k++] = (span){r.start, r.end, rc};
        }
    }
done:
    skippr_buf_free(&cell);
    sk_csv_framer_free(&f);
    return k;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 2)
        return 0;
    static const uint8_t delims[] = {',', ';', '\t', '|'};
    uint8_t delim = delims[data[0] & 3];
    int fixed = (data[0] >> 2) & 1;
    size_t cut_pct = data[0] >> 3; /* 0..31 */
    const uint8_t *d = data + 1;
    size_t n = size - 1;
    static span whole[MAX_ROWS], parts[MAX_ROWS];
    sk_csv_decoder *dec = sk_csv_decoder_new(delim);
    if (!dec)
        abort();
    size_t a = frame(d, n, n, delim, fixed, whole, dec);
    size_t b = frame(d, n, n * cut_pct / 32, delim, fixed, parts, dec);
    if (a < MAX_ROWS && b < MAX_ROWS) {
        if (a != b)
            abort();
        for (size_t i = 0; i < a; i++)
            if (whole[i].start != parts[i].start ||
                whole[i].end != parts[i].end || whole[i].rc != parts[i].rc)
                abort();
    }
    sk_csv_decoder_free(dec);
    return 0;
}
