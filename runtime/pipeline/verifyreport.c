/* `skipprd verify`'s report: as text for a person, or as one JSON
 * document (see verify.h). Owns: nothing. Thread: the pipeline thread.
 */
#include "pipeline/verify.h"

#include <inttypes.h>
#include <stdio.h>

#include <jansson.h>

#include "pipeline/verifysince.h"

/* Whether the verify found nothing wrong. */
static int all_clean(const engine *e, const sk_verify_result *r,
                     const pl_since *since)
{
    return sk_verify_clean(r) && !(since && pl_since_faults(e, since));
}

/* The source units the digests hold: read now, or by every verify up to
 * this one. */
static uint64_t units_of(const engine *e, const pl_since *since)
{
    if (!since)
        return pl_verify_units(e->verify);
    return pl_since_prior(since).units +
           pl_verify_since_counts_of(e->verify).fresh[PL_VERIFY_SOURCE];
}

/* What an incremental verify read, as JSON (the caller's). */
static json_t *since_json(const engine *e, const pl_since *s)
{
    pl_verify_since_counts n = pl_verify_since_counts_of(e->verify);
    sk_vmark_totals t = pl_since_prior(s);
    return json_pack(
        "{s:I,s:{s:I,s:I,s:I,s:I},s:{s:I,s:I,s:I,s:I},s:I}", "previous",
        (json_int_t)t.at, "source", "read", (json_int_t)n.fresh[0],
        "before", (json_int_t)n.before[0], "changed",
        (json_int_t)n.changed[0], "waiting", (json_int_t)n.waiting, "sink",
        "read", (json_int_t)n.fresh[1], "before", (json_int_t)n.before[1],
        "changed", (json_int_t)n.changed[1], "gone",
        (json_int_t)pl_since_gone(e, s), "open_partitions",
        (json_int_t)pl_since_open_count(s));
}

/* What an incremental verify read, for a person. */
static void since_text(const engine *e, const pl_since *s, FILE *f)
{
    pl_verify_since_counts n = pl_verify_since_counts_of(e->verify);
    sk_vmark_totals t = pl_since_prior(s);
    if (t.at)
        fprintf(f, "  since the verify of unix time %" PRId64
                   " (%" PRIu64 " units, %" PRIu64 " objects):\n",
                t.at, t.units, t.objects);
    else
        fputs("  first incremental verify: every finished unit is new\n", f);
    fprintf(f, "  source: %" PRIu64 " units read now, %" PRIu64
               " read before; %" PRIu64 " changed and copied again, read "
               "again; %" PRIu64 " not finished by the copy, left for later\n",
            n.fresh[0], n.before[0], n.changed[0], n.waiting);
    fprintf(f, "  sink:   %" PRIu64 " objects read now, %" PRIu64
               " read before; %" PRIu64 " changed since read and %" PRIu64
               " gone (faults: a full verify names their records)\n",
            n.fresh[1], n.before[1], n.changed[1], pl_since_gone(e, s));
    if (pl_since_open_count(s))
        fprintf(f, "  %zu partitions still have records on their way in the "
                   "copy: judged once they land\n", pl_since_open_count(s));
}

static json_t *digest_json(const sk_digest *d)
{
    return json_pack("{s:I,s:I}", "records", (json_int_t)d->records,
                     "bytes", (json_int_t)d->bytes);
}

/* The report as one JSON object (the caller's); NULL on allocation
 * failure. */
