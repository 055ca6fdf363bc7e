/* One XML record's walk: from the root's start tag to its close, the
 * stack of open elements, and the values the spec's paths find on the
 * way (attributes of an element, text of a leaf). See xml_impl.h. */
#include <string.h>

#include "format/xml_impl.h"

typedef struct level {
    size_t name_off, name_len;
    size_t content; /* past the start tag */
    int has_child;
    uint32_t mask;  /* paths whose element segments match so far */
} level;

static void take_attrs(const sk_xml_spec *s, const uint8_t *buf,
                       const tag *t, int lvl, uint32_t mask, uint32_t *found,
                       sk_xml_record *out)
{
    for (size_t p = 0; p < s->npaths; p++) {
        if (!(mask >> p & 1) || !s->attr[p] || s->nseg[p] != lvl + 1 ||
            (*found >> p & 1))
            continue;
        for (int a = 0; a < t->nattrs; a++) {
            const attr *at = &t->attrs[a];
            if (xml_name_eq(s->seg[p][lvl], s->seglen[p][lvl],
                        buf + at->name_off, at->name_len)) {
                out->values[p] = (sk_xml_value){1, at->val_off, at->val_len};
                *found |= 1u << p;
                break;
            }
        }
    }
}

/* Paths of mask whose element segment `lvl - 1` is this element. */
static uint32_t child_mask(const sk_xml_spec *s, const uint8_t *buf,
                           const tag *t, int lvl, uint32_t mask)
{
    uint32_t m = 0;
    for (size_t p = 0; p < s->npaths; p++) {
        if (!(mask >> p & 1))
            continue;
        int elems = s->nseg[p] - s->attr[p];
        if (elems >= lvl &&
            xml_name_eq(s->seg[p][lvl - 1], s->seglen[p][lvl - 1],
                    buf + t->name_off, t->name_len))
            m |= 1u << p;
    }
    return m;
}

/* An element at level lvl closes: leaf paths ending here take its content
 * (the first occurrence; one with child elements is no scalar). */
static void take_text(const sk_xml_spec *s, const level *lv, int lvl,
                      size_t close_at, uint32_t *found, sk_xml_record *out)
{
    for (size_t p = 0; p < s->npaths; p++) {
        if (!(lv->mask >> p & 1) || s->attr[p] || s->nseg[p] != lvl ||
            (*found >> p & 1))
            continue;
        *found |= 1u << p;
        if (!lv->has_child)
            out->values[p] = (sk_xml_value){2, lv->content,
                                            close_at - lv->content};
    }
}

/* The element stack of scan_record outgrew the cap levels on hand (st,
 * on its stack): go on in SK_XML_MAX_DEPTH levels on the heap. */
static int levels_grow(level **lv, level *st, int *cap)
{
    level *bigger = sk_malloc(SK_XML_MAX_DEPTH * sizeof *bigger);
    if (!bigger)
        return SKIPPR_NOMEM;
    memcpy(bigger, *lv, (size_t)*cap * sizeof **lv);
    if (*lv != st)
        sk_free(*lv);
    *lv = bigger;
    *cap = SK_XML_MAX_DEPTH;
    return SKIPPR_OK;
}

/* One record's walk through its elements: the stack of open elements
 * (levels on hand in st, deeper ones on the heap) and the paths found. */
typedef struct walk {
    const sk_xml_spec *s;
    const uint8_t *buf;
    size_t len, i; /* i: where the walk is */
    level st[64];
    level *lv;
    int cap, d; /* d: the innermost open element's level */
    uint32_t found;
    sk_xml_record *out;
} walk;

/* What a step of the walk found. */
typedef enum { W_ON, W_DONE, W_UNCLOSED, W_MORE, W_BAD, W_NOMEM } walk_rc;

/* A close tag at w->i: the innermost element ends (W_DONE for the root). */
static walk_rc walk_close(walk *w)
{
    size_t no, nn, e;
    int rc = xml_parse_close(w->buf, w->len, w->i, &no, &nn, &e);
    if (rc == -1)
        return W_UNCLOSED;
    level *top = &w->lv[w->d];
    if (rc == -2 || nn != top->name_len ||
        memcmp(w->buf + no, w->buf + top->name_off, nn) != 0) {
        w->out->reason = "close tag does not match the open element";
        return W_BAD;
    }
    take_text(w->s, top, w->d, w->i, &w->found, w->out);
    w->i = e;
    if (w->d == 0)
        return W_DONE;
    w->d--;
    return W_ON;
}

