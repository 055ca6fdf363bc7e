/* CSV framing and peeking: csv-spectrum conformance, a differential test
 * against libcsv's parse of a whole generated corpus, errors and resync,
 * rows cut at every byte, configured columns and other delimiters. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <csv.h>
#include <jansson.h>

#include "format/csvpeek.h"
#include "testdata.h"

/* One row as decoded cells (each a NUL-terminated copy). */
typedef struct row {
    char **cells;
    size_t n;
} row;

typedef struct rows {
    row *r;
    size_t n, cap;
} rows;

static void rows_free(rows *rs)
{
    for (size_t i = 0; i < rs->n; i++) {
        for (size_t c = 0; c < rs->r[i].n; c++)
            free(rs->r[i].cells[c]);
        free(rs->r[i].cells);
    }
    free(rs->r);
    memset(rs, 0, sizeof *rs);
}

static void row_add_cell(row *r, const void *s, size_t n)
{
    r->cells = realloc(r->cells, (r->n + 1) * sizeof *r->cells);
    assert_non_null(r->cells);
    char *c = malloc(n + 1);
    assert_non_null(c);
    if (n)
        memcpy(c, s, n);
    c[n] = 0;
    r->cells[r->n++] = c;
}

static row *rows_new(rows *rs)
{
    if (rs->n == rs->cap) {
        rs->cap = rs->cap ? rs->cap * 2 : 16;
        rs->r = realloc(rs->r, rs->cap * sizeof *rs->r);
        assert_non_null(rs->r);
    }
    rs->r[rs->n] = (row){NULL, 0};
    return &rs->r[rs->n++];
}

/* ---- ours: frame everything, decode every column ------------------------- */

/* Frames buf with every header column wanted (up to 16) and decodes each
 * data row's cells. Returns the number of error rows; *header gets the
 * header's names. */
static size_t ours(const uint8_t *buf, size_t len, uint8_t delim,
                   rows *header, rows *out)
{
    /* First pass: the header's names, so that every column is a path. */
    sk_csv_framer f;
    sk_csv_framer_init(&f, delim);
    sk_csv_record rec;
    size_t pos = 0;
    assert_int_equal(sk_csv_next(&f, NULL, 0, buf, len, &pos, 1, &rec),
                     SK_CSV_HEADER);
    sk_csv_decoder *d = sk_csv_decoder_new(delim);
    assert_non_null(d);
    row *h = rows_new(header);
    /* Second pass under configured columns c0, c1, ... (all wanted): the
     * header row is then a data row too, and its cells are the names. */
    size_t ncols = f.hdr.ncols;
    assert_true(ncols <= SK_PEEK_MAX_PATHS);
    char names[SK_PEEK_MAX_PATHS][24];
    const char *paths[SK_PEEK_MAX_PATHS];
    for (size_t c = 0; c < ncols; c++) {
        snprintf(names[c], sizeof names[c], "c%zu", c);
        paths[c] = names[c];
    }
    sk_csv_framer g;
    sk_csv_framer_init(&g, delim);
    assert_int_equal(sk_csv_framer_set_columns(&g, paths, ncols, paths,
                                               ncols),
                     SKIPPR_OK);
    size_t errors = 0;
    pos = 0;
    int first = 1;
    for (;;) {
        sk_csv_rc rc = sk_csv_next(&g, paths, ncols, buf, len, &pos, 1, &rec);
        if (rc == SK_CSV_END)
            break;
        if (rc == SK_CSV_ERROR) {
            errors++;
            continue;
        }
        assert_int_equal(rc, SK_CSV_RECORD);
        row *r = first ? h : rows_new(out);
        first = 0;
        for (size_t c = 0; c < ncols; c++) {
            assert_true(rec.cells[c].present);
            skippr_buf b;
            skippr_buf_init(&b, 1 << 20);
            assert_int_equal(sk_csv_decode_cell(d, buf + rec.cells[c].off,
                                                rec.cells[c].len, &b),
                             SKIPPR_OK);
            row_add_cell(r, b.data ? (const char *)b.data : "", b.len);
            skippr_buf_free(&b);
        }
    }
    sk_csv_framer_free(&g);
    sk_csv_framer_free(&f);
    sk_csv_decoder_free(d);
    return errors;
}

/* ---- libcsv's whole-file parse ------------------------------------------- */

typedef struct lib_ctx {
    rows *rs;
    row *cur;
} lib_ctx;

