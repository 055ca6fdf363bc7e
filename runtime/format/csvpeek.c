/* CSV framing and peeking: see csvpeek.h. */
#include "format/csvpeek.h"

#include <csv.h>
#include <string.h>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

/* ---- decoding cells with libcsv ------------------------------------------ */

struct sk_csv_decoder {
    struct csv_parser p;
    skippr_buf *out;    /* where the current call appends */
    size_t fields;  /* fields reported by this call */
    int failed;
};

static int no_space(unsigned char c)
{
    (void)c;
    return 0; /* RFC 4180: spaces are part of a cell */
}

static void *dec_realloc(void *p, size_t n) { return sk_realloc(p, n); }
static void dec_free(void *p) { sk_free(p); }

sk_csv_decoder *sk_csv_decoder_new(uint8_t delim)
{
    sk_csv_decoder *made = NULL, *d = sk_calloc(1, sizeof *d);
    /* Not CSV_STRICT: a quote inside an unquoted cell is text, as the
     * scanner takes it. CSV_STRICT_FINI: a quote that never closes fails. */
    if (d && csv_init(&d->p, CSV_STRICT_FINI) == 0) {
        csv_set_delim(&d->p, delim);
        csv_set_space_func(&d->p, no_space);
        csv_set_realloc_func(&d->p, dec_realloc);
        csv_set_free_func(&d->p, dec_free);
        made = d;
        d = NULL; /* handed to the caller */
    }
    sk_free(d); /* csv_init failed: it holds nothing */
    return made;
}

void sk_csv_decoder_free(sk_csv_decoder *d)
{
    if (!d)
        return;
    csv_free(&d->p);
    sk_free(d);
}

static void dec_field(void *s, size_t n, void *ud)
{
    sk_csv_decoder *d = ud;
    d->fields++;
    /* s may be NULL for an empty cell */
    if (d->fields == 1 && n && !d->failed && skippr_buf_append(d->out, s, n))
        d->failed = 1;
}

int sk_csv_decode_cell(sk_csv_decoder *d, const uint8_t *raw, size_t n,
                       skippr_buf *out)
{
    if (n == 0)
        return SKIPPR_OK; /* an empty cell: libcsv reports no field */
    d->out = out;
    d->fields = 0;
    d->failed = 0;
    size_t used = csv_parse(&d->p, raw, n, dec_field, NULL, d);
    int fin = csv_fini(&d->p, dec_field, NULL, d);
    if (d->failed)
        return SKIPPR_NOMEM;
    if (used != n || fin != 0 || d->fields != 1)
        return SKIPPR_CORRUPT;
    return SKIPPR_OK;
}

/* ---- the header ---------------------------------------------------------- */

static void header_clear(sk_csv_header *h)
{
    sk_free(h->row);
    sk_free(h->wanted);
    memset(h, 0, sizeof *h);
}

void sk_csv_framer_init(sk_csv_framer *f, uint8_t delim)
{
    memset(f, 0, sizeof *f);
    f->delim = delim;
}

void sk_csv_framer_free(sk_csv_framer *f)
{
    header_clear(&f->hdr);
    f->have_header = 0;
}

/* Collects a header's names: spans of one buffer. */
typedef struct name_span {
    size_t off, len;
} name_span;

typedef struct names {
    skippr_buf text;
    name_span *at;
    size_t n, cap;
    int failed;
} names;

static void names_add(names *nm, const void *s, size_t n)
{
    if (nm->failed)
        return;
    if (nm->n >= SK_CSV_MAX_COLUMNS ||
        skippr_array_grow(&nm->at, nm->n, &nm->cap, sizeof *nm->at, 16) ||
        (n && skippr_buf_append(&nm->text, s, n))) {
        nm->failed = 1;
        return;
    }
    nm->at[nm->n++] = (name_span){nm->text.len - n, n};
}

/* libcsv's field callback (s may be NULL for an empty field). */
static void name_field(void *s, size_t n, void *ud) { names_add(ud, s, n); }

static void names_free(names *nm)
{
    skippr_buf_free(&nm->text);
    sk_free(nm->at);
}

