/* Peek + route throughput on one core.
 *
 * Builds a Firehose-like corpus in memory (mixed event types, nested
 * detail.tenant_id or truck.tenant_id, several timestamp formats), then
 * frames, peeks and routes every record with the seed's transform, exactly
 * as a pipeline task does, and prints the median of several runs.
 *
 *   bench_peek [MB] [runs] [framing: lines|concat|pretty]
 *
 * SKIPPR_BENCH_SKIM=1 peeks as a pipeline with `validate: false` does:
 * only as far as routing needs, skipping the rest of each record. The
 * "lines" framing is read as a source with `format: jsonl` is: with
 * SKIPPR_BENCH_SKIM=1 a settled record's end is found with memchr.
 *   bench_peek --dump PATH [MB] [framing]    write the corpus to PATH
 *   bench_peek --file PATH [runs] [label]    peek+route PATH instead
 *
 * --dump and --file let another program (bench/simdjson_peek.cpp) work on
 * exactly the same bytes.
 *
 * SKIPPR_BENCH_MASK=avx2|sse2|scalar times JSON's structural stage alone
 * (format/jsonmask.h: every 64-byte block's masks) with that kernel,
 * instead of peek + route; SKIPPR_BENCH_SPLIT=avx2|sse2|scalar times
 * framing by it (format/jsonsplit.h: each record's end by its brackets),
 * next to the scanner framing alone (no values picked).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/common.h"
#include "format/json.h"
#include "format/jsonmask.h"
#include "format/jsonsplit.h"
#include "route/route.h"
#include "bench_gen.h"
#include "route/timeparse.h"

#define PIECE_BYTES (1u << 20) /* a pipeline task's share of a window */

static void gen_record(skippr_buf *b, int pretty)
{
    const char *t = types[rnd() % 6];
    const char *tn = tenants[rnd() % 8];
    char ts[64];
    bench_time(ts, sizeof ts, 1);
    const char *nl = pretty ? "\n  " : "";
    const char *sp = pretty ? " " : "";
    if (strcmp(t, "truck_ping") == 0)
        skippr_buf_printf(b, "{%s\"event_type\":%s\"%s\",%s\"id\":%s%llu,%s"
                      "\"timestamp\":%s%s,%s\"truck\":%s{\"tenant_id\":\"%s\","
                      "\"lat\":%d.%06d,\"lon\":-%d.%06d,\"speed\":%d}%s}",
                      nl, sp, t, nl, sp, (unsigned long long)(rnd() % 1000000),
                      nl, sp, ts, nl, sp, tn, (int)(rnd() % 90),
                      (int)(rnd() % 1000000), (int)(rnd() % 180),
                      (int)(rnd() % 1000000), (int)(rnd() % 130),
                      pretty ? "\n" : "");
    else
        skippr_buf_printf(b, "{%s\"event_type\":%s\"%s\",%s\"id\":%s%llu,%s"
                      "\"timestamp\":%s%s,%s\"detail\":%s{\"tenant_id\":\"%s\","
                      "\"user\":\"u%05d\",\"session\":\"%016llx\",\"tags\":"
                      "[\"web\",\"eu-west-1\"],\"amount\":%d.%02d,\"note\":"
                      "\"caf\\u00e9 \\\"quoted\\\" text\"}%s}",
                      nl, sp, t, nl, sp, (unsigned long long)(rnd() % 1000000),
                      nl, sp, ts, nl, sp, tn, (int)(rnd() % 99999),
                      (unsigned long long)rnd(), (int)(rnd() % 500),
                      (int)(rnd() % 100), pretty ? "\n" : "");
}

/* The corpus: about mb MiB of records in the given framing. */
static size_t generate(skippr_buf *corpus, size_t mb, const char *framing)
{
    int pretty = strcmp(framing, "pretty") == 0;
    const char *sep = strcmp(framing, "concat") == 0 ? "" : "\n";
    size_t nrec = 0;
    while (corpus->len < mb << 20) {
        if (skippr_buf_reserve(corpus, 4096) != SKIPPR_OK) {
            fprintf(stderr, "bench_peek: out of memory\n");
            exit(1);
        }
        gen_record(corpus, pretty);
        skippr_buf_append(corpus, sep, strlen(sep));
        nrec++;
    }
    return nrec;
}

