/* XML framing and peeking: records and values through attributes, CDATA,
 * comments, PIs, entities, namespaces, self-closing and nested same-name
 * elements; xml_record_element; errors and resync; a prefix fed first
 * gives the same spans; and a differential test: each record span, parsed
 * by libxml2, serializes like the subtree libxml2 finds in the whole
 * document. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <libxml/parser.h>
#include <libxml/tree.h>

#include "format/xmlpeek.h"

typedef struct span {
    size_t start, end;
    int rc;
    char vals[4][64];
} span;

static size_t frame(const sk_xml_spec *s, const char *buf, size_t len,
                    size_t cut, span *out, size_t cap, sk_xml_framer *keep)
{
    sk_xml_framer f;
    sk_xml_framer_init(&f);
    size_t pos = 0, n = 0;
    sk_xml_record r;
    for (int phase = cut < len ? 0 : 1; phase < 2; phase++) {
        size_t l = phase ? len : cut;
        for (;;) {
            sk_xml_rc rc = sk_xml_next(&f, s, (const uint8_t *)buf, l, &pos,
                                       phase == 1, &r);
            if (rc == SK_XML_END || rc == SK_XML_NEED_MORE)
                break;
            assert_true(rc == SK_XML_RECORD || rc == SK_XML_ERROR ||
                        rc == SK_XML_HEADER);
            if (rc == SK_XML_HEADER)
                continue;
            assert_true(n < cap);
            span *sp = &out[n++];
            memset(sp, 0, sizeof *sp);
            sp->start = r.start;
            sp->end = r.end;
            sp->rc = rc;
            for (int v = 0; rc == SK_XML_RECORD && v < 4; v++) {
                if (!r.values[v].kind) {
                    strcpy(sp->vals[v], "-");
                    continue;
                }
                skippr_buf b;
                skippr_buf_init(&b, 1 << 20);
                assert_int_equal(sk_xml_value_text((const uint8_t *)buf,
                                                   &r.values[v], &b),
                                 SKIPPR_OK);
                snprintf(sp->vals[v], sizeof sp->vals[v], "%.*s",
                         (int)b.len, b.data ? (const char *)b.data : "");
                skippr_buf_free(&b);
            }
        }
    }
    if (keep)
        *keep = f;
    else
        sk_xml_framer_free(&f);
    return n;
}

static const char *const paths[] = {"@type", "detail.tenant_id",
                                    "detail.@id", "ts"};

static const char doc[] =
    "\xef\xbb\xbf" /* a BOM is the caller's: the test skips it */
    "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
    "<!DOCTYPE events [ <!ELEMENT events ANY> ]>\n"
    "<!-- archive -->\n"
    "<ev:events xmlns:ev=\"urn:x\" xmlns=\"urn:d\">\n"
    "  <ev:event type='login'><detail id=\"7\"><tenant_id> acme </tenant_id>"
    "</detail><ts>2021-10-03T01:02:03Z</ts></ev:event>\n"
    "  <!-- between -->\n"
    "  <?pi data?>\n"
    "  <event type=\"a&amp;b\"><detail><tenant_id><![CDATA[x<y]]>"
    "</tenant_id></detail><ts>1633219200</ts></event>\n"
    "  <event type=\"self\"/>\n"
    "  <event type=\"nest\"><event><detail><tenant_id>inner</tenant_id>"
    "</detail></event><detail id=\"9\"><tenant_id>caf&#233;"
    "<!-- c --></tenant_id></detail></event>\n"
    "  <event><detail><tenant_id><b>bold</b></tenant_id></detail></event>\n"
    "</ev:events>\n";

