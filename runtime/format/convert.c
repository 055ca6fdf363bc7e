/* Conversions: see convert.h. */
#include "format/convert.h"

#include <csv.h>
#include <jansson.h>
#include <string.h>

#include "format/json.h"

/* b's bytes from off; never NULL arithmetic on an empty buffer. */
static inline const uint8_t *buf_at(const skippr_buf *b, size_t off)
{
    return b->data ? b->data + off : (const uint8_t *)"";
}

/* A list of names (decoded), in order, with an open-addressing index
 * (column + 1 per slot; the names' text may move, so the index holds no
 * pointers into it). */
typedef struct name_span {
    size_t off, len;
    uint64_t hash;
} name_span;

typedef struct namelist {
    skippr_buf text; /* names back to back */
    name_span *at; /* by column */
    size_t n, cap;
    uint32_t *tab;
    size_t tab_cap; /* a power of two, or 0 */
} namelist;

struct sk_conv {
    sk_conv_kind kind;
    uint8_t delim;
    namelist cols;       /* json -> csv: the header; csv -> jsonl: names */
    int have_header;     /* csv -> jsonl: the header row was seen */
    /* json -> csv, per record: each column's cell span in the record */
    size_t *cell_off, *cell_len;
    uint8_t *cell_kind; /* 0 empty, 1 string (escaped), 2 raw, 3 compact */
    size_t cells_cap;
    const uint8_t *rec;  /* the record being converted */
    skippr_buf tmp;          /* decoded names and values */
    /* csv -> jsonl */
    struct csv_parser csv;
    int csv_ready;
    skippr_buf fields;       /* the row's fields back to back */
    name_span *f;        /* their spans (hash unused) */
    size_t nf, fcap;
    int failed;
};

static void names_init(namelist *l)
{
    memset(l, 0, sizeof *l);
    skippr_buf_init(&l->text, (size_t)1 << 30);
}

static void names_free(namelist *l)
{
    skippr_buf_free(&l->text);
    sk_free(l->at);
    sk_free(l->tab);
}

/* The column of name, or -1. */
static long names_find(const namelist *l, const uint8_t *name, size_t n)
{
    if (!l->tab_cap)
        return -1;
    uint64_t h = sk_hash_fast(name, n);
    for (size_t i = (size_t)h & (l->tab_cap - 1); l->tab[i];
         i = (i + 1) & (l->tab_cap - 1)) {
        const name_span *s = &l->at[l->tab[i] - 1];
        if (s->hash == h && s->len == n &&
            (n == 0 || memcmp(l->text.data + s->off, name, n) == 0))
            return (long)l->tab[i] - 1;
    }
    return -1;
}

static void names_index(namelist *l, size_t col)
{
    size_t i = (size_t)l->at[col].hash & (l->tab_cap - 1);
    while (l->tab[i])
        i = (i + 1) & (l->tab_cap - 1);
    l->tab[i] = (uint32_t)col + 1;
}

static int names_add(namelist *l, const uint8_t *name, size_t n)
{
    if (l->n >= (size_t)1 << 20)
        return SKIPPR_RANGE;
    if (skippr_array_grow(&l->at, l->n, &l->cap, sizeof *l->at, 16))
        return SKIPPR_NOMEM;
    if ((l->n + 1) * 2 > l->tab_cap) {
        size_t cap = l->tab_cap ? l->tab_cap * 2 : 64;
        uint32_t *t = sk_calloc(cap, sizeof *t);
        if (!t)
            return SKIPPR_NOMEM;
        sk_free(l->tab);
        l->tab = t;
        l->tab_cap = cap;
        for (size_t c = 0; c < l->n; c++)
            names_index(l, c);
    }
    size_t at = l->text.len;
    if (n && skippr_buf_append(&l->text, name, n))
        return SKIPPR_NOMEM;
    l->at[l->n] = (name_span){at, n, sk_hash_fast(name, n)};
    names_index(l, l->n);
    l->n++;
    return SKIPPR_OK;
}

/* RFC 4180: spaces around a cell are part of it (libcsv trims them by
 * default). */
static int keep_spaces(unsigned char ch)
{
    (void)ch;
    return 0;
}

