/* XML peek + route on one core, next to libxml2's xmlReader over the same
 * bytes.
 *
 * Builds an XML document in memory (records under a namespaced root: the
 * type as a child or an attribute, the tenant under detail or truck, three
 * time formats, an entity now and then), then times, median of several
 * runs:
 *   - skippr: frame every record (xmlpeek), decode the picked values, route
 *     them with the seed's transform (the memo), as a pipeline task does
 *     with validate: false;
 *   - libxml2: xmlReaderForMemory, reading every node.
 *
 *   bench_xml [MB] [runs]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <libxml/xmlreader.h>

#include "bench_gen.h"
#include "base/common.h"
#include "route/route.h"
#include "route/timeparse.h"
#include "format/xmlpeek.h"

/* bench_gen.h's tenants, with an entity in the last one */
static const char *const xml_tenants[] = {"acme", "globex", "initech",
                                          "umbrella", "hooli", "stark",
                                          "wayne", "a&amp;b"};

static void gen(skippr_buf *b, size_t mb, size_t *n)
{
    skippr_buf_printf(b, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
                     "<ev:events xmlns:ev=\"urn:ev\">\n");
    while (b->len < mb << 20) {
        if (skippr_buf_reserve(b, 4096)) {
            fprintf(stderr, "bench_xml: out of memory\n");
            exit(1);
        }
        const char *t = types[rnd() % 6];
        const char *tn = xml_tenants[rnd() % 8];
        char ts[64];
        bench_time(ts, sizeof ts, 0);
        int truck = strcmp(t, "truck_ping") == 0;
        char typ[64], child[64];
        int as_attr = rnd() % 2;
        typ[0] = child[0] = '\0';
        if (as_attr)
            snprintf(typ, sizeof typ, " type=\"%s\"", t);
        else
            snprintf(child, sizeof child, "<event_type>%s</event_type>", t);
        skippr_buf_printf(b, "  <event id=\"%llu\"%s>%s<timestamp>%s</timestamp>"
                      "<%s><tenant_id>%s</tenant_id><user>u%05d</user></%s>"
                      "<amount>%d.%02d</amount></event>\n",
                      (unsigned long long)(rnd() % 1000000), typ, child, ts,
                      truck ? "truck" : "detail", tn, (int)(rnd() % 99999),
                      truck ? "truck" : "detail", (int)(rnd() % 500),
                      (int)(rnd() % 100));
        (*n)++;
    }
    skippr_buf_printf(b, "</ev:events>\n");
}

int main(int argc, char **argv)
{
    size_t mb = argc > 1 ? (size_t)atoi(argv[1]) : 128;
    int runs = argc > 2 ? atoi(argv[2]) : 5;
    if (runs < 1 || runs > 64)
        runs = 5;
    skippr_buf doc;
    skippr_buf_init(&doc, (size_t)1 << 34);
    size_t nrec = 0;
    gen(&doc, mb, &nrec);
    sk_route_config cfg = {"event_type,@type",
                           "detail.tenant_id,truck.tenant_id", "timestamp",
                           SK_TIME_UNIT_DAY, "p_", 1, 0, NULL, 0};
    const char *err = NULL;
    sk_router *r = sk_router_new(&cfg, &err);
    size_t npaths;
    const char *const *paths = sk_router_paths(r, &npaths);
    sk_xml_spec *spec = sk_xml_spec_new(paths, npaths, NULL);
    sk_memo memo;
    sk_memo_init(&memo, (size_t)1 << 30);
    skippr_buf scratch;
    skippr_buf_init(&scratch, 1 << 20);
    double ours[64], theirs[64];
    uint64_t check = 0;
    xmlInitParser();
    for (int run = 0; run < runs; run++) {
        uint64_t t0 = sk_now_ns();
        sk_xml_framer f;
        sk_xml_framer_init(&f);
        size_t pos = 0, n = 0, next_reset = 0;
        sk_xml_record rec;
        for (;;) {
            sk_xml_rc rc = sk_xml_next(&f, spec, doc.data, doc.len, &pos, 1,
                                       &rec);
            if (rc == SK_XML_END)
                break;
            if (rc != SK_XML_RECORD)
                continue;
            if (pos >= next_reset) {
                sk_memo_reset(&memo);
                next_reset = pos + (1u << 20);
            }
            sk_field fl[SK_PEEK_MAX_PATHS];
            size_t at[SK_PEEK_MAX_PATHS];
            skippr_buf_reset(&scratch);
            for (size_t i = 0; i < npaths; i++) {
                fl[i] = (sk_field){SK_FIELD_ABSENT, NULL, 0};
                if (!rec.values[i].kind)
                    continue;
                at[i] = scratch.len;
                if (sk_xml_value_text(doc.data, &rec.values[i], &scratch) ==
                        0 &&
                    scratch.len > at[i])
                    fl[i] = (sk_field){SK_FIELD_STRING, NULL,
                                       scratch.len - at[i]};
            }
            for (size_t i = 0; i < npaths; i++)
                if (fl[i].kind == SK_FIELD_STRING)
                    fl[i].p = scratch.data + at[i];
            uint32_t id;
            if (sk_route_memo_fields(r, &memo, fl, &id))
                return 1;
            check += memo.keys_at[id].key_hash;
            n++;
        }
        sk_xml_framer_free(&f);
        ours[run] = (double)doc.len / 1e6 / ((double)(sk_now_ns() - t0) / 1e9);
        if (n != nrec) {
            fprintf(stderr, "bench_xml: framed %zu of %zu records\n", n, nrec);
            return 1;
        }
        t0 = sk_now_ns();
        xmlTextReaderPtr rd = xmlReaderForMemory((const char *)doc.data,
                                                 (int)doc.len, NULL, NULL,
                                                 XML_PARSE_NONET);
        size_t nodes = 0;
        while (rd && xmlTextReaderRead(rd) == 1)
            nodes++;
        xmlFreeTextReader(rd);
        theirs[run] = (double)doc.len / 1e6 /
                      ((double)(sk_now_ns() - t0) / 1e9);
        if (nodes < nrec) {
            fprintf(stderr, "bench_xml: xmlReader read %zu nodes\n", nodes);
            return 1;
        }
    }
    double mine = bench_median(ours, runs), lib = bench_median(theirs, runs);
    printf("xml %.1f MB, %zu records (%.0f bytes/record), one core, median "
           "of %d [%llx]\n", (double)doc.len / 1e6, nrec,
           (double)doc.len / (double)nrec, runs,
           (unsigned long long)(check & 0xffff));
    printf("  skippr peek+route (xmlpeek, libxml2 for values with entities): "
           "%.0f MB/s\n", mine);
    printf("  libxml2 xmlReader, every node:                                 "
           "%.0f MB/s\n", lib);
    printf("  skippr / xmlReader = %.2fx\n", mine / lib);
    sk_xml_spec_free(spec);
    sk_router_free(r);
    sk_memo_free(&memo);
    skippr_buf_free(&scratch);
    skippr_buf_free(&doc);
    xmlCleanupParser();
    return 0;
}
