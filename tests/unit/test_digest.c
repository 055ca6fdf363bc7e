/* Multiset digests (verify/digest.c), one side's partitions
 * (verify/partitions.c) and their comparison (verify/compare.c): order
 * does not matter, every kind of difference a verify must find changes
 * the digest, pairing walks both sides' partitions in key order, each
 * partition gets its verdict, a sink's key says what its object is
 * (verify/objkey.c), and the records of partitions that differ are
 * matched and named, in memory or spilled to sorted runs on disk
 * (verify/records.c, verify/recruns.c). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "verify/compare.h"
#include "verify/digest.h"
#include "verify/objkey.h"
#include "verify/records.h"
#include "verify/partitions.h"

static const char *const recs[] = {
    "{\"event_type\":\"a\",\"n\":1}", "{\"event_type\":\"a\",\"n\":2}",
    "{\"event_type\":\"b\",\"n\":3}", "{\"event_type\":\"b\",\"n\":4}",
    "{\"event_type\":\"c\",\"n\":5}"};
#define NREC (sizeof recs / sizeof *recs)

static void add(sk_digest *d, const char *r)
{
    sk_digest_add(d, sk_record_hash_of(r, strlen(r)), strlen(r));
}

/* The digest of recs in the order idx gives (n of them). */
static sk_digest digest_of(const size_t *idx, size_t n)
{
    sk_digest d = {0};
    for (size_t i = 0; i < n; i++)
        add(&d, recs[idx[i]]);
    return d;
}

static void test_order_and_split_do_not_matter(void **state)
{
    (void)state;
    static const size_t fwd[] = {0, 1, 2, 3, 4}, rev[] = {4, 3, 2, 1, 0};
    sk_digest a = digest_of(fwd, NREC), b = digest_of(rev, NREC);
    assert_true(sk_digest_equal(&a, &b));
    assert_int_equal(a.records, NREC);
    /* two halves read apart (two threads, two objects), merged */
    sk_digest h1 = digest_of(fwd, 2), h2 = digest_of(fwd + 2, 3);
    sk_digest_merge(&h1, &h2);
    assert_true(sk_digest_equal(&a, &h1));
}

static void test_every_difference_shows(void **state)
{
    (void)state;
    static const size_t all[] = {0, 1, 2, 3, 4};
    sk_digest want = digest_of(all, NREC);
    /* a record missing */
    sk_digest d = digest_of(all, NREC - 1);
    assert_false(sk_digest_equal(&want, &d));
    /* a record twice */
    d = digest_of(all, NREC);
    add(&d, recs[2]);
    assert_false(sk_digest_equal(&want, &d));
    /* one byte changed: same count, same bytes, another sum */
    d = digest_of(all, NREC - 1);
    char changed[64];
    snprintf(changed, sizeof changed, "%s", recs[4]);
    changed[strlen(changed) - 2] = '6';
    add(&d, changed);
    assert_int_equal(d.records, want.records);
    assert_int_equal(d.bytes, want.bytes);
    assert_false(sk_digest_equal(&want, &d));
    /* one record swapped for a duplicate of another of the same length */
    static const size_t dup[] = {0, 1, 2, 3, 3};
    d = digest_of(dup, NREC);
    assert_int_equal(d.bytes, want.bytes);
    assert_false(sk_digest_equal(&want, &d));
}

/* The sum carries from its low word into its high one. */
static void test_sum_carries(void **state)
{
    (void)state;
    sk_digest d = {.lo = UINT64_MAX, .hi = 7};
    sk_digest_add(&d, (sk_record_hash){.lo = 2, .hi = 1}, 1);
    assert_int_equal(d.lo, 1);
    assert_int_equal(d.hi, 9);
    sk_digest w = {.lo = UINT64_MAX, .hi = UINT64_MAX};
    sk_digest o = {.lo = 1};
    sk_digest_merge(&w, &o);
    assert_int_equal(w.lo, 0);
    assert_int_equal(w.hi, 0);
}

typedef struct seen {
    char keys[8][32];
    int side[8]; /* 1: only a, 2: only b, 3: both */
    int equal[8];
    int n;
} seen;

static int note(const char *key, size_t klen, const sk_digest *a,
                const sk_digest *b, void *ud)
{
    seen *s = ud;
    assert_true(s->n < 8 && klen < 32);
    memcpy(s->keys[s->n], key, klen);
    s->side[s->n] = (a ? 1 : 0) | (b ? 2 : 0);
    s->equal[s->n] = a && b && sk_digest_equal(a, b);
    s->n++;
    return 0;
}