/* Maps paths to columns by name and keeps row as the header's bytes. */
static int header_build(sk_csv_header *h, const names *nm, const uint8_t *row,
                        size_t row_len, const char *const *paths,
                        size_t npaths)
{
    header_clear(h);
    h->row = sk_malloc(row_len ? row_len : 1);
    h->wanted = sk_calloc(nm->n ? nm->n : 1, 1);
    if (!h->row || !h->wanted) {
        header_clear(h);
        return SKIPPR_NOMEM;
    }
    memcpy(h->row, row, row_len);
    h->row_len = row_len;
    h->id = sk_hash64(row, row_len);
    h->ncols = nm->n;
    for (size_t i = 0; i < SK_PEEK_MAX_PATHS; i++)
        h->col_of[i] = -1;
    for (size_t i = 0; i < npaths && i < SK_PEEK_MAX_PATHS; i++) {
        size_t pl = strlen(paths[i]);
        for (size_t c = 0; c < nm->n; c++) {
            if (nm->at[c].len == pl &&
                (pl == 0 ||
                 memcmp(nm->text.data + nm->at[c].off, paths[i], pl) == 0)) {
                h->col_of[i] = (int32_t)c; /* the first such column */
                h->wanted[c] = 1;
                break;
            }
        }
    }
    return SKIPPR_OK;
}

/* Reads a header row's names with libcsv. 0, or an sk_csv_rc. */
static int header_from_row(sk_csv_framer *f, const uint8_t *row, size_t n,
                           const char *const *paths, size_t npaths,
                           const char **why)
{
    sk_csv_decoder *d = sk_csv_decoder_new(f->delim);
    if (!d)
        return SK_CSV_NOMEM;
    names nm;
    memset(&nm, 0, sizeof nm);
    skippr_buf_init(&nm.text, (size_t)1 << 30);
    size_t used = n ? csv_parse(&d->p, row, n, name_field, NULL, &nm) : 0;
    int fin = csv_fini(&d->p, name_field, NULL, &nm);
    int rc = 0;
    if (nm.failed) {
        rc = nm.n >= SK_CSV_MAX_COLUMNS ? SK_CSV_ERROR : SK_CSV_NOMEM;
        *why = "header row has more than 65536 columns";
    } else if (used != n || fin != 0 || nm.n == 0) {
        rc = SK_CSV_ERROR;
        *why = "header row is not valid CSV";
    } else if (header_build(&f->hdr, &nm, row, n, paths, npaths)) {
        rc = SK_CSV_NOMEM;
    } else {
        f->have_header = 1;
    }
    names_free(&nm);
    sk_csv_decoder_free(d);
    return rc;
}

/* Appends name as one cell of a header row, quoted if it must be. */
static int put_cell(skippr_buf *b, const char *name, uint8_t delim)
{
    size_t n = strlen(name);
    int quote = 0;
    for (size_t i = 0; i < n; i++)
        if (name[i] == '"' || name[i] == (char)delim || name[i] == '\n' ||
            name[i] == '\r')
            quote = 1;
    if (!quote)
        return skippr_buf_append(b, name, n);
    int rc = skippr_buf_putc(b, '"');
    for (size_t i = 0; i < n && !rc; i++) {
        if (name[i] == '"')
            rc = skippr_buf_putc(b, '"');
        if (!rc)
            rc = skippr_buf_putc(b, (uint8_t)name[i]);
    }
    return rc ? rc : skippr_buf_putc(b, '"');
}

int sk_csv_framer_set_columns(sk_csv_framer *f, const char *const *cols,
                              size_t n, const char *const *paths,
                              size_t npaths)
{
    if (n == 0 || n > SK_CSV_MAX_COLUMNS)
        return SKIPPR_INVAL;
    skippr_buf row;
    skippr_buf_init(&row, (size_t)1 << 30);
    names nm;
    memset(&nm, 0, sizeof nm);
    skippr_buf_init(&nm.text, (size_t)1 << 30);
    int rc = SKIPPR_OK;
    for (size_t i = 0; i < n && !rc; i++) {
        if (i)
            rc = skippr_buf_putc(&row, f->delim);
        if (!rc)
            rc = put_cell(&row, cols[i], f->delim);
        names_add(&nm, cols[i], strlen(cols[i]));
        if (nm.failed)
            rc = SKIPPR_NOMEM;
    }
    if (!rc)
        rc = header_build(&f->hdr, &nm, row.data ? row.data : (uint8_t *)"",
                          row.len, paths, npaths);
    if (!rc) {
        f->have_header = 1;
        f->fixed = 1;
    }
    names_free(&nm);
    skippr_buf_free(&row);
    return rc;
}