sk_conv *sk_conv_new(sk_conv_kind kind, uint8_t delim)
{
    sk_conv *made = NULL, *c = sk_calloc(1, sizeof *c);
    if (!c)
        goto out;
    c->kind = kind;
    c->delim = delim;
    skippr_buf_init(&c->tmp, (size_t)1 << 30);
    skippr_buf_init(&c->fields, (size_t)1 << 30);
    names_init(&c->cols);
    if (kind == SK_CONV_CSV_JSONL) {
        if (csv_init(&c->csv, CSV_STRICT_FINI) != 0)
            goto out;
        c->csv_ready = 1;
        csv_set_delim(&c->csv, delim);
        csv_set_space_func(&c->csv, keep_spaces);
    }
    made = c;
    c = NULL; /* handed to the caller */
out:
    sk_conv_free(c);
    return made;
}

void sk_conv_free(sk_conv *c)
{
    if (!c)
        return;
    names_free(&c->cols);
    sk_free(c->cell_off);
    sk_free(c->cell_len);
    sk_free(c->cell_kind);
    skippr_buf_free(&c->tmp);
    skippr_buf_free(&c->fields);
    sk_free(c->f);
    if (c->csv_ready)
        csv_free(&c->csv);
    sk_free(c);
}

int sk_conv_needs_learning(const sk_conv *c)
{
    return c->kind == SK_CONV_JSON_CSV;
}

/* ---- json -> csv ---------------------------------------------------------- */

/* A member's decoded name, in c->tmp from offset 0. */
static int member_name(sk_conv *c, const uint8_t *rec, const sk_json_member *m,
                       const uint8_t **name, size_t *n)
{
    if (!m->name_escapes) {
        *name = rec + m->name_off;
        *n = m->name_len;
        return SKIPPR_OK;
    }
    skippr_buf_reset(&c->tmp);
    if (skippr_buf_reserve(&c->tmp, m->name_len ? m->name_len : 1))
        return SKIPPR_NOMEM;
    *n = sk_json_unescape(rec + m->name_off, m->name_len, c->tmp.data);
    *name = c->tmp.data;
    return SKIPPR_OK;
}

typedef struct learn_ctx {
    sk_conv *c;
    const uint8_t *rec;
    int rc;
} learn_ctx;

static int learn_member(void *ud, const sk_json_member *m)
{
    learn_ctx *x = ud;
    const uint8_t *name;
    size_t n;
    if ((x->rc = member_name(x->c, x->rec, m, &name, &n)))
        return 1;
    if (names_find(&x->c->cols, name, n) < 0 &&
        (x->rc = names_add(&x->c->cols, name, n)))
        return 1;
    return 0;
}

int sk_conv_learn(sk_conv *c, const uint8_t *rec, size_t len,
                  const char **why)
{
    learn_ctx x = {c, rec, SKIPPR_OK};
    int rc = sk_json_members(rec, len, learn_member, &x);
    if (x.rc)
        return x.rc;
    if (rc) {
        *why = "a record is not a valid JSON object (json->csv needs every "
               "record to be one; keep validate: true)";
        return SKIPPR_CORRUPT;
    }
    return SKIPPR_OK;
}

/* Appends one CSV cell, quoted when it must be. */
static int put_cell(skippr_buf *out, const uint8_t *v, size_t n)
{
    int quote = 0;
    for (size_t i = 0; i < n && !quote; i++)
        quote = v[i] == ',' || v[i] == '"' || v[i] == '\r' || v[i] == '\n';
    if (!quote)
        return n ? skippr_buf_append(out, v, n) : SKIPPR_OK;
    int rc = skippr_buf_putc(out, '"');
    size_t from = 0;
    for (size_t i = 0; i < n && !rc; i++) {
        if (v[i] != '"')
            continue;
        rc = skippr_buf_append(out, v + from, i + 1 - from); /* up to the quote */
        if (!rc)
            rc = skippr_buf_putc(out, '"');                  /* doubled */
        from = i + 1;
    }
    if (!rc && n > from)
        rc = skippr_buf_append(out, v + from, n - from);
    return rc ? rc : skippr_buf_putc(out, '"');
}

int sk_conv_begin(sk_conv *c, skippr_buf *out)
{
    if (c->kind != SK_CONV_JSON_CSV)
        return SKIPPR_OK;
    int rc = SKIPPR_OK;
    for (size_t i = 0; i < c->cols.n && !rc; i++) {
        if (i)
            rc = skippr_buf_putc(out, ',');
        if (!rc)
            rc = put_cell(out, buf_at(&c->cols.text, c->cols.at[i].off),
                          c->cols.at[i].len);
    }
    return rc ? rc : skippr_buf_putc(out, '\n');
}

typedef struct row_ctx {
    sk_conv *c;
    int rc;
} row_ctx;