static void test_records_and_values(void **state)
{
    (void)state;
    sk_xml_spec *s = sk_xml_spec_new(paths, 4, NULL);
    assert_non_null(s);
    const char *d = doc + 3;
    size_t len = strlen(d);
    span sp[16];
    sk_xml_framer f;
    size_t n = frame(s, d, len, len, sp, 16, &f);
    assert_int_equal(n, 5);
    /* The header: the declaration and the root's start tag, as they are. */
    const char *root = strstr(d, "<ev:events");
    size_t rl = (size_t)(strchr(root, '>') + 1 - root);
    const char *decl = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
    assert_int_equal(f.head_len, strlen(decl) + rl);
    assert_memory_equal(f.head, decl, strlen(decl));
    assert_memory_equal(f.head + strlen(decl), root, rl);
    assert_string_equal(f.root, "ev:events");
    const char *want[5][4] = {
        {"login", "acme", "7", "2021-10-03T01:02:03Z"},
        {"a&b", "x<y", "-", "1633219200"},
        {"self", "-", "-", "-"},
        /* the nested <event> is part of the record, and its detail is
         * not the record's: the path is relative to the record */
        {"nest", "caf\xc3\xa9", "9", "-"},
        /* an element with child elements is no scalar */
        {"-", "-", "-", "-"},
    };
    for (size_t i = 0; i < n; i++) {
        assert_int_equal(sp[i].rc, SK_XML_RECORD);
        assert_int_equal(d[sp[i].start], '<');
        assert_int_equal(d[sp[i].end - 1], '>');
        for (int v = 0; v < 4; v++)
            if (strcmp(sp[i].vals[v], want[i][v]) != 0)
                fail_msg("record %zu path %s: \"%s\", expected \"%s\"", i,
                         paths[v], sp[i].vals[v], want[i][v]);
    }
    assert_memory_equal(d + sp[2].start, "<event type=\"self\"/>",
                        sp[2].end - sp[2].start);
    /* Every prefix fed first gives the same spans. */
    for (size_t cut = 0; cut < len; cut++) {
        span sq[16];
        size_t m = frame(s, d, len, cut, sq, 16, NULL);
        assert_int_equal(m, n);
        for (size_t i = 0; i < n; i++) {
            assert_int_equal(sq[i].start, sp[i].start);
            assert_int_equal(sq[i].end, sp[i].end);
            assert_string_equal(sq[i].vals[1], sp[i].vals[1]);
        }
    }
    sk_xml_framer_free(&f);
    sk_xml_spec_free(s);
}

static void test_record_element_and_errors(void **state)
{
    (void)state;
    const char *p1[] = {"id"};
    sk_xml_spec *s = sk_xml_spec_new(p1, 1, "item");
    const char *d = "<root><batch n=\"1\"><item><id>1</id></item>"
                    "<skip/><item><id>2</id><x></item>"
                    "<item><id>3</id></item></batch>"
                    "<batch><item><id>4</id></item></batch></root>";
    span sp[8];
    size_t n = frame(s, d, strlen(d), strlen(d), sp, 8, NULL);
    assert_int_equal(n, 4);
    assert_int_equal(sp[0].rc, SK_XML_RECORD);
    assert_string_equal(sp[0].vals[0], "1");
    /* <x> is never closed: the record runs to its own close tag */
    assert_int_equal(sp[1].rc, SK_XML_ERROR);
    assert_memory_equal(d + sp[1].start, "<item><id>2</id><x></item>",
                        sp[1].end - sp[1].start);
    assert_string_equal(sp[2].vals[0], "3");
    assert_string_equal(sp[3].vals[0], "4");
    /* A record cut off by the end of the data. */
    const char *cut = "<r><e><id>1</id></e><e><id>2</id>";
    n = frame(s, cut, strlen(cut), strlen(cut), sp, 8, NULL);
    sk_xml_spec_free(s);
    s = sk_xml_spec_new(p1, 1, NULL);
    n = frame(s, cut, strlen(cut), strlen(cut), sp, 8, NULL);
    assert_int_equal(n, 2);
    assert_int_equal(sp[0].rc, SK_XML_RECORD);
    assert_int_equal(sp[1].rc, SK_XML_ERROR);
    assert_int_equal(sp[1].end, strlen(cut));
    sk_xml_spec_free(s);
    /* Bad paths are refused. */
    const char *bad[] = {"a..b"};
    assert_null(sk_xml_spec_new(bad, 1, NULL));
    const char *bad2[] = {"@a.b"};
    assert_null(sk_xml_spec_new(bad2, 1, NULL));
}

