/* What libxml2 does for the XML framer: a routing value's text with its
 * entities and CDATA decoded (sk_xml_value_text), and a record checked
 * for well-formedness when validate is true (sk_xml_record_valid). The
 * framer itself (xmlpeek.c) never calls libxml2.
 */
#include "format/xmlpeek.h"

#include <pthread.h>
#include <string.h>

#include <libxml/parser.h>
#include <libxml/tree.h>

static inline int xml_ws(uint8_t c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

static pthread_once_t xml_once = PTHREAD_ONCE_INIT;
static void xml_init(void) { xmlInitParser(); }

static int trim_append(skippr_buf *out, const uint8_t *p, size_t n)
{
    while (n && xml_ws(p[0])) {
        p++;
        n--;
    }
    while (n && xml_ws(p[n - 1]))
        n--;
    return n ? skippr_buf_append(out, p, n) : SKIPPR_OK;
}

static const int PARSE_OPTS = XML_PARSE_NONET | XML_PARSE_NOERROR |
                              XML_PARSE_NOWARNING;

int sk_xml_value_text(const uint8_t *buf, const sk_xml_value *v, skippr_buf *out)
{
    const uint8_t *p = buf + v->off;
    size_t n = v->len;
    if (!memchr(p, '&', n) && !memchr(p, '<', n))
        return trim_append(out, p, n);
    pthread_once(&xml_once, xml_init);
    /* Wrap the raw text in a tiny document and let libxml2 decode it. */
    skippr_buf doc;
    skippr_buf_init(&doc, n + 64);
    int rc;
    if (v->kind == 1) {
        uint8_t q = buf[v->off - 1]; /* the value's own quote */
        rc = skippr_buf_append(&doc, "<v a=", 5);
        if (!rc)
            rc = skippr_buf_putc(&doc, q);
        if (!rc)
            rc = skippr_buf_append(&doc, p, n);
        if (!rc)
            rc = skippr_buf_putc(&doc, q);
        if (!rc)
            rc = skippr_buf_append(&doc, "/>", 2);
    } else {
        rc = skippr_buf_append(&doc, "<v>", 3);
        if (!rc)
            rc = skippr_buf_append(&doc, p, n);
        if (!rc)
            rc = skippr_buf_append(&doc, "</v>", 4);
    }
    if (rc) {
        skippr_buf_free(&doc);
        return rc;
    }
    xmlDocPtr d = xmlReadMemory((const char *)doc.data, (int)doc.len, NULL,
                                "UTF-8", PARSE_OPTS);
    skippr_buf_free(&doc);
    if (!d)
        return SKIPPR_CORRUPT;
    xmlNodePtr root = xmlDocGetRootElement(d);
    xmlChar *text = !root ? NULL
                    : v->kind == 1 ? xmlGetProp(root, (const xmlChar *)"a")
                                   : xmlNodeGetContent(root);
    rc = text ? trim_append(out, text, strlen((const char *)text))
              : SKIPPR_CORRUPT;
    xmlFree(text);
    xmlFreeDoc(d);
    return rc;
}

int sk_xml_record_valid(const sk_xml_framer *f, const uint8_t *rec,
                        size_t len)
{
    pthread_once(&xml_once, xml_init);
    /* The record inside the root's start tag, so its namespace prefixes
     * are bound; the declaration is left out (the bytes are parsed as
     * they are). */
    const uint8_t *tag = f->head ? memchr(f->head, '\n', f->head_len) : NULL;
    size_t tl = tag ? f->head_len - (size_t)(tag + 1 - f->head) : 0;
    skippr_buf doc;
    skippr_buf_init(&doc, len + tl + f->root_len + 16);
    int ok = 0;
    if ((!tl || !skippr_buf_append(&doc, tag + 1, tl)) &&
        !skippr_buf_append(&doc, rec, len) &&
        (!tl || (!skippr_buf_append(&doc, "</", 2) &&
                 !skippr_buf_append(&doc, f->root, f->root_len) &&
                 !skippr_buf_putc(&doc, '>')))) {
        xmlDocPtr d = xmlReadMemory((const char *)doc.data, (int)doc.len,
                                    NULL, NULL, PARSE_OPTS);
        ok = d != NULL;
        xmlFreeDoc(d);
    }
    skippr_buf_free(&doc);
    return ok;
}