static json_t *report_json(const engine *e, const sk_verify_result *r,
                           const pl_since *since)
{
    pl_verify_objects o = pl_verify_sink_objects(e->verify);
    sk_digest dead = pl_verify_dead_letters(e->verify);
    json_t *diffs = json_array();
    for (size_t i = 0; diffs && i < r->nparts; i++) {
        const sk_verify_part *p = &r->parts[i];
        json_array_append_new(
            diffs, json_pack("{s:s,s:s,s:I,s:I,s:I,s:I}", "partition", p->key,
                             "verdict", sk_verify_verdict_name(p->verdict),
                             "expected_records", (json_int_t)p->want.records,
                             "found_records", (json_int_t)p->got.records,
                             "expected_bytes", (json_int_t)p->want.bytes,
                             "found_bytes", (json_int_t)p->got.bytes));
    }
    uint64_t bad = r->partitions - r->by_verdict[SK_VERIFY_MATCH] -
                   r->by_verdict[SK_VERIFY_OPEN];
    return json_pack(
        "{s:b,s:s,s:{s:o,s:I,s:o},s:{s:o,s:{s:I,s:I,s:I,s:I,s:I}},"
        "s:{s:I,s:I,s:I,s:I,s:I,s:I},s:o,s:I}",
        "clean", all_clean(e, r, since), "pipeline", e->cfg->name,
        "source", "records", digest_json(&r->want), "units",
        (json_int_t)units_of(e, since), "dead_letters",
        digest_json(&dead),
        "sink", "records", digest_json(&r->got), "objects", "data",
        (json_int_t)o.data, "dead_letters", (json_int_t)o.dead, "skippr",
        (json_int_t)o.own, "unfinished", (json_int_t)o.partial,
        "outside_partitions", (json_int_t)o.outside,
        "partitions", "total", (json_int_t)r->partitions, "match",
        (json_int_t)r->by_verdict[SK_VERIFY_MATCH], "differ",
        (json_int_t)r->by_verdict[SK_VERIFY_DIFFER], "missing",
        (json_int_t)r->by_verdict[SK_VERIFY_MISSING], "extra",
        (json_int_t)r->by_verdict[SK_VERIFY_EXTRA], "open",
        (json_int_t)r->by_verdict[SK_VERIFY_OPEN], "differences", diffs ? diffs : json_array(), "differences_not_listed",
        (json_int_t)(bad - r->nparts));
}

/* One named record difference as JSON. */
static json_t *diff_json(const sk_rec_diff *d)
{
    json_t *src = d->src_where
                      ? json_pack("{s:s,s:I}", "unit", d->src_where,
                                  "offset", (json_int_t)d->src_offset)
                      : json_null();
    json_t *sink = d->sink_where
                       ? json_pack("{s:s,s:I,s:s}", "object", d->sink_where,
                                   "offset", (json_int_t)d->sink_offset,
                                   "partition", d->sink_partition)
                       : json_null();
    return json_pack("{s:s,s:s,s:o,s:o}", "kind", sk_rec_kind_name(d->kind),
                     "partition", d->partition, "source",
                     src ? src : json_null(), "sink",
                     sink ? sink : json_null());
}

static json_t *records_json(const sk_rec_report *rr)
{
    json_t *listed = json_array();
    for (size_t i = 0; listed && i < rr->nfirst; i++)
        json_array_append_new(listed, diff_json(&rr->first[i]));
    return json_pack("{s:I,s:I,s:I,s:I,s:b,s:I,s:o}", "missing",
                     (json_int_t)rr->counts[SK_REC_MISSING], "moved",
                     (json_int_t)rr->counts[SK_REC_MOVED], "duplicated",
                     (json_int_t)rr->counts[SK_REC_DUPLICATED], "unexpected",
                     (json_int_t)rr->counts[SK_REC_UNEXPECTED], "partial",
                     rr->partial, "spilled_runs", (json_int_t)rr->runs,
                     "listed", listed ? listed : json_array());
}

/* The records that differ, for a person. */
static void records_text(const sk_rec_report *rr, FILE *f)
{
    fprintf(f, "  records: %" PRIu64 " missing from the sink, %" PRIu64
               " under another partition, %" PRIu64 " duplicated, %" PRIu64
               " unexpected%s\n",
            rr->counts[SK_REC_MISSING], rr->counts[SK_REC_MOVED],
            rr->counts[SK_REC_DUPLICATED], rr->counts[SK_REC_UNEXPECTED],
            rr->partial ? " (more than the memory budget could list: "
                          "counts are a part)" : "");
    for (size_t i = 0; i < rr->nfirst; i++) {
        const sk_rec_diff *d = &rr->first[i];
        fprintf(f, "  %-10s %s", sk_rec_kind_name(d->kind), d->partition);
        if (d->kind == SK_REC_MOVED)
            fprintf(f, " -> %s", d->sink_partition);
        if (d->src_where)
            fprintf(f, "; source %s at %" PRIu64, d->src_where,
                    d->src_offset);
        if (d->sink_where)
            fprintf(f, "; sink %s at %" PRIu64, d->sink_where,
                    d->sink_offset);
        fputc('\n', f);
    }
}