static void test_partitions_pair_in_key_order(void **state)
{
    (void)state;
    sk_partitions *a = sk_partitions_new(), *b = sk_partitions_new();
    assert_non_null(a);
    assert_non_null(b);
    /* a: x/1 {0,1}, x/2 {2}, z {4}; b: x/1 {1,0}, x/2 {3}, y {2} */
    add(sk_partitions_at(a, "x/1", 3), recs[0]);
    add(sk_partitions_at(a, "x/1", 3), recs[1]);
    add(sk_partitions_at(a, "x/2", 3), recs[2]);
    add(sk_partitions_at(a, "z", 1), recs[4]);
    add(sk_partitions_at(b, "x/1", 3), recs[1]);
    add(sk_partitions_at(b, "x/1", 3), recs[0]);
    add(sk_partitions_at(b, "x/2", 3), recs[3]);
    add(sk_partitions_at(b, "y", 1), recs[2]);
    assert_int_equal(sk_partitions_count(a), 3);
    seen s = {0};
    assert_int_equal(sk_partitions_pair(a, b, note, &s), 0);
    assert_int_equal(s.n, 4);
    assert_string_equal(s.keys[0], "x/1");
    assert_int_equal(s.side[0], 3);
    assert_true(s.equal[0]);
    assert_string_equal(s.keys[1], "x/2");
    assert_int_equal(s.side[1], 3);
    assert_false(s.equal[1]);
    assert_string_equal(s.keys[2], "y");
    assert_int_equal(s.side[2], 2);
    assert_string_equal(s.keys[3], "z");
    assert_int_equal(s.side[3], 1);
    /* merged, a holds both sides' records: its total is the sum */
    sk_digest ta, tb, tm;
    sk_partitions_total(a, &ta);
    sk_partitions_total(b, &tb);
    assert_int_equal(sk_partitions_merge(a, b), 0);
    sk_partitions_total(a, &tm);
    sk_digest_merge(&ta, &tb);
    assert_true(sk_digest_equal(&ta, &tm));
    assert_int_equal(sk_partitions_count(a), 4);
    sk_partitions_free(a);
    sk_partitions_free(b);
}

/* The verdict of each partition, the totals, and the list of those that
 * do not match, cut at keep. */
static void test_compare(void **state)
{
    (void)state;
    sk_partitions *src = sk_partitions_new(), *dst = sk_partitions_new();
    assert_non_null(src);
    assert_non_null(dst);
    /* match: m; differ: d (one record changed); missing: gone;
     * extra: new */
    add(sk_partitions_at(src, "m", 1), recs[0]);
    add(sk_partitions_at(dst, "m", 1), recs[0]);
    add(sk_partitions_at(src, "d", 1), recs[1]);
    add(sk_partitions_at(dst, "d", 1), recs[2]);
    add(sk_partitions_at(src, "gone", 4), recs[3]);
    add(sk_partitions_at(dst, "new", 3), recs[4]);
    add(sk_partitions_at(dst, "new", 3), recs[4]);
    sk_verify_result r;
    assert_int_equal(sk_verify_compare(src, dst, NULL, 8, &r), 0);
    assert_false(sk_verify_clean(&r));
    assert_int_equal(r.partitions, 4);
    assert_int_equal(r.by_verdict[SK_VERIFY_MATCH], 1);
    assert_int_equal(r.by_verdict[SK_VERIFY_DIFFER], 1);
    assert_int_equal(r.by_verdict[SK_VERIFY_MISSING], 1);
    assert_int_equal(r.by_verdict[SK_VERIFY_EXTRA], 1);
    assert_int_equal(r.want.records, 3);
    assert_int_equal(r.got.records, 4);
    assert_int_equal(r.nparts, 3); /* by key: d, gone, new */
    assert_string_equal(r.parts[0].key, "d");
    assert_string_equal(sk_verify_verdict_name(r.parts[0].verdict),
                        "differ");
    assert_string_equal(r.parts[1].key, "gone");
    assert_int_equal(r.parts[1].verdict, SK_VERIFY_MISSING);
    assert_int_equal(r.parts[1].want.records, 1);
    assert_int_equal(r.parts[1].got.records, 0);
    assert_string_equal(r.parts[2].key, "new");
    assert_int_equal(r.parts[2].verdict, SK_VERIFY_EXTRA);
    assert_int_equal(r.parts[2].got.records, 2);
    sk_verify_result_free(&r);
    /* keep cuts the list, not the counts */
    assert_int_equal(sk_verify_compare(src, dst, NULL, 1, &r), 0);
    assert_int_equal(r.nparts, 1);
    assert_int_equal(r.by_verdict[SK_VERIFY_EXTRA], 1);
    sk_verify_result_free(&r);
    /* a side compared with itself is clean */
    assert_int_equal(sk_verify_compare(src, src, NULL, 0, &r), 0);
    assert_true(sk_verify_clean(&r));
    assert_int_equal(r.partitions, 3);
    sk_verify_result_free(&r);
    sk_partitions_free(src);
    sk_partitions_free(dst);
}

