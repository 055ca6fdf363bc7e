/* libFuzzer target: the XML record scanner (xmlpeek.c).
 *
 * The first input byte picks the record element (none, "e" or "a") and
 * where the data is cut for a two-part feed; the rest is the document.
 * Checked on every input:
 * - spans stay inside the buffer and come in order;
 * - fed in two parts (a prefix not final, then the whole), the scanner
 *   reports exactly the spans it reports on the whole at once;
 * - decoding a picked value and checking a record with libxml2 never
 *   crash;
 * - differential: when libxml2 parses the whole document and the root's
 *   children are the records, there are as many records as the root has
 *   child elements, and none is an error.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <libxml/parser.h>
#include <libxml/tree.h>

#include "format/xmlpeek.h"

#define MAX_RECS 4096

typedef struct span {
    size_t start, end;
    int rc;
} span;

static const char *const paths[] = {"a", "@b", "a.c", "a.@d"};

static size_t frame(const sk_xml_spec *s, const uint8_t *d, size_t n,
                    size_t cut, span *out, int *errors)
{
    sk_xml_framer f;
    sk_xml_framer_init(&f);
    size_t pos = 0, k = 0;
    sk_xml_record r;
    skippr_buf v;
    skippr_buf_init(&v, (size_t)1 << 24);
    for (int phase = cut < n ? 0 : 1; phase < 2; phase++) {
        size_t len = phase ? n : cut;
        for (;;) {
            sk_xml_rc rc = sk_xml_next(&f, s, d, len, &pos, phase == 1, &r);
            if (rc == SK_XML_END || rc == SK_XML_NEED_MORE)
                break;
            if (rc == SK_XML_NOMEM)
                abort();
            if (pos > len || (rc != SK_XML_HEADER &&
                              (r.start > r.end || r.end > len)))
                abort();
            if (rc == SK_XML_HEADER)
                continue;
            if (k > 0 && r.start < out[k - 1].end)
                abort();
            if (rc == SK_XML_RECORD) {
                for (int i = 0; i < 4; i++) {
                    if (!r.values[i].kind)
                        continue;
                    if (r.values[i].off + r.values[i].len > r.end)
                        abort();
                    skippr_buf_reset(&v);
                    (void)sk_xml_value_text(d, &r.values[i], &v);
                }
                (void)sk_xml_record_valid(&f, d + r.start, r.end - r.start);
            } else {
                (*errors)++;
            }
            if (k == MAX_RECS)
                goto done;
            out[k++] = (span){r.start, r.end, rc};
        }
    }
done:
    skippr_buf_free(&v);
    sk_xml_framer_free(&f);
    return k;
}

static void quiet(void *ctx, const char *msg, ...)
{
    (void)ctx;
    (void)msg;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 2)
        return 0;
    static int init;
    if (!init) {
        xmlInitParser();
        xmlSetGenericErrorFunc(NULL, quiet);
        init = 1;
    }
    static const char *const elems[] = {NULL, "e", "a", NULL};
    const char *elem = elems[data[0] & 3];
    const uint8_t *d = data + 1;
    size_t n = size - 1, cut = n * (data[0] >> 2) / 64;
    sk_xml_spec *s = sk_xml_spec_new(paths, 4, elem);
    if (!s)
        abort();
    static span whole[MAX_RECS], parts[MAX_RECS];
    int e1 = 0, e2 = 0;
    size_t a = frame(s, d, n, n, whole, &e1);
    size_t b = frame(s, d, n, cut, parts, &e2);
    if (a < MAX_RECS && b < MAX_RECS) {
        if (a != b)
            abort();
        for (size_t i = 0; i < a; i++)
            if (whole[i].start != parts[i].start ||
                whole[i].end != parts[i].end || whole[i].rc != parts[i].rc)
                abort();
    }
    if (!elem && a < MAX_RECS) {
        /* The oracle is libxml2 on a document it reads without any error,
         * and without a DOCTYPE: libxml2 2.9 also takes an internal subset
         * after a closed one ("<!DOCTYPE r>[<!ELEMENT r ANY>]><r>..."),
         * which the framer, following the XML grammar, does not. */
        int doctype = memmem(d, n, "<!DOCTYPE", 9) != NULL;
        xmlResetLastError();
        xmlDocPtr doc =
            doctype ? NULL
                    : xmlReadMemory((const char *)d, (int)n, NULL, NULL,
                                    XML_PARSE_NONET | XML_PARSE_NOERROR |
                                        XML_PARSE_NOWARNING);
        if (doc && xmlGetLastError() != NULL) {
            xmlFreeDoc(doc);
            doc = NULL;
        }
        if (doc) {
            size_t kids = 0;
            xmlNodePtr root = xmlDocGetRootElement(doc);
            for (xmlNodePtr c = root ? root->children : NULL; c; c = c->next)
                kids += c->type == XML_ELEMENT_NODE;
            if (root && (kids != a || e1 != 0))
                abort();
            xmlFreeDoc(doc);
        }
    }
    sk_xml_spec_free(s);
    return 0;
}