static void lib_cell(void *s, size_t n, void *ud)
{
    lib_ctx *c = ud;
    if (!c->cur)
        c->cur = rows_new(c->rs);
    row_add_cell(c->cur, s ? s : "", n);
}

static void lib_row(int t, void *ud)
{
    (void)t;
    lib_ctx *c = ud;
    c->cur = NULL;
}

static int keep_spaces(unsigned char c)
{
    (void)c;
    return 0;
}

static void libcsv_rows(const uint8_t *buf, size_t len, uint8_t delim,
                        rows *out)
{
    struct csv_parser p;
    assert_int_equal(csv_init(&p, CSV_STRICT_FINI), 0);
    csv_set_delim(&p, delim);
    csv_set_space_func(&p, keep_spaces);
    lib_ctx c = {out, NULL};
    assert_int_equal(csv_parse(&p, buf, len, lib_cell, lib_row, &c), len);
    assert_int_equal(csv_fini(&p, lib_cell, lib_row, &c), 0);
    csv_free(&p);
}

static void assert_rows_equal(const rows *a, const rows *b, const char *what)
{
    if (a->n != b->n)
        fail_msg("%s: %zu rows, expected %zu", what, a->n, b->n);
    for (size_t i = 0; i < a->n; i++) {
        if (a->r[i].n != b->r[i].n)
            fail_msg("%s: row %zu has %zu cells, expected %zu", what, i,
                     a->r[i].n, b->r[i].n);
        for (size_t c = 0; c < a->r[i].n; c++)
            if (strcmp(a->r[i].cells[c], b->r[i].cells[c]) != 0)
                fail_msg("%s: row %zu cell %zu is \"%s\", expected \"%s\"",
                         what, i, c, a->r[i].cells[c], b->r[i].cells[c]);
    }
}

/* ---- csv-spectrum -------------------------------------------------------- */

static uint8_t *slurp(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        fail_msg("cannot open %s", path);
    uint8_t *b = NULL;
    size_t len = 0, cap = 0;
    for (;;) {
        if (len == cap) {
            cap = cap ? cap * 2 : 4096;
            b = realloc(b, cap);
            assert_non_null(b);
        }
        size_t got = fread(b + len, 1, cap - len, f);
        if (got == 0)
            break;
        len += got;
    }
    fclose(f);
    *n = len;
    return b;
}

/* LF -> CRLF everywhere (a copy). */
static uint8_t *to_crlf(const uint8_t *b, size_t n, size_t *out_n)
{
    uint8_t *o = malloc(2 * n + 1);
    assert_non_null(o);
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        if (b[i] == '\n')
            o[k++] = '\r';
        o[k++] = b[i];
    }
    *out_n = k;
    return o;
}

/* "a\r\nb" -> "a\nb" when crlf is 0. */
static void expected_text(const char *v, int crlf, char *out, size_t cap)
{
    size_t k = 0;
    for (size_t i = 0; v[i] && k + 1 < cap; i++) {
        if (!crlf && v[i] == '\r' && v[i + 1] == '\n')
            continue;
        out[k++] = v[i];
    }
    out[k] = 0;
}

static void spectrum_case(const char *name, int crlf)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/csv-spectrum/csvs/%s.csv",
             SKIPPR_TESTDATA, name);
    size_t n;
    uint8_t *raw = slurp(path, &n);
    uint8_t *data = raw;
    if (crlf) {
        data = to_crlf(raw, n, &n);
        free(raw);
    }
    snprintf(path, sizeof path, "%s/csv-spectrum/json/%s.json",
             SKIPPR_TESTDATA, name);
    json_error_t err;
    json_t *want = json_load_file(path, 0, &err);
    if (!want)
        fail_msg("%s: %s", path, err.text);
    if (json_is_object(want)) {
        /* location_coordinates.json holds one object, not an array */
        json_t *a = json_array();
        json_array_append_new(a, want);
        want = a;
    }
    rows header = {0}, got = {0};
    assert_int_equal(ours(data, n, ',', &header, &got), 0);
    if (got.n != json_array_size(want))
        fail_msg("%s (%s): %zu rows, expected %zu", name, crlf ? "CRLF" : "LF",
                 got.n, json_array_size(want));
    for (size_t i = 0; i < got.n; i++) {
        json_t *o = json_array_get(want, i);
        assert_int_equal(json_object_size(o), header.r[0].n);
        for (size_t c = 0; c < header.r[0].n; c++) {
            json_t *v = json_object_get(o, header.r[0].cells[c]);
            if (!v)
                fail_msg("%s: no expected column %s", name,
                         header.r[0].cells[c]);
            char exp[4096];
            expected_text(json_string_value(v), crlf, exp, sizeof exp);
            /* Upstream erratum: location_coordinates.json gives the phone
             * number 1234567890, but its CSV holds 2095257564. The test
             * holds us to the CSV's bytes. */
            if (strcmp(name, "location_coordinates") == 0 &&
                strcmp(header.r[0].cells[c], "Contact Phone Number") == 0) {
                assert_string_equal(exp, "1234567890");
                snprintf(exp, sizeof exp, "%s", "2095257564");
            }
            if (strcmp(got.r[i].cells[c], exp) != 0)
                fail_msg("%s (%s) row %zu column %s: \"%s\", expected \"%s\"",
                         name, crlf ? "CRLF" : "LF", i, header.r[0].cells[c],
                         got.r[i].cells[c], exp);
        }
    }
    json_decref(want);
    rows_free(&header);
    rows_free(&got);
    free(data);
}