/* Found by fuzz_xml: errors that run to the end of the data (text before
 * the root; a root name too long to keep) must wait for the end, or the
 * span depends on where a buffer happened to end. */
static void test_fuzz_errors_wait_for_the_end(void **state)
{
    (void)state;
    sk_xml_spec *s = sk_xml_spec_new(paths, 0, NULL);
    char longroot[400];
    memset(longroot, 'h', sizeof longroot);
    longroot[0] = '<';
    memcpy(longroot + sizeof longroot - 9, "><e/></h>", 9);
    const char *docs[] = {"\x01{ not xml } <r><e/></r>", longroot};
    size_t lens[] = {strlen(docs[0]), sizeof longroot};
    for (int k = 0; k < 2; k++) {
        span whole[4], part[4];
        size_t a = frame(s, docs[k], lens[k], lens[k], whole, 4, NULL);
        assert_int_equal(a, 1);
        assert_int_equal(whole[0].rc, SK_XML_ERROR);
        assert_int_equal(whole[0].end, lens[k]);
        for (size_t cut = 0; cut < lens[k]; cut += 7) {
            size_t b = frame(s, docs[k], lens[k], cut, part, 4, NULL);
            assert_int_equal(b, 1);
            assert_int_equal(part[0].end, whole[0].end);
        }
    }
    sk_xml_spec_free(s);
}

/* Found by fuzz_xml's differential: "<!-->" opens a comment (its end is
 * looked for after the "<!--"), so the elements inside it are no records,
 * as libxml2 reads it. */
static void test_fuzz_comment_end_after_opening(void **state)
{
    (void)state;
    sk_xml_spec *s = sk_xml_spec_new(paths, 0, NULL);
    const char *d = "<r><!--><e>not a record</e>--><e/><!---->"
                    "<?pi?><e></e></r>";
    span sp[4];
    size_t n = frame(s, d, strlen(d), strlen(d), sp, 4, NULL);
    assert_int_equal(n, 2);
    assert_memory_equal(d + sp[0].start, "<e/>", 4);
    assert_memory_equal(d + sp[1].start, "<e></e>", 7);
    sk_xml_spec_free(s);
}

/* A record nested deeper than the framer's levels on its stack (64) goes
 * on in levels on the heap: it is framed whole, its values found, and the
 * heap levels freed (the ASan build's leak check sees them) for a record,
 * an error and a wait for more data alike. */
static void test_deep_record(void **state)
{
    (void)state;
    const char *p1[] = {"id"};
    sk_xml_spec *s = sk_xml_spec_new(p1, 1, NULL);
    assert_non_null(s);
    enum { DEPTH = 100, CAP = DEPTH * 8 + 64 };
    char d[3][CAP];
    for (int k = 0; k < 3; k++) {
        size_t n = 0;
        n += (size_t)snprintf(d[k] + n, CAP - n, "<r><e><id>7</id>");
        for (int i = 0; i < DEPTH; i++)
            n += (size_t)snprintf(d[k] + n, CAP - n, "<a>");
        n += (size_t)snprintf(d[k] + n, CAP - n, "%s",
                              k == 1 ? "</b>" : "<v>7</v>");
        for (int i = 0; k != 2 && i < DEPTH; i++)
            n += (size_t)snprintf(d[k] + n, CAP - n, "</a>");
        if (k != 2)
            snprintf(d[k] + n, CAP - n, "</e></r>");
    }
    span sp[4];
    size_t n = frame(s, d[0], strlen(d[0]), strlen(d[0]), sp, 4, NULL);
    assert_int_equal(n, 1);
    assert_int_equal(sp[0].rc, SK_XML_RECORD);
    assert_int_equal(sp[0].end, strlen(d[0]) - strlen("</r>"));
    assert_string_equal(sp[0].vals[0], "7");
    n = frame(s, d[1], strlen(d[1]), strlen(d[1]), sp, 4, NULL);
    assert_int_equal(n, 1);
    assert_int_equal(sp[0].rc, SK_XML_ERROR);
    /* cut short: NEED_MORE while not final, then an error at the end */
    n = frame(s, d[2], strlen(d[2]), strlen(d[2]) / 2, sp, 4, NULL);
    assert_int_equal(n, 1);
    assert_int_equal(sp[0].rc, SK_XML_ERROR);
    sk_xml_spec_free(s);
}