/* kind and partition of key under prefix "copy/p" and staging
 * "skippr-staging" */
static sk_obj_kind kind(const char *prefix, const char *key, char *part)
{
    const char *p;
    size_t n;
    sk_obj_kind k = sk_obj_classify(prefix, "skippr-staging", key, &p, &n);
    part[0] = '\0';
    if (p) {
        memcpy(part, p, n);
        part[n] = '\0';
    }
    return k;
}

static void test_object_kinds(void **state)
{
    (void)state;
    char part[128];
    assert_int_equal(kind("copy/p", "copy/p/telemetry/p_tenant=t1/p_year="
                          "2021/p_month=10/p_day=03/apply-0123456789abcdef-"
                          "0000000001.jsonl", part), SK_OBJ_DATA);
    assert_string_equal(part, "telemetry/p_tenant=t1/p_year=2021/p_month=10"
                              "/p_day=03");
    /* a trailing slash on the prefix; an object of one folder */
    assert_int_equal(kind("copy/p/", "copy/p/ns/x.jsonl", part),
                     SK_OBJ_DATA);
    assert_string_equal(part, "ns");
    /* no prefix: the whole namespace */
    assert_int_equal(kind("", "ns/a/x.csv", part), SK_OBJ_DATA);
    assert_string_equal(part, "ns/a");
    assert_int_equal(kind("copy/p", "copy/p/_errors/apply-1.bad", part),
                     SK_OBJ_DEAD);
    assert_int_equal(kind("copy/p", "copy/p/_skippr/claims/0a.json", part),
                     SK_OBJ_OWN);
    assert_int_equal(kind("", "skippr-staging/abc-0000000001/00-01", part),
                     SK_OBJ_OWN);
    assert_int_equal(kind("copy/p", "copy/p/ns/.apply-1.jsonl.tmp-abc",
                          part), SK_OBJ_PARTIAL);
    /* outside: another prefix that starts alike, the prefix's own level,
     * a folder named like skippr's but deeper */
    assert_int_equal(kind("copy/p", "copy/px/ns/a.jsonl", part),
                     SK_OBJ_OUTSIDE);
    assert_int_equal(kind("copy/p", "copy/p/stray.jsonl", part),
                     SK_OBJ_LOOSE);
    assert_int_equal(kind("copy/p", "copy/p/ns/_skippr/a.jsonl", part),
                     SK_OBJ_DATA);
    assert_string_equal(part, "ns/_skippr");
}

static void keep(sk_recset *s, int side, const char *rec, const char *part,
                 const char *where, uint64_t off)
{
    assert_int_equal(sk_recset_add(s, side, sk_record_hash_of(rec,
                                                              strlen(rec)),
                                   part, strlen(part), where, off), 0);
}

/* Each record without a twin in its partition is named once, by kind,
 * with where each side has it: with every record in memory, and with a
 * side's memory holding one (each spilled to disk as a run of its own,
 * the runs merged back). */