static int row_member(void *ud, const sk_json_member *m)
{
    row_ctx *x = ud;
    sk_conv *c = x->c;
    const uint8_t *name;
    size_t n;
    if ((x->rc = member_name(c, c->rec, m, &name, &n)))
        return 1;
    long col = names_find(&c->cols, name, n);
    if (col < 0) {
        x->rc = SKIPPR_CORRUPT; /* learning missed it: not the same slice */
        return 1;
    }
    if (c->cell_kind[col])
        return 0; /* a repeated key: the first counts */
    const sk_json_value *v = &m->value;
    c->cell_off[col] = v->off;
    c->cell_len[col] = v->len;
    switch (v->type) {
    case SK_JSON_STRING: c->cell_kind[col] = 1; break;
    case SK_JSON_NULL: c->cell_kind[col] = 4; break;
    case SK_JSON_OBJECT:
    case SK_JSON_ARRAY: c->cell_kind[col] = 3; break;
    default: c->cell_kind[col] = 2; /* number, true, false: the lexeme */
    }
    return 0;
}

/* Compact JSON of a raw container: the whitespace outside strings goes. */
static int compact(skippr_buf *out, const uint8_t *p, size_t n)
{
    if (skippr_buf_reserve(out, n))
        return SKIPPR_NOMEM;
    uint8_t *o = out->data + out->len;
    int in_str = 0;
    for (size_t i = 0; i < n; i++) {
        uint8_t ch = p[i];
        if (in_str) {
            *o++ = ch;
            if (ch == '\\' && i + 1 < n)
                *o++ = p[++i];
            else if (ch == '"')
                in_str = 0;
            continue;
        }
        if (ch == ' ' || ch == '\t' || ch == '\n' || ch == '\r')
            continue;
        if (ch == '"')
            in_str = 1;
        *o++ = ch;
    }
    out->len = (size_t)(o - out->data);
    return SKIPPR_OK;
}

static int json_to_csv(sk_conv *c, const uint8_t *rec, size_t len,
                       skippr_buf *out, const char **why)
{
    size_t ncols = c->cols.n;
    if (ncols > c->cells_cap) {
        /* Each array is kept as soon as it has grown, so a failure in
         * the next one leaves nothing dangling. */
        size_t *a = sk_realloc(c->cell_off, ncols * sizeof *a);
        if (!a)
            return SKIPPR_NOMEM;
        c->cell_off = a;
        size_t *b = sk_realloc(c->cell_len, ncols * sizeof *b);
        if (!b)
            return SKIPPR_NOMEM;
        c->cell_len = b;
        uint8_t *k = sk_realloc(c->cell_kind, ncols);
        if (!k)
            return SKIPPR_NOMEM;
        c->cell_kind = k;
        c->cells_cap = ncols;
    }
    if (ncols)
        memset(c->cell_kind, 0, ncols);
    c->rec = rec;
    row_ctx x = {c, SKIPPR_OK};
    int rc = sk_json_members(rec, len, row_member, &x);
    if (x.rc == SKIPPR_NOMEM)
        return x.rc;
    if (rc || x.rc) {
        *why = "a record is not a valid JSON object, or changed since the "
               "slice was sealed";
        return SKIPPR_CORRUPT;
    }
    rc = SKIPPR_OK;
    for (size_t i = 0; i < ncols && !rc; i++) {
        if (i)
            rc = skippr_buf_putc(out, ',');
        if (rc)
            break;
        if (c->cell_kind[i] == 0 || c->cell_kind[i] == 4)
            continue; /* missing or null: an empty cell */
        const uint8_t *v = rec + c->cell_off[i];
        size_t n = c->cell_len[i];
        switch (c->cell_kind[i]) {
        case 1:
            skippr_buf_reset(&c->tmp);
            if ((rc = skippr_buf_reserve(&c->tmp, n ? n : 1)))
                break;
            c->tmp.len = sk_json_unescape(v, n, c->tmp.data);
            rc = put_cell(out, c->tmp.data, c->tmp.len);
            break;
        case 2: rc = put_cell(out, v, n); break;
        case 3:
            skippr_buf_reset(&c->tmp);
            if (!(rc = compact(&c->tmp, v, n)))
                rc = put_cell(out, c->tmp.data, c->tmp.len);
            break;
        default: break; /* missing or null: empty */
        }
    }
    return rc ? rc : skippr_buf_putc(out, '\n');
}

