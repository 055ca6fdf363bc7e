/* XML framing and peeking: see xmlpeek.h. */
#include "format/xmlpeek.h"

#include <string.h>

#define MAX_SEGS 16
#define MAX_ATTRS 64

struct sk_xml_spec {
    size_t npaths;
    int nseg[SK_PEEK_MAX_PATHS];
    int attr[SK_PEEK_MAX_PATHS]; /* the last segment is @name */
    const char *seg[SK_PEEK_MAX_PATHS][MAX_SEGS]; /* into text, no '@' */
    size_t seglen[SK_PEEK_MAX_PATHS][MAX_SEGS];
    char *text;
    char *rec; /* record element name, or NULL */
    size_t rec_len;
};

sk_xml_spec *sk_xml_spec_new(const char *const *paths, size_t n,
                             const char *record_element)
{
    sk_xml_spec *made = NULL, *s = NULL;
    if (n > SK_PEEK_MAX_PATHS || !(s = sk_calloc(1, sizeof *s)))
        goto fail;
    size_t total = 1;
    for (size_t i = 0; i < n; i++)
        total += strlen(paths[i]) + 1;
    if (!(s->text = sk_malloc(total)))
        goto fail;
    char *t = s->text;
    for (size_t i = 0; i < n; i++) {
        size_t l = strlen(paths[i]);
        memcpy(t, paths[i], l + 1);
        const char *p = t;
        t += l + 1;
        for (;;) {
            const char *dot = strchr(p, '.');
            size_t sl = dot ? (size_t)(dot - p) : strlen(p);
            int k = s->nseg[i];
            if (sl == 0 || k == MAX_SEGS || s->attr[i])
                goto fail; /* empty segment, too deep, or past an @ */
            if (p[0] == '@') {
                if (sl == 1)
                    goto fail;
                s->attr[i] = 1;
                p++;
                sl--;
            }
            s->seg[i][k] = p;
            s->seglen[i][k] = sl;
            s->nseg[i]++;
            if (!dot)
                break;
            p = dot + 1;
        }
    }
    s->npaths = n;
    if (record_element && *record_element) {
        if (!(s->rec = sk_strdup(record_element)))
            goto fail;
        s->rec_len = strlen(s->rec);
    }
    made = s;
    s = NULL; /* handed to the caller */
fail:
    sk_xml_spec_free(s);
    return made;
}

void sk_xml_spec_free(sk_xml_spec *s)
{
    if (!s)
        return;
    sk_free(s->text);
    sk_free(s->rec);
    sk_free(s);
}

void sk_xml_framer_init(sk_xml_framer *f) { memset(f, 0, sizeof *f); }

void sk_xml_framer_free(sk_xml_framer *f)
{
    sk_free(f->head);
    f->head = NULL;
    f->head_len = 0;
}

/* ---- lexing ---------------------------------------------------------------- */