uint8_t sk_csv_delim_parse(const char *s)
{
    if (strcmp(s, ",") == 0 || strcmp(s, ";") == 0 || strcmp(s, "|") == 0 ||
        strcmp(s, "\t") == 0)
        return (uint8_t)s[0];
    if (strcmp(s, "tab") == 0 || strcmp(s, "\\t") == 0)
        return '\t';
    return 0;
}

/* ---- the row scanner ----------------------------------------------------- */

/* The first byte at or after p that is a quote, the delimiter, CR or LF;
 * end if none. Sixteen bytes at a time with SSE2. */
static inline const uint8_t *find_special(const uint8_t *p,
                                          const uint8_t *end, uint8_t delim)
{
#if defined(__SSE2__)
    const __m128i q = _mm_set1_epi8('"'), d = _mm_set1_epi8((char)delim),
                  cr = _mm_set1_epi8('\r'), lf = _mm_set1_epi8('\n');
    while (end - p >= 16) {
        __m128i v = _mm_loadu_si128((const __m128i *)(const void *)p);
        __m128i m = _mm_or_si128(
            _mm_or_si128(_mm_cmpeq_epi8(v, q), _mm_cmpeq_epi8(v, d)),
            _mm_or_si128(_mm_cmpeq_epi8(v, cr), _mm_cmpeq_epi8(v, lf)));
        unsigned bits = (unsigned)_mm_movemask_epi8(m);
        if (bits)
            return p + __builtin_ctz(bits);
        p += 16;
    }
#endif
    while (p < end && *p != '"' && *p != delim && *p != '\r' && *p != '\n')
        p++;
    return p;
}

/* Where a bad row's span ends and scanning resumes: the end of the line
 * that holds `from` (the terminator is not part of the span). Returns 0 if
 * the buffer ends first (then, unless it is final, more bytes decide). */
static int bad_line(const uint8_t *buf, size_t len, size_t from,
                    size_t *end, size_t *resume)
{
    size_t i = from;
    while (i < len && buf[i] != '\n' && buf[i] != '\r')
        i++;
    *end = i;
    if (i < len && buf[i] == '\r' && i + 1 < len && buf[i + 1] == '\n')
        i++;
    *resume = i < len ? i + 1 : len;
    return i < len;
}

enum { QUOTE_CLOSED, QUOTE_NEED_MORE, QUOTE_OPEN };

/* A quoted cell at buf[i] == '"' runs to the quote that is not doubled:
 * QUOTE_CLOSED with *end just past it; QUOTE_NEED_MORE when more bytes
 * decide; QUOTE_OPEN when the final data never closes it. */
static int quoted_cell_end(const uint8_t *buf, size_t len, size_t i,
                           int final, size_t *end)
{
    size_t j = i + 1;
    for (;;) {
        const uint8_t *qp = memchr(buf + j, '"', len - j);
        if (!qp)
            return final ? QUOTE_OPEN : QUOTE_NEED_MORE;
        size_t k = (size_t)(qp - buf);
        if (k + 1 == len && !final)
            return QUOTE_NEED_MORE; /* "" or the end: not known yet */
        if (k + 1 < len && buf[k + 1] == '"') {
            j = k + 2;
            continue;
        }
        *end = k + 1;
        return QUOTE_CLOSED;
    }
}

/* One row's cells as sk_csv_next finds them: the spans of the wanted
 * columns (paths read them after), the cell count and where it ends. */
typedef struct row {
    size_t span_off[SK_PEEK_MAX_PATHS], span_len[SK_PEEK_MAX_PATHS];
    int32_t span_col[SK_PEEK_MAX_PATHS];
    size_t nspans, ncells;
    size_t end, next; /* the row's end (before CR/LF), and past it */
} row;

/* The cell at buf[*i] (of the row at start): *i moves to what follows it.
 * 0, or NEED_MORE, or ERROR with out->end and *pos past the bad line. */