/* Read a whole file into corpus; returns 0 on success. */
static int load(skippr_buf *corpus, const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        perror(path);
        return -1;
    }
    char chunk[1 << 16];
    size_t n;
    int rc = 0;
    while (!rc && (n = fread(chunk, 1, sizeof chunk, f)) > 0)
        rc = skippr_buf_append(corpus, chunk, n) != SKIPPR_OK;
    if (ferror(f))
        rc = -1;
    fclose(f);
    if (rc)
        fprintf(stderr, "bench_peek: cannot load %s\n", path);
    return rc;
}

/* The structural stage over the corpus with kernel, runs times: prints
 * the median MB/s. 0, or 1 when this CPU has no such kernel. */
static int mask_bench(const skippr_buf *corpus, int runs, const char *kernel,
                      const char *framing)
{
    if (sk_jmask_use(kernel)) {
        fprintf(stderr, "no %s kernel on this CPU\n", kernel);
        return 1;
    }
    double rate[64];
    uint64_t check = 0;
    for (int run = 0; run < runs && run < 64; run++) {
        uint64_t t0 = sk_now_ns();
        sk_jmask_carry c = {0, 0};
        sk_jmask m;
        size_t i = 0;
        for (; i + SK_JMASK_BLOCK <= corpus->len; i += SK_JMASK_BLOCK) {
            sk_jmask_block(&c, corpus->data + i, &m);
            check += (uint64_t)__builtin_popcountll(m.structural) +
                     (uint64_t)__builtin_popcountll(m.newline);
        }
        sk_jmask_tail(&c, corpus->data + i, corpus->len - i, &m);
        rate[run] = (double)corpus->len / 1e6 /
                    ((double)(sk_now_ns() - t0) / 1e9);
    }
    printf("structural stage %-6s %-6s one core: %.0f MB/s median of %d "
           "runs (%.1f MB) [%llu]\n", kernel, framing,
           bench_median(rate, runs), runs, (double)corpus->len / 1e6,
           (unsigned long long)(check / (uint64_t)runs));
    return 0;
}

/* Records framed over the corpus by brackets (split) or by the scanner
 * with no values to pick; -1 when a record is not an object. */
static long frame_all(const skippr_buf *corpus, int split)
{
    const uint8_t *b = corpus->data;
    size_t len = corpus->len, pos = 0;
    long n = 0;
    if (!split) {
        sk_json_framer f;
        sk_json_framer_init(&f);
        sk_json_record rec;
        while (sk_json_next(&f, NULL, b, len, &pos, 1, &rec) ==
               SK_JSON_RECORD)
            n++;
        return n;
    }
    sk_jsplitter sp;
    sk_jsplit_init(&sp, b, len, 0);
    size_t start, end;
    int rc;
    while ((rc = sk_jsplit_next(&sp, &start, &end)) == SK_JSPLIT_RECORD)
        n++;
    return rc == SK_JSPLIT_END ? n : -1;
}

/* Framing by brackets with kernel, next to the scanner's: median MB/s. */
static int split_bench(const skippr_buf *corpus, int runs, const char *kernel,
                       const char *framing)
{
    if (sk_jmask_use(kernel)) {
        fprintf(stderr, "no %s kernel on this CPU\n", kernel);
        return 1;
    }
    double rate[2][64];
    long n[2] = {0, 0};
    for (int run = 0; run < runs && run < 64; run++)
        for (int split = 0; split < 2; split++) {
            uint64_t t0 = sk_now_ns();
            n[split] = frame_all(corpus, split);
            rate[split][run] = (double)corpus->len / 1e6 /
                               ((double)(sk_now_ns() - t0) / 1e9);
        }
    if (n[0] != n[1]) {
        fprintf(stderr, "framed %ld records by brackets, %ld by the "
                        "scanner\n", n[1], n[0]);
        return 1;
    }
    double a = bench_median(rate[1], runs), b = bench_median(rate[0], runs);
    printf("framing %-6s %-6s one core: by brackets %.0f MB/s, by the "
           "scanner %.0f MB/s (%.2fx), %ld records, median of %d\n",
           framing, kernel, a, b, a / b, n[0], runs);
    return 0;
}