static inline int is_ws(uint8_t c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

static inline int is_name(uint8_t c)
{
    return c >= 0x80 || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
           (c >= '0' && c <= '9') || c == '_' || c == ':' || c == '.' ||
           c == '-';
}

/* A path segment against an element or attribute name: equal, or equal to
 * the part after the name's prefix. */
static int name_eq(const char *seg, size_t sl, const uint8_t *name, size_t n)
{
    if (sl == n && memcmp(seg, name, n) == 0)
        return 1;
    const uint8_t *colon = memchr(name, ':', n);
    if (!colon || memchr(seg, ':', sl))
        return 0;
    size_t local = n - (size_t)(colon + 1 - name);
    return sl == local && memcmp(seg, colon + 1, local) == 0;
}

static int starts(const uint8_t *p, size_t avail, const char *s)
{
    size_t n = strlen(s);
    return avail >= n && memcmp(p, s, n) == 0;
}

/* Finds `end` at or after i; returns the index past it, or 0 if absent. */
static size_t find(const uint8_t *buf, size_t len, size_t i, const char *end)
{
    size_t n = strlen(end);
    while (i < len) {
        const uint8_t *p = memchr(buf + i, end[0], len - i);
        if (!p)
            return 0;
        size_t k = (size_t)(p - buf);
        if (len - k < n)
            return 0;
        if (memcmp(p, end, n) == 0)
            return k + n;
        i = k + 1;
    }
    return 0;
}

/* At buf[i] == '<': skips a comment, PI, CDATA section or DOCTYPE. Returns
 * the index past it; 0 if it is none of these; SIZE_MAX if it is cut off. */
static size_t skip_markup(const uint8_t *buf, size_t len, size_t i)
{
    size_t avail = len - i;
    /* The end is looked for after the opening: "<!-->" does not close
     * where it opens. */
    const char *end = NULL;
    size_t from = 0;
    if (starts(buf + i, avail, "<!--")) {
        end = "-->";
        from = i + 4;
    } else if (starts(buf + i, avail, "<?")) {
        end = "?>";
        from = i + 2;
    } else if (starts(buf + i, avail, "<![CDATA[")) {
        end = "]]>";
        from = i + 9;
    }
    if (!end && starts(buf + i, avail, "<!")) {
        /* <!DOCTYPE ...> with an internal subset in brackets */
        int sq = 0;
        char quote = 0;
        for (size_t k = i + 2; k < len; k++) {
            uint8_t c = buf[k];
            if (quote) {
                if (c == (uint8_t)quote)
                    quote = 0;
            } else if (c == '"' || c == '\'') {
                quote = (char)c;
            } else if (c == '[') {
                sq++;
            } else if (c == ']') {
                sq--;
            } else if (c == '>' && sq <= 0) {
                return k + 1;
            }
        }
        return SIZE_MAX;
    } else if (avail < 2) {
        return SIZE_MAX; /* "<" at the end: not known yet */
    }
    if (!end)
        return 0;
    size_t e = find(buf, len, from, end);
    return e ? e : SIZE_MAX;
}

typedef struct attr {
    size_t name_off, name_len, val_off, val_len;
} attr;

typedef struct tag {
    size_t name_off, name_len;
    size_t end;      /* past the '>' */
    int self_closing;
    attr attrs[MAX_ATTRS];
    int nattrs;      /* the first MAX_ATTRS */
} tag;

/* Parses a start tag at buf[i] == '<'. 0, -1 cut off, -2 malformed. */
static int parse_tag(const uint8_t *buf, size_t len, size_t i, tag *t)
{
    size_t k = i + 1;
    t->name_off = k;
    while (k < len && is_name(buf[k]))
        k++;
    if (k >= len)
        return -1;
    t->name_len = k - t->name_off;
    if (t->name_len == 0)
        return -2;
    t->nattrs = 0;
    for (;;) {
        int had_ws = 0;
        while (k < len && is_ws(buf[k])) {
            k++;
            had_ws = 1;
        }
        if (k >= len)
            return -1;
        if (buf[k] == '>') {
            t->end = k + 1;
            t->self_closing = 0;
            return 0;
        }
        if (buf[k] == '/') {
            if (k + 1 >= len)
                return -1;
            if (buf[k + 1] != '>')
                return -2;
            t->end = k + 2;
            t->self_closing = 1;
            return 0;
        }
        if (!had_ws || !is_name(buf[k]))
            return -2;
        size_t an = k;
        while (k < len && is_name(buf[k]))
            k++;
        size_t anl = k - an;
        while (k < len && is_ws(buf[k]))
            k++;
        if (k >= len)
            return -1;
        if (buf[k] != '=')
            return -2;
        k++;
        while (k < len && is_ws(buf[k]))
            k++;
        if (k >= len)
            return -1;
        uint8_t q = buf[k];
        if (q != '"' && q != '\'')
            return -2;
        const uint8_t *e = memchr(buf + k + 1, q, len - k - 1);
        if (!e)
            return -1;
        size_t vo = k + 1, vl = (size_t)(e - buf) - vo;
        if (memchr(buf + vo, '<', vl))
            return -2;
        if (t->nattrs < MAX_ATTRS)
            t->attrs[t->nattrs++] = (attr){an, anl, vo, vl};
        k = vo + vl + 1;
    }
}

/* At buf[i] == '<' and buf[i+1] == '/': the close tag's name and end.
 * 0, -1 cut off, -2 malformed. */
static int parse_close(const uint8_t *buf, size_t len, size_t i,
                       size_t *name_off, size_t *name_len, size_t *end)
{
    size_t k = i + 2;
    *name_off = k;
    while (k < len && is_name(buf[k]))
        k++;
    *name_len = k - *name_off;
    while (k < len && is_ws(buf[k]))
        k++;
    if (k >= len)
        return -1;
    if (buf[k] != '>' || *name_len == 0)
        return -2;
    *end = k + 1;
    return 0;
}

/* ---- records ------------------------------------------------------------- */

/* Error span of a bad record at start: to the next close tag of its own
 * name, else up to the root's close tag, else the end. 0, or -1 to wait
 * for more bytes. */
static int resync(const sk_xml_framer *f, const uint8_t *buf, size_t len,
                  size_t start, size_t from, const uint8_t *name, size_t nl,
                  int final, size_t *end)
{
    for (size_t i = from; i < len;) {
        const uint8_t *p = memchr(buf + i, '<', len - i);
        if (!p)
            break;
        size_t k = (size_t)(p - buf);
        if (k + 1 < len && buf[k + 1] == '/') {
            size_t no, nn, e;
            int rc = parse_close(buf, len, k, &no, &nn, &e);
            if (rc == 0 && nn == nl && memcmp(buf + no, name, nl) == 0) {
                *end = e;
                return 0;
            }
            if (rc == 0 && nn == f->root_len &&
                memcmp(buf + no, f->root, nn) == 0 && k > start) {
                *end = k;
                return 0;
            }
        }
        i = k + 1;
    }
    if (!final)
        return -1;
    *end = len;
    return 0;
}

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
            if (name_eq(s->seg[p][lvl], s->seglen[p][lvl],
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
            name_eq(s->seg[p][lvl - 1], s->seglen[p][lvl - 1],
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

/* A bad record from start (root name rname[0..rnl)), its error at i: its
 * span runs to where resync() finds the next record. ERROR, or NEED_MORE
 * while that place is not in buf yet. */
static sk_xml_rc record_error(sk_xml_framer *f, const uint8_t *buf,
                              size_t len, size_t start, size_t i,
                              const uint8_t *rname, size_t rnl, int final,
                              size_t *pos, sk_xml_record *out)
{
    size_t end;
    if (resync(f, buf, len, start, i, rname, rnl, final, &end) != 0) {
        *pos = start;
        return SK_XML_NEED_MORE;
    }
    out->end = *pos = end;
    return SK_XML_ERROR;
}

/* A record from buf[start] == '<'. RECORD, ERROR or NEED_MORE. */
static sk_xml_rc scan_record(sk_xml_framer *f, const sk_xml_spec *s,
                             const uint8_t *buf, size_t len, size_t start,
                             int final, size_t *pos, sk_xml_record *out)
{
    level st[64]; /* deeper records move to the heap */
    level *lv = st;
    int cap = 64;
    uint32_t found = 0;
    tag t;
    for (size_t p = 0; p < SK_PEEK_MAX_PATHS; p++)
        out->values[p].kind = 0;
    out->start = start;
    out->reason = NULL;
    const uint8_t *rname = buf + start + 1;
    size_t rnl = 0, i = start + 1;
    while (start + 1 + rnl < len && is_name(rname[rnl]))
        rnl++;
    int rc = parse_tag(buf, len, start, &t);
    if (rc == -1)
        goto need_more;
    if (rc == -2) {
        out->reason = "malformed start tag";
        goto bad_at;
    }
    uint32_t all = s->npaths >= 32 ? ~0u : (1u << s->npaths) - 1;
    take_attrs(s, buf, &t, 0, all, &found, out);
    if (t.self_closing) {
        out->end = *pos = t.end;
        return SK_XML_RECORD;
    }
    int d = 0;
    lv[0] = (level){t.name_off, t.name_len, t.end, 0, all};
    i = t.end;
    for (;;) {
        const uint8_t *lt = i < len ? memchr(buf + i, '<', len - i) : NULL;
        if (!lt) {
            goto unclosed;
        }
        i = (size_t)(lt - buf);
        if (i + 1 >= len) {
            goto unclosed;
        }
        if (buf[i + 1] == '/') {
            size_t no, nn, e;
            rc = parse_close(buf, len, i, &no, &nn, &e);
            if (rc == -1) {
                goto unclosed;
            }
            if (rc == -2 || nn != lv[d].name_len ||
                memcmp(buf + no, buf + lv[d].name_off, nn) != 0) {
                out->reason = "close tag does not match the open element";
                goto bad_at;
            }
            take_text(s, &lv[d], d, i, &found, out);
            i = e;
            if (d == 0) {
                out->end = *pos = i;
                return SK_XML_RECORD;
            }
            d--;
            continue;
        }
        size_t m = skip_markup(buf, len, i);
        if (m == SIZE_MAX) {
            if (!final)
                goto need_more;
            out->reason = "comment, CDATA or processing instruction not "
                          "closed";
            goto bad_at;
        }
        if (m) {
            i = m;
            continue;
        }
        rc = parse_tag(buf, len, i, &t);
        if (rc == -1) {
            goto unclosed;
        }
        if (rc == -2) {
            out->reason = "malformed start tag";
            goto bad_at;
        }
        lv[d].has_child = 1;
        if (d + 1 >= SK_XML_MAX_DEPTH) {
            out->reason = "elements nested deeper than 256 levels";
            goto bad_at;
        }
        if (d + 1 >= cap && levels_grow(&lv, st, &cap))
            return SK_XML_NOMEM;
        uint32_t cm = child_mask(s, buf, &t, d + 1, lv[d].mask);
        take_attrs(s, buf, &t, d + 1, cm, &found, out);
        level nl = {t.name_off, t.name_len, t.end, 0, cm};
        if (t.self_closing) {
            take_text(s, &nl, d + 1, t.end, &found, out); /* empty text */
            i = t.end;
            continue;
        }
        lv[++d] = nl;
        i = t.end;
    }
unclosed:
    if (final) {
        out->reason = "element not closed";
        goto bad_at;
    }
need_more:
    if (lv != st)
        sk_free(lv);
    *pos = start;
    return SK_XML_NEED_MORE;
bad_at:
    if (lv != st)
        sk_free(lv);
    return record_error(f, buf, len, start, i, rname, rnl, final, pos, out);
}

static int set_head(sk_xml_framer *f, const uint8_t *buf, const tag *t,
                    size_t start)
{
    static const char dflt[] = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>";
    const uint8_t *decl = f->have_decl ? buf + f->decl_off
                                       : (const uint8_t *)dflt;
    size_t dl = f->have_decl ? f->decl_len : sizeof dflt - 1;
    size_t tl = t->end - start;
    if (t->name_len >= sizeof f->root)
        return -2;
    uint8_t *h = sk_malloc(dl + 1 + tl);
    if (!h)
        return -1;
    memcpy(h, decl, dl);
    h[dl] = '\n';
    memcpy(h + dl + 1, buf + start, tl);
    sk_free(f->head);
    f->head = h;
    f->head_len = dl + 1 + tl;
    f->id = sk_hash64(h, f->head_len);
    memcpy(f->root, buf + t->name_off, t->name_len);
    f->root_len = t->name_len;
    f->root[f->root_len] = 0;
    return 0;
}

/* An error that runs to the end of the data, after which nothing is
 * framed: text or broken markup before the root, too deep a nesting. */
static sk_xml_rc xml_fatal(sk_xml_framer *f, size_t at, size_t len,
                           const char *why, size_t *pos, sk_xml_record *out)
{
    out->start = at;
    out->reason = why;
    out->end = *pos = len;
    f->state = SK_XML_AFTER_ROOT;
    return SK_XML_ERROR;
}

/* The prolog: the declaration (kept for the header), comments and
 * processing instructions, then the root's start tag, which is the
 * HEADER. *pos stays at the prolog's start until the root is read, so the
 * declaration is in the same buffer as the root tag. Errors run to the end
 * of the data, which they wait for, so a span does not depend on where
 * buffers end. */
static sk_xml_rc xml_prolog(sk_xml_framer *f, const uint8_t *buf,
                            size_t len, size_t *pos, int final,
                            sk_xml_record *out)
{
    size_t i = *pos;
    f->have_decl = 0;
    for (;;) {
        while (i < len && is_ws(buf[i]))
            i++;
        if (i >= len) {
            if (!final)
                return SK_XML_NEED_MORE;
            *pos = len;
            return SK_XML_END;
        }
        if (buf[i] != '<')
            return final ? xml_fatal(f, i, len, "text before the root "
                                     "element", pos, out)
                         : SK_XML_NEED_MORE;
        int is_decl = starts(buf + i, len - i, "<?xml") && len - i > 5 &&
                      is_ws(buf[i + 5]);
        size_t m = skip_markup(buf, len, i);
        if (m == SIZE_MAX)
            return final ? xml_fatal(f, i, len, "markup before the root "
                                     "element not closed", pos, out)
                         : SK_XML_NEED_MORE;
        if (m) {
            if (is_decl && !f->have_decl) {
                f->have_decl = 1;
                f->decl_off = i;
                f->decl_len = m - i;
            }
            i = m;
            continue;
        }
        tag t;
        int rc = parse_tag(buf, len, i, &t);
        int hrc = rc == 0 ? set_head(f, buf, &t, i) : 0;
        if (hrc == -1)
            return SK_XML_NOMEM;
        if (rc != 0 || hrc != 0)
            return final ? xml_fatal(f, i, len, "malformed root element",
                                     pos, out)
                         : SK_XML_NEED_MORE;
        out->start = i;
        out->end = *pos = t.end;
        f->state = t.self_closing ? SK_XML_AFTER_ROOT : SK_XML_IN_ROOT;
        f->depth = 0;
        f->anc_used = 0;
        return SK_XML_HEADER;
    }
}

/* buf[i] starts a close tag between records: it must close the innermost
 * ancestor (or the root, which ends the unit). -1 when the unit goes on
 * at *next; else what sk_xml_next returns. */
static int xml_close(sk_xml_framer *f, const uint8_t *buf, size_t len,
                     size_t i, int final, size_t *pos, size_t *next,
                     sk_xml_record *out)
{
    size_t no, nn, e;
    int rc = parse_close(buf, len, i, &no, &nn, &e);
    const char *want = f->depth
                           ? f->anc + f->anc_used - f->anc_len[f->depth - 1]
                           : f->root;
    size_t wl = f->depth ? f->anc_len[f->depth - 1] : f->root_len;
    if (rc != 0 && !final) {
        *pos = i;
        return SK_XML_NEED_MORE;
    }
    if (rc != 0 || nn != wl || memcmp(buf + no, want, wl) != 0) {
        out->start = i;
        out->reason = "close tag does not match the open element";
        out->end = *pos = rc == 0 ? e : len;
        return SK_XML_ERROR;
    }
    if (f->depth == 0) {
        f->state = SK_XML_AFTER_ROOT;
        *pos = len;
        return SK_XML_END;
    }
    f->depth--;
    f->anc_used -= wl;
    *next = e;
    return -1;
}

/* buf[i] starts an element on the way to the records (name[0..nl)):
 * enter it, its name kept among the ancestors. -1 when framing goes on
 * at *next (*pos moved there: a record boundary); else what sk_xml_next
 * returns. */
static int xml_enter(sk_xml_framer *f, const uint8_t *buf, size_t len,
                     size_t i, const uint8_t *name, size_t nl, int final,
                     size_t *pos, size_t *next, sk_xml_record *out)
{
    tag t;
    int rc = parse_tag(buf, len, i, &t);
    if (rc == -1 && !final) {
        *pos = i;
        return SK_XML_NEED_MORE;
    }
    if (rc != 0) {
        size_t end;
        if (resync(f, buf, len, i, i + 1, name, nl, final, &end) != 0) {
            *pos = i;
            return SK_XML_NEED_MORE;
        }
        out->start = i;
        out->reason = "malformed start tag";
        out->end = *pos = end;
        return SK_XML_ERROR;
    }
    *next = t.end;
    if (t.self_closing)
        return -1;
    if (f->depth + 1 >= SK_XML_MAX_DEPTH ||
        f->anc_used + t.name_len > SK_XML_NAMES) {
        if (!final) {
            *pos = i;
            return SK_XML_NEED_MORE;
        }
        return xml_fatal(f, i, len, "elements around the records nested "
                         "too deep", pos, out);
    }
    memcpy(f->anc + f->anc_used, buf + t.name_off, t.name_len);
    f->anc_used += t.name_len;
    f->anc_len[f->depth++] = (uint16_t)t.name_len;
    *pos = t.end; /* a record boundary: the ancestors are in the state */
    return -1;
}

sk_xml_rc sk_xml_next(sk_xml_framer *f, const sk_xml_spec *s,
                      const uint8_t *buf, size_t len, size_t *pos, int final,
                      sk_xml_record *out)
{
    out->reason = NULL;
    if (f->state == SK_XML_PROLOG)
        return xml_prolog(f, buf, len, pos, final, out);
    if (f->state == SK_XML_AFTER_ROOT) {
        *pos = len;
        return SK_XML_END;
    }
    size_t i = *pos;
    for (;;) {
        const uint8_t *lt = i < len ? memchr(buf + i, '<', len - i) : NULL;
        if (!lt) {
            *pos = len; /* text between records is not kept */
            if (!final)
                return SK_XML_NEED_MORE;
            return SK_XML_END; /* the root was never closed: tolerated */
        }
        i = (size_t)(lt - buf);
        if (i + 1 >= len) {
            *pos = i;
            return final ? SK_XML_END : SK_XML_NEED_MORE;
        }
        int rc;
        if (buf[i + 1] == '/') {
            if ((rc = xml_close(f, buf, len, i, final, pos, &i, out)) >= 0)
                return (sk_xml_rc)rc;
            continue;
        }
        size_t m = skip_markup(buf, len, i);
        if (m == SIZE_MAX) {
            if (!final) {
                *pos = i;
                return SK_XML_NEED_MORE;
            }
            out->start = i;
            out->reason = "comment, CDATA or processing instruction not "
                          "closed";
            out->end = *pos = len;
            return SK_XML_ERROR;
        }
        if (m) {
            i = m;
            continue;
        }
        size_t nb = i + 1;
        while (nb < len && is_name(buf[nb]))
            nb++;
        if (nb >= len && !final) {
            *pos = i;
            return SK_XML_NEED_MORE;
        }
        const uint8_t *name = buf + i + 1;
        size_t nl = nb - (i + 1);
        int is_rec = s && s->rec ? name_eq(s->rec, s->rec_len, name, nl)
                                 : f->depth == 0;
        if (is_rec)
            return scan_record(f, s, buf, len, i, final, pos, out);
        if ((rc = xml_enter(f, buf, len, i, name, nl, final, pos, &i,
                            out)) >= 0)
            return (sk_xml_rc)rc;
    }
}