/* A start tag at w->i: a child of the innermost element opens (or, self-
 * closing, opens and closes). */
static walk_rc walk_open(walk *w)
{
    tag t;
    int rc = xml_parse_tag(w->buf, w->len, w->i, &t);
    if (rc == -1)
        return W_UNCLOSED;
    if (rc == -2) {
        w->out->reason = "malformed start tag";
        return W_BAD;
    }
    int d = w->d;
    w->lv[d].has_child = 1;
    if (d + 1 >= SK_XML_MAX_DEPTH) {
        w->out->reason = "elements nested deeper than 256 levels";
        return W_BAD;
    }
    if (d + 1 >= w->cap && levels_grow(&w->lv, w->st, &w->cap))
        return W_NOMEM;
    uint32_t cm = child_mask(w->s, w->buf, &t, d + 1, w->lv[d].mask);
    take_attrs(w->s, w->buf, &t, d + 1, cm, &w->found, w->out);
    level nl = {t.name_off, t.name_len, t.end, 0, cm};
    w->i = t.end;
    if (t.self_closing)
        take_text(w->s, &nl, d + 1, t.end, &w->found, w->out); /* empty */
    else
        w->lv[++w->d] = nl;
    return W_ON;
}

/* The walk from the root's start tag to its close: the next markup, step
 * by step. */
static walk_rc walk_body(walk *w, int final)
{
    for (;;) {
        const uint8_t *lt =
            w->i < w->len ? memchr(w->buf + w->i, '<', w->len - w->i) : NULL;
        if (!lt)
            return W_UNCLOSED;
        w->i = (size_t)(lt - w->buf);
        if (w->i + 1 >= w->len)
            return W_UNCLOSED;
        walk_rc rc;
        size_t m;
        if (w->buf[w->i + 1] == '/') {
            rc = walk_close(w);
        } else if ((m = xml_skip_markup(w->buf, w->len, w->i)) == SIZE_MAX) {
            if (!final)
                return W_MORE;
            w->out->reason = "comment, CDATA or processing instruction not "
                             "closed";
            rc = W_BAD;
        } else if (m) {
            w->i = m;
            rc = W_ON;
        } else {
            rc = walk_open(w);
        }
        if (rc != W_ON)
            return rc;
    }
}

/* The root's start tag at buf[start] opens the walk: W_DONE when it
 * closes itself. */
static walk_rc walk_root(walk *w, size_t start)
{
    tag t;
    int rc = xml_parse_tag(w->buf, w->len, start, &t);
    if (rc == -1)
        return W_MORE;
    if (rc == -2) {
        w->out->reason = "malformed start tag";
        return W_BAD;
    }
    const sk_xml_spec *s = w->s;
    uint32_t all = s->npaths >= 32 ? ~0u : (1u << s->npaths) - 1;
    take_attrs(s, w->buf, &t, 0, all, &w->found, w->out);
    w->i = t.end;
    if (t.self_closing)
        return W_DONE;
    w->lv[0] = (level){t.name_off, t.name_len, t.end, 0, all};
    return W_ON;
}

/* See xml_impl.h. */
sk_xml_rc xml_scan_record(const sk_xml_spec *s, const uint8_t *buf,
                          size_t len, size_t start, int final, size_t *pos,
                          sk_xml_record *out)
{
    walk w = {.s = s, .buf = buf, .len = len, .i = start + 1, .cap = 64,
              .out = out};
    w.lv = w.st;
    for (size_t p = 0; p < SK_PEEK_MAX_PATHS; p++)
        out->values[p].kind = 0;
    out->start = start;
    out->reason = NULL;
    walk_rc rc = walk_root(&w, start);
    if (rc == W_ON)
        rc = walk_body(&w, final);
    if (w.lv != w.st)
        sk_free(w.lv);
    if (rc == W_UNCLOSED && final) {
        out->reason = "element not closed";
        rc = W_BAD;
    }
    switch (rc) {
    case W_DONE:
        out->end = *pos = w.i;
        return SK_XML_RECORD;
    case W_NOMEM:
        return SK_XML_NOMEM;
    case W_BAD:
        *pos = w.i;
        return SK_XML_ERROR;
    default: /* W_UNCLOSED or W_MORE, not final */
        *pos = start;
        return SK_XML_NEED_MORE;
    }
}