/* ---- csv -> jsonl ---------------------------------------------------------- */

static void csv_field(void *s, size_t n, void *ud)
{
    sk_conv *c = ud;
    if (c->failed)
        return;
    if (skippr_array_grow(&c->f, c->nf, &c->fcap, sizeof *c->f, 16) ||
        (n && skippr_buf_append(&c->fields, s, n))) {
        c->failed = 1;
        return;
    }
    c->f[c->nf++] = (name_span){c->fields.len - n, n, 0};
}

/* The row's decoded fields, into c->fields, c->f and c->nf. */
static int csv_split(sk_conv *c, const uint8_t *rec, size_t len)
{
    skippr_buf_reset(&c->fields);
    c->nf = 0;
    c->failed = 0;
    size_t used = len ? csv_parse(&c->csv, rec, len, csv_field, NULL, c) : 0;
    int fin = csv_fini(&c->csv, csv_field, NULL, c);
    if (c->failed)
        return SKIPPR_NOMEM;
    if (used != len || fin != 0)
        return SKIPPR_CORRUPT;
    if (len == 0)
        csv_field(NULL, 0, c); /* one empty cell */
    return c->failed ? SKIPPR_NOMEM : SKIPPR_OK;
}

static int csv_to_json(sk_conv *c, const uint8_t *rec, size_t len,
                       skippr_buf *out, const char **why)
{
    int rc = csv_split(c, rec, len);
    if (rc == SKIPPR_CORRUPT)
        *why = "a CSV row cannot be read again";
    if (rc)
        return rc;
    if (!c->have_header) {
        /* The header row: names, made unique with a suffix. */
        for (size_t i = 0; i < c->nf && !rc; i++) {
            const uint8_t *name = buf_at(&c->fields, c->f[i].off);
            size_t n = c->f[i].len;
            char sfx[24];
            skippr_buf_reset(&c->tmp);
            if (n && (rc = skippr_buf_append(&c->tmp, name, n)))
                break;
            size_t base = c->tmp.len;
            for (int k = 2;
                 names_find(&c->cols, buf_at(&c->tmp, 0), c->tmp.len) >= 0;
                 k++) {
                c->tmp.len = base;
                int sn = snprintf(sfx, sizeof sfx, "_%d", k);
                if ((rc = skippr_buf_append(&c->tmp, sfx, (size_t)sn)))
                    break;
            }
            if (!rc)
                rc = names_add(&c->cols, buf_at(&c->tmp, 0), c->tmp.len);
        }
        c->have_header = 1;
        return rc;
    }
    if (c->nf != c->cols.n) {
        *why = "a CSV row's cell count differs from its header's";
        return SKIPPR_CORRUPT;
    }
    json_t *obj = json_object();
    if (!obj)
        return SKIPPR_NOMEM;
    for (size_t i = 0; i < c->nf && !rc; i++) {
        json_t *v = json_stringn((const char *)buf_at(&c->fields, c->f[i].off),
                                 c->f[i].len);
        if (!v) {
            *why = "a CSV cell is not valid UTF-8, so it cannot be a JSON "
                   "string";
            rc = SKIPPR_CORRUPT;
            break;
        }
        if (json_object_setn_new_nocheck(
                obj, (const char *)buf_at(&c->cols.text, c->cols.at[i].off),
                c->cols.at[i].len, v))
            rc = SKIPPR_NOMEM;
    }
    if (!rc) {
        size_t n = json_dumpb(obj, NULL, 0, JSON_COMPACT | JSON_PRESERVE_ORDER);
        if (n == 0 || skippr_buf_reserve(out, n + 1))
            rc = SKIPPR_NOMEM;
        else if (json_dumpb(obj, (char *)out->data + out->len, n,
                            JSON_COMPACT | JSON_PRESERVE_ORDER) != n)
            rc = SKIPPR_NOMEM;
        else {
            out->len += n;
            out->data[out->len++] = '\n';
        }
    }
    json_decref(obj);
    return rc;
}

int sk_conv_record(sk_conv *c, const uint8_t *rec, size_t len, skippr_buf *out,
                   const char **why)
{
    switch (c->kind) {
    case SK_CONV_JSON_CSV: return json_to_csv(c, rec, len, out, why);
    case SK_CONV_CSV_JSONL: return csv_to_json(c, rec, len, out, why);
    default:
        if (skippr_buf_append(out, rec, len))
            return SKIPPR_NOMEM;
        return skippr_buf_putc(out, '\n');
    }
}