static int cell_end(const sk_csv_framer *f, const uint8_t *buf, size_t len,
                    size_t start, size_t *i, int final, sk_csv_record *out,
                    size_t *pos)
{
    const uint8_t delim = f->delim;
    if (*i < len && buf[*i] == '"') {
        int q = quoted_cell_end(buf, len, *i, final, i);
        if (q == QUOTE_NEED_MORE)
            return SK_CSV_NEED_MORE;
        if (q == QUOTE_OPEN) {
            out->reason = "quote never closed";
            bad_line(buf, len, start, &out->end, pos);
            return SK_CSV_ERROR;
        }
        if (*i < len && buf[*i] != delim && buf[*i] != '\n' &&
            buf[*i] != '\r') {
            out->reason = "text after a closing quote";
            if (!bad_line(buf, len, *i, &out->end, pos) && !final)
                return SK_CSV_NEED_MORE;
            return SK_CSV_ERROR;
        }
        return 0;
    }
    /* Unquoted: a quote inside is taken as text. */
    const uint8_t *end = buf + len;
    const uint8_t *p = find_special(buf + *i, end, delim);
    while (p < end && *p == '"')
        p = find_special(p + 1, end, delim);
    *i = (size_t)(p - buf);
    return 0;
}

/* The row at buf[start] into *r, keeping the spans of wanted columns
 * (NULL: none). 0, NEED_MORE or ERROR (as cell_end). */
static int scan_row(const sk_csv_framer *f, const uint8_t *wanted,
                    const uint8_t *buf, size_t len, size_t start, int final,
                    row *r, sk_csv_record *out, size_t *pos)
{
    size_t i = start;
    for (size_t col = 0;; col++) {
        size_t cell = i;
        int rc = cell_end(f, buf, len, start, &i, final, out, pos);
        if (rc)
            return rc;
        if (wanted && col < f->hdr.ncols && wanted[col] &&
            r->nspans < SK_PEEK_MAX_PATHS) {
            r->span_off[r->nspans] = cell;
            r->span_len[r->nspans] = i - cell;
            r->span_col[r->nspans++] = (int32_t)col;
        }
        r->ncells = col + 1;
        if (i >= len) {
            if (!final)
                return SK_CSV_NEED_MORE;
            r->end = r->next = len;
            return 0;
        }
        if (buf[i] == f->delim) {
            i++;
            continue;
        }
        /* CR, LF or CRLF ends the row. */
        r->end = i;
        if (buf[i] == '\r' && i + 1 >= len && !final)
            return SK_CSV_NEED_MORE;
        i += buf[i] == '\r' && i + 1 < len && buf[i + 1] == '\n' ? 2 : 1;
        r->next = i;
        return 0;
    }
}

/* A whole row r of a unit with a header: the paths' cells into out. */
static sk_csv_rc take_cells(const sk_csv_framer *f, size_t npaths,
                            const row *r, sk_csv_record *out)
{
    if (r->ncells != f->hdr.ncols) {
        out->reason = "row has a different number of cells than the header";
        return SK_CSV_ERROR;
    }
    for (size_t p = 0; p < npaths && p < SK_PEEK_MAX_PATHS; p++) {
        out->cells[p].present = 0;
        int32_t c = f->hdr.col_of[p];
        for (size_t s = 0; c >= 0 && s < r->nspans; s++) {
            if (r->span_col[s] == c) {
                out->cells[p] = (sk_csv_cell){r->span_off[s], r->span_len[s],
                                              1};
                break;
            }
        }
    }
    return SK_CSV_RECORD;
}

sk_csv_rc sk_csv_next(sk_csv_framer *f, const char *const *paths,
                      size_t npaths, const uint8_t *buf, size_t len,
                      size_t *pos, int final, sk_csv_record *out)
{
    size_t start = *pos;
    /* Blank lines are not rows. */
    while (start < len && (buf[start] == '\n' || buf[start] == '\r'))
        start++;
    if (start >= len) {
        *pos = len;
        return SK_CSV_END;
    }
    out->start = start;
    out->reason = NULL;
    const int header_row = !f->have_header;
    row r;
    r.nspans = 0;
    int rc = scan_row(f, header_row ? NULL : f->hdr.wanted, buf, len, start,
                      final, &r, out, pos);
    if (rc == SK_CSV_NEED_MORE) {
        *pos = start;
        out->start = start;
        return SK_CSV_NEED_MORE;
    }
    if (rc)
        return (sk_csv_rc)rc;
    out->end = r.end;
    *pos = r.next;
    if (!header_row)
        return take_cells(f, npaths, &r, out);
    const char *why = NULL;
    rc = header_from_row(f, buf + start, r.end - start, paths, npaths, &why);
    if (rc == SK_CSV_NOMEM)
        return SK_CSV_NOMEM;
    if (rc) {
        out->reason = why;
        return SK_CSV_ERROR;
    }
    return SK_CSV_HEADER;
}