int main(int argc, char **argv)
{
    skippr_buf corpus;
    skippr_buf_init(&corpus, (size_t)4 << 30);
    if (argc > 2 && strcmp(argv[1], "--dump") == 0) {
        size_t mb = argc > 3 ? (size_t)atoi(argv[3]) : 256;
        generate(&corpus, mb, argc > 4 ? argv[4] : "lines");
        FILE *f = fopen(argv[2], "wb");
        int bad = !f || fwrite(corpus.data, 1, corpus.len, f) != corpus.len;
        if (f && fclose(f) != 0)
            bad = 1;
        if (bad)
            perror(argv[2]);
        skippr_buf_free(&corpus);
        return bad;
    }
    int from_file = argc > 2 && strcmp(argv[1], "--file") == 0;
    if (from_file) {
        argv++; /* shift: PATH takes the place of MB */
        argc--;
    }
    size_t mb = argc > 1 && !from_file ? (size_t)atoi(argv[1]) : 256;
    int runs = argc > 2 ? atoi(argv[2]) : 5;
    if (runs < 1)
        runs = 1;
    const char *framing = argc > 3 ? argv[3] : "lines";
    size_t nrec = 0;
    const char *framing_note = "";
    if (from_file) {
        if (load(&corpus, argv[1]))
            return 1;
    } else {
        nrec = generate(&corpus, mb, framing);
    }
    const char *mask = getenv("SKIPPR_BENCH_MASK");
    const char *split = getenv("SKIPPR_BENCH_SPLIT");
    if ((mask && *mask) || (split && *split)) {
        int rc = mask && *mask ? mask_bench(&corpus, runs, mask, framing)
                               : split_bench(&corpus, runs, split, framing);
        skippr_buf_free(&corpus);
        return rc;
    }
    sk_route_config cfg = {"event_type", "detail.tenant_id,truck.tenant_id",
                           "timestamp", SK_TIME_UNIT_DAY, "p_", 0, 0, NULL, 0};
    const char *skim = getenv("SKIPPR_BENCH_SKIM");
    cfg.skim = skim && strcmp(skim, "1") == 0;
    /* Newline-delimited input is read as a source with format: jsonl. */
    cfg.lines = strcmp(framing, "lines") == 0;
    if (cfg.skim)
        framing_note = cfg.lines ? " (validate: false, format: jsonl)"
                                 : " (validate: false)";
    sk_router *r = sk_router_new(&cfg, NULL);
    skippr_buf scratch;
    sk_memo memo;
    sk_memo_init(&memo, (size_t)1 << 30);
    skippr_buf_init(&scratch, 1 << 20);
    double best[64];
    uint64_t check = 0;
    for (int run = 0; run < runs && run < 64; run++) {
        uint64_t t0 = sk_now_ns();
        sk_json_framer f;
        sk_json_framer_init(&f);
        sk_json_record rec;
        size_t pos = 0, n = 0, piece_end = 0;
        for (;;) {
            sk_json_rc rc = sk_json_next(&f, sk_router_json_spec(r),
                                         corpus.data, corpus.len, &pos, 1,
                                         &rec);
            if (rc != SK_JSON_RECORD)
                break;
            /* A pipeline task keeps its memo for one piece of the window
             * (at least 256 KiB); reset it as often here. */
            if (pos >= piece_end) {
                sk_memo_reset(&memo);
                piece_end = pos + PIECE_BYTES;
            }
            uint32_t id;
            if (sk_route_memo(r, &memo, corpus.data, rec.values, &scratch,
                              &id))
                return 1;
            check += memo.keys_at[id].key_hash;
            n++;
        }
        double secs = (double)(sk_now_ns() - t0) / 1e9;
        if (from_file && run == 0)
            nrec = n;
        if (n != nrec) {
            fprintf(stderr, "framed %zu of %zu records\n", n, nrec);
            return 1;
        }
        best[run] = (double)corpus.len / 1e6 / secs;
    }
    double median = bench_median(best, runs);
    printf("peek+route %-6s one core: %.0f MB/s median of %d runs (%.1f MB, "
           "%zu records, %.0f bytes/record) [%llx]%s\n", framing,
           median, runs, (double)corpus.len / 1e6, nrec,
           (double)corpus.len / (double)nrec, (unsigned long long)(check & 0xffff), framing_note);
    sk_router_free(r);
    sk_memo_free(&memo);
    skippr_buf_free(&scratch);
    skippr_buf_free(&corpus);
    return 0;
}