static void matched_with(size_t max)
{
    sk_recset *s = sk_recset_new(max);
    assert_non_null(s);
    /* twins in one partition, in other objects: a match */
    keep(s, 0, recs[0], "p", "src/u1", 0);
    keep(s, 1, recs[0], "p", "out/p/o2", 40);
    /* missing */
    keep(s, 0, recs[1], "p", "src/u1", 30);
    /* duplicated: once in the source, twice in the sink */
    keep(s, 0, recs[2], "q", "src/u2", 0);
    keep(s, 1, recs[2], "q", "out/q/o1", 0);
    keep(s, 1, recs[2], "q", "out/q/o1", 31);
    /* moved: in the sink under another partition */
    keep(s, 0, recs[3], "q", "src/u2", 31);
    keep(s, 1, recs[3], "r", "out/r/o1", 0);
    /* unexpected */
    keep(s, 1, recs[4], "r", "out/r/extra", 0);
    sk_rec_report r;
    assert_int_equal(sk_recset_compare(s, 10, &r), 0);
    assert_false(r.partial);
    assert_int_equal(r.counts[SK_REC_MISSING], 1);
    assert_int_equal(r.counts[SK_REC_DUPLICATED], 1);
    assert_int_equal(r.counts[SK_REC_MOVED], 1);
    assert_int_equal(r.counts[SK_REC_UNEXPECTED], 1);
    assert_int_equal(r.nfirst, 4);
    int seen = 0;
    for (size_t i = 0; i < r.nfirst; i++) {
        const sk_rec_diff *d = &r.first[i];
        seen |= 1 << d->kind;
        switch (d->kind) {
        case SK_REC_MISSING:
            assert_string_equal(d->partition, "p");
            assert_string_equal(d->src_where, "src/u1");
            assert_int_equal(d->src_offset, 30);
            assert_null(d->sink_where);
            break;
        case SK_REC_DUPLICATED:
            assert_string_equal(d->partition, "q");
            assert_null(d->src_where);
            assert_string_equal(d->sink_where, "out/q/o1");
            break;
        case SK_REC_MOVED:
            assert_string_equal(d->partition, "q");
            assert_string_equal(d->sink_partition, "r");
            assert_string_equal(d->src_where, "src/u2");
            assert_int_equal(d->src_offset, 31);
            assert_string_equal(d->sink_where, "out/r/o1");
            break;
        case SK_REC_UNEXPECTED:
            assert_string_equal(d->partition, "r");
            assert_string_equal(d->sink_where, "out/r/extra");
            break;
        }
    }
    assert_int_equal(seen, 15);
    assert_string_equal(sk_rec_kind_name(SK_REC_MOVED), "moved");
    sk_rec_report_free(&r);
    /* keep cuts the names, not the counts */
    assert_int_equal(sk_recset_compare(s, 1, &r), 0);
    assert_int_equal(r.nfirst, 1);
    assert_int_equal(r.counts[SK_REC_UNEXPECTED], 1);
    sk_rec_report_free(&r);
    sk_recset_free(s);
}

static void test_records_matched(void **state)
{
    (void)state;
    matched_with(100);
    matched_with(1);
    matched_with(2);
}

/* Many more records than memory holds, in many runs: twins across runs
 * match; past the runs' bound a side counts records without keeping
 * them, and the report says it is partial; a changed record is one
 * missing and one unexpected. */
static void test_records_spill_limit_and_change(void **state)
{
    (void)state;
    sk_recset *s = sk_recset_new(7);
    assert_non_null(s);
    char rec[32], where[32];
    for (int i = 0; i < 3000; i++) { /* the sink in reverse order */
        snprintf(rec, sizeof rec, "{\"n\":%d}", i);
        snprintf(where, sizeof where, "u%d", i % 13);
        keep(s, 0, rec, "p", where, (uint64_t)i);
        snprintf(rec, sizeof rec, "{\"n\":%d}", 2999 - i);
        keep(s, 1, rec, "p", "o", (uint64_t)i);
    }
    keep(s, 0, recs[0], "p", "u", 0);
    keep(s, 1, recs[1], "p", "o", 0);
    sk_rec_report r;
    assert_int_equal(sk_recset_compare(s, 4, &r), 0);
    assert_false(r.partial);
    assert_int_equal(r.counts[SK_REC_MISSING], 1);
    assert_int_equal(r.counts[SK_REC_UNEXPECTED], 1);
    assert_int_equal(r.counts[SK_REC_MOVED], 0);
    assert_int_equal(r.counts[SK_REC_DUPLICATED], 0);
    sk_rec_report_free(&r);
    sk_recset_free(s);
    /* one record a run: past SK_RECRUNS_MAX runs, counted only */
    s = sk_recset_new(1);
    assert_non_null(s);
    for (int i = 0; i < 4200; i++) {
        snprintf(rec, sizeof rec, "{\"n\":%d}", i);
        keep(s, 1, rec, "p", "o", (uint64_t)i);
    }
    assert_int_equal(sk_recset_compare(s, 4, &r), 0);
    assert_true(r.partial);
    assert_true(r.counts[SK_REC_UNEXPECTED] > 4000);
    assert_true(r.counts[SK_REC_UNEXPECTED] < 4200);
    sk_rec_report_free(&r);
    sk_recset_free(s);
    /* a side with no record at all (an empty sink) */
    s = sk_recset_new(8);
    assert_non_null(s);
    keep(s, 0, recs[0], "p", "u", 0);
    assert_int_equal(sk_recset_compare(s, 4, &r), 0);
    assert_int_equal(r.counts[SK_REC_MISSING], 1);
    assert_int_equal(r.nfirst, 1);
    sk_rec_report_free(&r);
    sk_recset_free(s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_order_and_split_do_not_matter),
        cmocka_unit_test(test_every_difference_shows),
        cmocka_unit_test(test_sum_carries),
        cmocka_unit_test(test_partitions_pair_in_key_order),
        cmocka_unit_test(test_compare),
        cmocka_unit_test(test_object_kinds),
        cmocka_unit_test(test_records_matched),
        cmocka_unit_test(test_records_spill_limit_and_change),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