/* libxml2's own serialization of a node. */
static char *dump(xmlNodePtr n)
{
    xmlBufferPtr b = xmlBufferCreate();
    xmlNodeDump(b, n->doc, n, 0, 0);
    char *s = strdup((const char *)xmlBufferContent(b));
    xmlBufferFree(b);
    return s;
}

static void test_differential_libxml2(void **state)
{
    (void)state;
    uint64_t x = 0x9E3779B97F4A7C15ULL;
    skippr_buf b;
    skippr_buf_init(&b, 1 << 24);
    skippr_buf_printf(&b, "<?xml version=\"1.0\"?>\n<r xmlns:p=\"urn:p\">");
    const char *bits[] = {"<a>t</a>", "<p:b k='v&lt;'/>", "<![CDATA[<&>]]>",
                          "<!--c-->", "text &amp; more", "<c><c>in</c></c>",
                          "<?pi x?>", "<d e=\"1\" f='2'>z</d>"};
    for (int i = 0; i < 3000; i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        skippr_buf_printf(&b, "%s<rec n=\"%d\">", x % 3 ? "\n  " : "", i);
        for (int k = 0; k < (int)(x % 5); k++)
            skippr_buf_printf(&b, "%s", bits[(x >> (8 * k)) % 8]);
        skippr_buf_printf(&b, "</rec>");
        if (x % 7 == 0)
            skippr_buf_printf(&b, "<p:rec/>");
    }
    skippr_buf_printf(&b, "\n</r>\n");
    xmlDocPtr whole = xmlReadMemory((const char *)b.data, (int)b.len, NULL,
                                    NULL, XML_PARSE_NONET);
    assert_non_null(whole);
    sk_xml_spec *s = sk_xml_spec_new(paths, 0, NULL);
    static span sp[8192];
    sk_xml_framer f;
    size_t n = frame(s, (const char *)b.data, b.len, b.len, sp, 8192, &f);
    size_t i = 0;
    for (xmlNodePtr c = xmlDocGetRootElement(whole)->children; c;
         c = c->next) {
        if (c->type != XML_ELEMENT_NODE)
            continue;
        assert_true(i < n);
        assert_int_equal(sp[i].rc, SK_XML_RECORD);
        assert_true(sk_xml_record_valid(&f, b.data + sp[i].start,
                                        sp[i].end - sp[i].start));
        /* Our span, inside the root's start tag, parsed on its own. */
        skippr_buf one;
        skippr_buf_init(&one, 1 << 20);
        skippr_buf_printf(&one, "<r xmlns:p=\"urn:p\">%.*s</r>",
                      (int)(sp[i].end - sp[i].start),
                      (const char *)b.data + sp[i].start);
        xmlDocPtr d = xmlReadMemory((const char *)one.data, (int)one.len,
                                    NULL, NULL, XML_PARSE_NONET);
        assert_non_null(d);
        char *want = dump(c), *got = dump(xmlDocGetRootElement(d)->children);
        if (strcmp(want, got) != 0)
            fail_msg("record %zu: %s\nlibxml2 finds: %s", i, got, want);
        free(want);
        free(got);
        xmlFreeDoc(d);
        skippr_buf_free(&one);
        i++;
    }
    assert_int_equal(i, n);
    assert_false(sk_xml_record_valid(&f, (const uint8_t *)"<a><b></a>", 10));
    sk_xml_framer_free(&f);
    sk_xml_spec_free(s);
    xmlFreeDoc(whole);
    skippr_buf_free(&b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_records_and_values),
        cmocka_unit_test(test_record_element_and_errors),
        cmocka_unit_test(test_differential_libxml2),
        cmocka_unit_test(test_fuzz_errors_wait_for_the_end),
        cmocka_unit_test(test_fuzz_comment_end_after_opening),
        cmocka_unit_test(test_deep_record),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    xmlCleanupParser();
    return rc;
}