/* The report for a person. */
static void report_text(const engine *e, const sk_verify_result *r,
                        const sk_rec_report *rr, const pl_since *since,
                        FILE *f)
{
    pl_verify_objects o = pl_verify_sink_objects(e->verify);
    sk_digest dead = pl_verify_dead_letters(e->verify);
    fprintf(f, "verify %s\n", e->cfg->name);
    fprintf(f, "  source: %" PRIu64 " records (%" PRIu64 " bytes) in %" PRIu64
               " units; %" PRIu64 " dead letters, not expected among them\n",
            r->want.records, r->want.bytes, units_of(e, since),
            dead.records);
    fprintf(f, "  sink:   %" PRIu64 " records (%" PRIu64 " bytes) in %" PRIu64
               " objects; besides: %" PRIu64 " of dead letters, %" PRIu64
               " of skippr's, %" PRIu64 " unfinished\n",
            r->got.records, r->got.bytes, o.data + o.outside, o.dead, o.own,
            o.partial);
    fprintf(f, "  partitions: %" PRIu64 ", %" PRIu64 " match, %" PRIu64
               " differ, %" PRIu64 " missing from the sink, %" PRIu64
               " only in the sink\n",
            r->partitions, r->by_verdict[SK_VERIFY_MATCH],
            r->by_verdict[SK_VERIFY_DIFFER], r->by_verdict[SK_VERIFY_MISSING],
            r->by_verdict[SK_VERIFY_EXTRA]);
    if (since)
        since_text(e, since, f);
    for (size_t i = 0; i < r->nparts; i++) {
        const sk_verify_part *p = &r->parts[i];
        fprintf(f, "  %-7s %s: expected %" PRIu64 " records (%" PRIu64
                   " bytes), found %" PRIu64 " (%" PRIu64 " bytes)\n",
                sk_verify_verdict_name(p->verdict), *p->key ? p->key : "(none)",
                p->want.records, p->want.bytes, p->got.records,
                p->got.bytes);
    }
    uint64_t bad = r->partitions - r->by_verdict[SK_VERIFY_MATCH] -
                   r->by_verdict[SK_VERIFY_OPEN];
    if (bad > r->nparts)
        fprintf(f, "  ... and %" PRIu64 " more\n", bad - r->nparts);
    if (rr)
        records_text(rr, f);
    else if (!sk_verify_clean(r))
        fputs("  records: not named by a merge of shards' digests; a "
              "verify without shards names them\n", f);
    fputs(all_clean(e, r, since)
              ? "CLEAN: every record of the source is in the sink once, "
                "byte for byte, under its partition\n"
              : "NOT CLEAN: the sink does not hold the source's records as "
                "the pipeline lays them out\n",
          f);
}

int pl_verify_report(const engine *e, const sk_verify_result *r,
                     const sk_rec_report *rr, const pl_since *since,
                     int as_json, FILE *f)
{
    if (!as_json) {
        report_text(e, r, rr, since, f);
        return fflush(f) ? SKIPPR_IO : SKIPPR_OK;
    }
    json_t *j = report_json(e, r, since);
    if (j && rr)
        json_object_set_new(j, "records", records_json(rr));
    if (j && since)
        json_object_set_new(j, "since_state", since_json(e, since));
    int rc = !j || json_dumpf(j, f, JSON_INDENT(2)) || fputc('\n', f) == EOF
                 ? SKIPPR_NOMEM
                 : SKIPPR_OK;
    json_decref(j);
    return fflush(f) && !rc ? SKIPPR_IO : rc;
}
