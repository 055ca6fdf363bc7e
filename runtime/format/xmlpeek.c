/* XML framing and peeking: see xmlpeek.h. The framer's walk to the
 * records lives here; tags in xmllex.c, a record's elements in xmlwalk.c.
 */
#include "format/xmlpeek.h"

#include <string.h>

#include "format/xml_impl.h"


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
        int is_decl = xml_starts(buf + i, len - i, "<?xml") && len - i > 5 &&
                      is_ws(buf[i + 5]);
        size_t m = xml_skip_markup(buf, len, i);
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
        int rc = xml_parse_tag(buf, len, i, &t);
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
    int rc = xml_parse_close(buf, len, i, &no, &nn, &e);
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
/* A bad record from start (root name rname[0..rnl)), its error at i: its
 * span runs to where xml_resync() finds the next record. ERROR, or NEED_MORE
 * while that place is not in buf yet. */
static sk_xml_rc record_error(const sk_xml_framer *f, const uint8_t *buf,
                              size_t len, size_t start, size_t i,
                              const uint8_t *rname, size_t rnl, int final,
                              size_t *pos, sk_xml_record *out)
{
    size_t end;
    if (xml_resync(f->root, f->root_len, buf, len, start, i, rname, rnl,
                   final, &end) != 0) {
        *pos = start;
        return SK_XML_NEED_MORE;
    }
    out->end = *pos = end;
    return SK_XML_ERROR;
}

/* A record at buf[i] (its element's name name[0..nl)): the walk's
 * result, an error's span found here, where the framer knows the root. */
static sk_xml_rc xml_record(const sk_xml_framer *f, const sk_xml_spec *s,
                            const uint8_t *buf, size_t len, size_t i,
                            const uint8_t *name, size_t nl, int final,
                            size_t *pos, sk_xml_record *out)
{
    size_t at = *pos;
    sk_xml_rc rc = xml_scan_record(s, buf, len, i, final, &at, out);
    if (rc != SK_XML_ERROR) {
        *pos = at;
        return rc;
    }
    return record_error(f, buf, len, i, at, name, nl, final, pos, out);
}

static int xml_enter(sk_xml_framer *f, const uint8_t *buf, size_t len,
                     size_t i, const uint8_t *name, size_t nl, int final,
                     size_t *pos, size_t *next, sk_xml_record *out)
{
    tag t;
    int rc = xml_parse_tag(buf, len, i, &t);
    if (rc == -1 && !final) {
        *pos = i;
        return SK_XML_NEED_MORE;
    }
    if (rc != 0) {
        size_t end;
        if (xml_resync(f->root, f->root_len, buf, len, i, i + 1, name, nl,
                       final, &end) != 0) {
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
        size_t m = xml_skip_markup(buf, len, i);
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
        int is_rec = s && s->rec ? xml_name_eq(s->rec, s->rec_len, name, nl)
                                 : f->depth == 0;
        if (is_rec)
            return xml_record(f, s, buf, len, i, name, nl, final, pos, out);
        if ((rc = xml_enter(f, buf, len, i, name, nl, final, pos, &i,
                            out)) >= 0)
            return (sk_xml_rc)rc;
    }
}
