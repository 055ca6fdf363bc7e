/* CSV peek + route on one core, next to libcsv's full parse of the same
 * bytes.
 *
 * Builds a CSV corpus in memory (the seed's fields as columns: event type,
 * id, timestamp in several formats, detail.tenant_id or truck.tenant_id,
 * and a note that is quoted now and then, with commas, doubled quotes and
 * line breaks), then times, median of several runs:
 *   - skippr: frame every row (csvpeek), decode the picked cells, route
 *     them with the seed's transform (the memo), as a pipeline task does;
 *   - libcsv: csv_parse of the whole buffer with field and row callbacks
 *     that only count.
 *
 *   bench_csv [MB] [runs]
 */
#include <csv.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_gen.h"
#include "base/common.h"
#include "format/csvpeek.h"
#include "route/route.h"
#include "route/timeparse.h"

static const char *const notes[] = {
    "plain note", "\"with, a comma\"", "\"say \"\"hi\"\"\"",
    "\"two\nlines\"", "", "caf\xc3\xa9 au lait"};

static void gen(skippr_buf *b, size_t mb, size_t *rows)
{
    skippr_buf_printf(b, "event_type,id,timestamp,detail.tenant_id,"
                     "truck.tenant_id,user,amount,note\n");
    while (b->len < mb << 20) {
        if (skippr_buf_reserve(b, 4096)) {
            fprintf(stderr, "bench_csv: out of memory\n");
            exit(1);
        }
        const char *t = types[rnd() % 6];
        const char *tn = tenants[rnd() % 8];
        char ts[64];
        bench_time(ts, sizeof ts, 0);
        int truck = strcmp(t, "truck_ping") == 0;
        skippr_buf_printf(b, "%s,%llu,%s,%s,%s,u%05d,%d.%02d,%s\n", t,
                      (unsigned long long)(rnd() % 1000000), ts,
                      truck ? "" : tn, truck ? tn : "", (int)(rnd() % 99999),
                      (int)(rnd() % 500), (int)(rnd() % 100),
                      notes[rnd() % 6]);
        (*rows)++;
    }
}

typedef struct counts {
    size_t fields, rows;
} counts;

static void on_field(void *s, size_t n, void *ud)
{
    (void)s;
    (void)n;
    ((counts *)ud)->fields++;
}

static void on_row(int c, void *ud)
{
    (void)c;
    ((counts *)ud)->rows++;
}

static int no_space(unsigned char c)
{
    (void)c;
    return 0;
}

int main(int argc, char **argv)
{
    size_t mb = argc > 1 ? (size_t)atoi(argv[1]) : 128;
    int runs = argc > 2 ? atoi(argv[2]) : 5;
    if (runs < 1 || runs > 64)
        runs = 5;
    skippr_buf corpus;
    skippr_buf_init(&corpus, (size_t)1 << 34);
    size_t nrows = 0;
    gen(&corpus, mb, &nrows);
    sk_route_config cfg = {"event_type", "detail.tenant_id,truck.tenant_id",
                           "timestamp", SK_TIME_UNIT_DAY, "p_", 0, 0, NULL, 0};
    const char *err = NULL;
    sk_router *r = sk_router_new(&cfg, &err);
    size_t npaths;
    const char *const *paths = sk_router_paths(r, &npaths);
    sk_memo memo;
    sk_memo_init(&memo, (size_t)1 << 30);
    skippr_buf scratch;
    skippr_buf_init(&scratch, 1 << 20);
    sk_csv_decoder *dec = sk_csv_decoder_new(',');
    double ours[64], theirs[64];
    uint64_t check = 0;
    for (int run = 0; run < runs; run++) {
        uint64_t t0 = sk_now_ns();
        sk_csv_framer f;
        sk_csv_framer_init(&f, ',');
        size_t pos = 0, n = 0, next_reset = 0;
        sk_csv_record rec;
        for (;;) {
            sk_csv_rc rc = sk_csv_next(&f, paths, npaths, corpus.data,
                                       corpus.len, &pos, 1, &rec);
            if (rc == SK_CSV_END)
                break;
            if (rc != SK_CSV_RECORD)
                continue;
            if (pos >= next_reset) { /* a task's memo lives for ~1 MiB */
                sk_memo_reset(&memo);
                next_reset = pos + (1u << 20);
            }
            sk_field fl[SK_PEEK_MAX_PATHS];
            size_t at[SK_PEEK_MAX_PATHS];
            skippr_buf_reset(&scratch);
            for (size_t i = 0; i < npaths; i++) {
                const sk_csv_cell *c = &rec.cells[i];
                fl[i] = (sk_field){SK_FIELD_ABSENT, NULL, 0};
                if (!c->present || c->len == 0)
                    continue;
                const uint8_t *raw = corpus.data + c->off;
                if (raw[0] != '"') {
                    fl[i] = (sk_field){SK_FIELD_STRING, raw, c->len};
                    continue;
                }
                at[i] = scratch.len;
                if (sk_csv_decode_cell(dec, raw, c->len, &scratch) == 0 &&
                    scratch.len > at[i])
                    fl[i] = (sk_field){SK_FIELD_STRING, NULL,
                                       scratch.len - at[i]};
            }
            for (size_t i = 0; i < npaths; i++)
                if (fl[i].kind == SK_FIELD_STRING && !fl[i].p)
                    fl[i].p = scratch.data + at[i];
            uint32_t id;
            if (sk_route_memo_fields(r, &memo, fl, &id))
                return 1;
            check += memo.keys_at[id].key_hash;
            n++;
        }
        sk_csv_framer_free(&f);
        ours[run] = (double)corpus.len / 1e6 /
                    ((double)(sk_now_ns() - t0) / 1e9);
        if (n != nrows) {
            fprintf(stderr, "bench_csv: framed %zu of %zu rows\n", n, nrows);
            return 1;
        }

        t0 = sk_now_ns();
        struct csv_parser p;
        csv_init(&p, 0);
        csv_set_space_func(&p, no_space);
        counts c = {0, 0};
        csv_parse(&p, corpus.data, corpus.len, on_field, on_row, &c);
        csv_fini(&p, on_field, on_row, &c);
        csv_free(&p);
        theirs[run] = (double)corpus.len / 1e6 /
                      ((double)(sk_now_ns() - t0) / 1e9);
        if (c.rows != nrows + 1) {
            fprintf(stderr, "bench_csv: libcsv saw %zu rows\n", c.rows);
            return 1;
        }
    }
    double mine = bench_median(ours, runs), lib = bench_median(theirs, runs);
    printf("csv %.1f MB, %zu rows (%.0f bytes/row), one core, median of %d "
           "[%llx]\n", (double)corpus.len / 1e6, nrows,
           (double)corpus.len / (double)nrows, runs,
           (unsigned long long)(check & 0xffff));
    printf("  skippr peek+route (csvpeek, libcsv for quoted picked cells): "
           "%.0f MB/s\n", mine);
    printf("  libcsv full parse (callbacks that count):                    "
           "%.0f MB/s\n", lib);
    printf("  skippr / libcsv = %.2fx\n", mine / lib);
    sk_csv_decoder_free(dec);
    sk_router_free(r);
    sk_memo_free(&memo);
    skippr_buf_free(&scratch);
    skippr_buf_free(&corpus);
    return 0;
}