static void test_csv_spectrum(void **state)
{
    (void)state;
    const char *cases[] = {"comma_in_quotes", "empty", "empty_crlf",
                           "escaped_quotes", "json", "location_coordinates",
                           "newlines", "newlines_crlf", "quotes_and_newlines",
                           "simple", "simple_crlf", "utf8"};
    char dir[1024];
    snprintf(dir, sizeof dir, "%s/csv-spectrum/csvs", SKIPPR_TESTDATA);
    testdata_require(dir);
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        /* The stored *_crlf files lost their CRs to line-ending
         * normalisation, while their expected values keep "\r\n": they are
         * checked with CRLF restored, and every case also as stored. */
        int is_crlf = strstr(cases[i], "crlf") != NULL;
        spectrum_case(cases[i], is_crlf);
        spectrum_case(cases[i], 0);
    }
}

/* ---- differential -------------------------------------------------------- */

static uint64_t rng = 0x9E3779B97F4A7C15ULL;
static uint64_t rnd(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

static void gen_cell(skippr_buf *b, uint8_t delim)
{
    static const char *const bits[] = {"a", "tenant", "x y", " lead",
                                       "trail ", "caf\xc3\xa9", "1633219200",
                                       "", "2021-10-03T01:02:03Z"};
    int quoted = rnd() % 3 == 0;
    if (!quoted) {
        const char *s = bits[rnd() % 9];
        skippr_buf_append(b, s, strlen(s));
        return;
    }
    skippr_buf_putc(b, '"');
    int parts = (int)(rnd() % 4);
    for (int i = 0; i < parts; i++) {
        switch (rnd() % 6) {
        case 0: skippr_buf_append(b, "\"\"", 2); break;
        case 1: skippr_buf_putc(b, delim); break;
        case 2: skippr_buf_append(b, "\r\n", 2); break;
        case 3: skippr_buf_putc(b, '\n'); break;
        default: {
            const char *s = bits[rnd() % 9];
            skippr_buf_append(b, s, strlen(s));
        }
        }
    }
    skippr_buf_putc(b, '"');
}

static void test_differential_libcsv(void **state)
{
    (void)state;
    const uint8_t delims[] = {',', ';', '\t', '|'};
    for (size_t di = 0; di < sizeof delims; di++) {
        uint8_t delim = delims[di];
        skippr_buf b;
        skippr_buf_init(&b, 1 << 24);
        size_t ncols = 1 + rnd() % 6;
        for (size_t r = 0; r < 2000; r++) {
            for (size_t c = 0; c < ncols; c++) {
                if (c)
                    skippr_buf_putc(&b, delim);
                if (r == 0) {
                    char nm[32];
                    snprintf(nm, sizeof nm, "col%zu", c);
                    skippr_buf_append(&b, nm, strlen(nm));
                } else {
                    gen_cell(&b, delim);
                }
            }
            /* A last cell that is never empty, so no row is a blank line
             * (which neither parser takes for a row). */
            skippr_buf_putc(&b, delim);
            skippr_buf_append(&b, r == 0 ? "end" : "z", r == 0 ? 3 : 1);
            if (rnd() % 2)
                skippr_buf_append(&b, "\r\n", 2);
            else
                skippr_buf_putc(&b, '\n');
        }
        rows lib = {0}, got = {0}, header = {0};
        libcsv_rows(b.data, b.len, delim, &lib);
        assert_int_equal(ours(b.data, b.len, delim, &header, &got), 0);
        /* libcsv has the header as its first row. */
        assert_true(lib.n >= 1);
        rows lib_data = {lib.r + 1, lib.n - 1, 0};
        assert_rows_equal(&got, &lib_data, "differential");
        rows_free(&lib);
        rows_free(&got);
        rows_free(&header);
        skippr_buf_free(&b);
    }
}

/* ---- errors, resync, incremental ----------------------------------------- */

typedef struct span {
    size_t start, end;
    int kind; /* 'R' record, 'H' header, 'E' error */
} span;

static size_t frame_all(sk_csv_framer *f, const char *const *paths,
                        size_t np, const char *buf, size_t len, span *out,
                        size_t cap)
{
    size_t pos = 0, n = 0;
    sk_csv_record r;
    for (;;) {
        sk_csv_rc rc = sk_csv_next(f, paths, np, (const uint8_t *)buf, len,
                                   &pos, 1, &r);
        if (rc == SK_CSV_END)
            break;
        assert_true(n < cap);
        assert_true(rc == SK_CSV_RECORD || rc == SK_CSV_HEADER ||
                    rc == SK_CSV_ERROR);
        out[n++] = (span){r.start, r.end,
                          rc == SK_CSV_RECORD ? 'R'
                                              : rc == SK_CSV_HEADER ? 'H' : 'E'};
    }
    return n;
}

static void test_errors_and_resync(void **state)
{
    (void)state;
    const char *paths[] = {"b"};
    const char *buf = "a,b\n"           /* header */
                      "1,2\n"           /* ok */
                      "1,2,3\n"         /* too many cells */
                      "\"x\"y,2\n"      /* text after a closing quote */
                      "4,5\r\n"         /* ok, CRLF */
                      "\n\n"            /* blank lines */
                      "6,\"unclosed\n"  /* quote never closed: this line */
                      "7,8";            /* last row without terminator */
    sk_csv_framer f;
    sk_csv_framer_init(&f, ',');
    span s[16];
    size_t n = frame_all(&f, paths, 1, buf, strlen(buf), s, 16);
    const char kinds[] = "HREERER";
    assert_int_equal(n, strlen(kinds));
    for (size_t i = 0; i < n; i++)
        assert_int_equal(s[i].kind, kinds[i]);
    /* Every error span is exactly its row's bytes. */
    assert_memory_equal(buf + s[2].start, "1,2,3", s[2].end - s[2].start);
    assert_memory_equal(buf + s[3].start, "\"x\"y,2", s[3].end - s[3].start);
    assert_memory_equal(buf + s[4].start, "4,5", s[4].end - s[4].start);
    assert_memory_equal(buf + s[5].start, "6,\"unclosed",
                        s[5].end - s[5].start);
    assert_memory_equal(buf + s[6].start, "7,8", s[6].end - s[6].start);
    sk_csv_framer_free(&f);
}

/* Fed a growing prefix, the framer yields the same rows as on the whole. */
static void test_incremental(void **state)
{
    (void)state;
    const char *paths[] = {"t", "v"};
    const char *buf = "t,v\r\n"
                      "acme,\"multi\r\nline \"\"q\"\"\"\r\n"
                      "globex,\"\"\r\n"
                      ",plain\n"
                      "\"a,b\",\"\"\"\"\n";
    size_t len = strlen(buf);
    sk_csv_framer whole;
    sk_csv_framer_init(&whole, ',');
    span want[8];
    size_t nwant = frame_all(&whole, paths, 2, buf, len, want, 8);
    assert_int_equal(nwant, 5);
    sk_csv_framer_free(&whole);
    for (size_t cut = 0; cut <= len; cut++) {
        sk_csv_framer f;
        sk_csv_framer_init(&f, ',');
        size_t pos = 0, k = 0;
        sk_csv_record r;
        /* everything up to cut, not final, then the whole, final */
        for (int phase = 0; phase < 2; phase++) {
            size_t l = phase == 0 ? cut : len;
            for (;;) {
                sk_csv_rc rc = sk_csv_next(&f, paths, 2, (const uint8_t *)buf,
                                           l, &pos, phase == 1, &r);
                if (rc == SK_CSV_END || rc == SK_CSV_NEED_MORE)
                    break;
                assert_true(k < nwant);
                assert_int_equal(r.start, want[k].start);
                assert_int_equal(r.end, want[k].end);
                k++;
            }
        }
        assert_int_equal(k, nwant);
        sk_csv_framer_free(&f);
    }
}

/* Found by fuzz_csv: text after a closing quote, with the rest of the line
 * not in the buffer yet. The error span must wait for the line's end, or a
 * window boundary changes what is dead-lettered. */
static void test_fuzz_quote_text_at_window_end(void **state)
{
    (void)state;
    const char *buf = "a\n\"x\"tail continues\nb\n";
    size_t len = strlen(buf);
    sk_csv_framer f;
    sk_csv_framer_init(&f, ',');
    size_t pos = 0;
    sk_csv_record r;
    assert_int_equal(sk_csv_next(&f, NULL, 0, (const uint8_t *)buf, len,
                                 &pos, 0, &r),
                     SK_CSV_HEADER);
    size_t cut = strlen("a\n\"x\"tail");
    size_t at = pos;
    assert_int_equal(sk_csv_next(&f, NULL, 0, (const uint8_t *)buf, cut,
                                 &pos, 0, &r),
                     SK_CSV_NEED_MORE);
    assert_int_equal(pos, at);
    assert_int_equal(sk_csv_next(&f, NULL, 0, (const uint8_t *)buf, len,
                                 &pos, 1, &r),
                     SK_CSV_ERROR);
    assert_int_equal(r.end - r.start, strlen("\"x\"tail continues"));
    assert_int_equal(sk_csv_next(&f, NULL, 0, (const uint8_t *)buf, len,
                                 &pos, 1, &r),
                     SK_CSV_RECORD);
    sk_csv_framer_free(&f);
}

static void test_columns_and_delimiters(void **state)
{
    (void)state;
    /* Configured columns: no header row, every row is data. */
    const char *cols[] = {"event_type", "a;b", "tenant"};
    const char *paths[] = {"tenant", "missing"};
    sk_csv_framer f;
    sk_csv_framer_init(&f, ';');
    assert_int_equal(sk_csv_framer_set_columns(&f, cols, 3, paths, 2),
                     SKIPPR_OK);
    /* The synthesized header quotes the name with the delimiter. */
    assert_int_equal(f.hdr.row_len, strlen("event_type;\"a;b\";tenant"));
    assert_memory_equal(f.hdr.row, "event_type;\"a;b\";tenant",
                        f.hdr.row_len);
    const char *buf = "login;x;acme\n";
    size_t pos = 0;
    sk_csv_record r;
    assert_int_equal(sk_csv_next(&f, paths, 2, (const uint8_t *)buf,
                                 strlen(buf), &pos, 1, &r),
                     SK_CSV_RECORD);
    assert_true(r.cells[0].present);
    assert_false(r.cells[1].present);
    assert_memory_equal(buf + r.cells[0].off, "acme", 4);
    sk_csv_framer_free(&f);

    assert_int_equal(sk_csv_delim_parse(","), ',');
    assert_int_equal(sk_csv_delim_parse("tab"), '\t');
    assert_int_equal(sk_csv_delim_parse("\t"), '\t');
    assert_int_equal(sk_csv_delim_parse("|"), '|');
    assert_int_equal(sk_csv_delim_parse(";"), ';');
    assert_int_equal(sk_csv_delim_parse("::"), 0);

    /* Headers that differ get different identities. */
    sk_csv_framer a, b;
    sk_csv_framer_init(&a, ',');
    sk_csv_framer_init(&b, ',');
    span s[4];
    frame_all(&a, paths, 2, "tenant,x\n", 9, s, 4);
    frame_all(&b, paths, 2, "x,tenant\n", 9, s, 4);
    assert_true(a.have_header && b.have_header);
    assert_int_not_equal(a.hdr.id, b.hdr.id);
    assert_int_equal(a.hdr.col_of[0], 0);
    assert_int_equal(b.hdr.col_of[0], 1);
    sk_csv_framer_free(&a);
    sk_csv_framer_free(&b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_csv_spectrum),
        cmocka_unit_test(test_differential_libcsv),
        cmocka_unit_test(test_errors_and_resync),
        cmocka_unit_test(test_incremental),
        cmocka_unit_test(test_columns_and_delimiters),
        cmocka_unit_test(test_fuzz_quote_text_at_window_end),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
