/* The verify mark (verify/mark.c): what one verify commits the next one
 * reads back whole (both sides' digests, the totals, the units and
 * objects read); a verify that does not commit leaves the mark as it
 * was; one verify at a time; a damaged mark is refused, not taken for
 * none. And a partition still open is not judged (verify/compare.c). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "base/common.h"
#include "verify/compare.h"
#include "verify/mark.h"

static char dir[256];

static int setup(void **state)
{
    (void)state;
    snprintf(dir, sizeof dir, "/tmp/skippr-vmark-XXXXXX");
    return mkdtemp(dir) ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    return system(cmd);
}

static void add(sk_partitions *p, const char *key, const char *rec)
{
    sk_digest *d = sk_partitions_at(p, key, strlen(key));
    assert_non_null(d);
    sk_digest_add(d, sk_record_hash_of(rec, strlen(rec)), strlen(rec));
}

/* A mark opened on dir/m into fresh sets (*src, *dst). */
static int open_mark(sk_partitions **src, sk_partitions **dst, sk_vmark **m)
{
    char path[300];
    snprintf(path, sizeof path, "%s/m", dir);
    *src = sk_partitions_new();
    *dst = sk_partitions_new();
    assert_non_null(*src);
    assert_non_null(*dst);
    return sk_vmark_open(path, *src, *dst, m);
}

static void close_mark(sk_partitions *src, sk_partitions *dst, sk_vmark *m)
{
    sk_vmark_close(m);
    sk_partitions_free(src);
    sk_partitions_free(dst);
}

/* Record unit id (version v) as read in the mark's ledger of side. */
static void seen(sk_vmark *m, int side, const char *id, const char *v)
{
    sk_unit_rec *u = sk_ledger_touch(sk_vmark_ledger(m, side), id, v, 10);
    assert_non_null(u);
    sk_unit_progress(u, 10, SK_UNIT_DONE, 0);
}

static const char *version_in(sk_vmark *m, int side, const char *id)
{
    const sk_unit_rec *u = NULL;
    assert_int_equal(sk_ledger_lookup(sk_vmark_ledger(m, side), id, &u), 0);
    return u ? sk_unit_version(u) : NULL;
}

static void test_commit_reads_back(void **state)
{
    (void)state;
    sk_partitions *src, *dst;
    sk_vmark *m;
    assert_int_equal(open_mark(&src, &dst, &m), 0);
    assert_int_equal(sk_vmark_prior(m).at, 0); /* none yet */
    add(src, "a/p=1", "{\"n\":1}");
    add(dst, "a/p=1", "{\"n\":1}");
    add(src, "b", "{\"n\":2}");             /* the source's only */
    add(dst, "", "{\"n\":3}");              /* in no folder */
    seen(m, 0, "in/u1", "e1");
    seen(m, 1, "out/a/p=1/o1.jsonl", "e2");
    sk_vmark_totals t = {.at = 1700000000, .units = 1, .objects = 1};
    assert_int_equal(sk_vmark_commit(m, src, dst, t), 0);
    close_mark(src, dst, m);

    assert_int_equal(open_mark(&src, &dst, &m), 0);
    t = sk_vmark_prior(m);
    assert_int_equal(t.at, 1700000000);
    assert_int_equal(t.units, 1);
    assert_int_equal(t.objects, 1);
    assert_int_equal(sk_partitions_count(src), 2);
    assert_int_equal(sk_partitions_count(dst), 2);
    sk_verify_result r;
    assert_int_equal(sk_verify_compare(src, dst, NULL, 4, &r), 0);
    assert_int_equal(r.by_verdict[SK_VERIFY_MATCH], 1);
    assert_int_equal(r.by_verdict[SK_VERIFY_MISSING], 1);
    assert_int_equal(r.by_verdict[SK_VERIFY_EXTRA], 1);
    sk_verify_result_free(&r);
    assert_string_equal(version_in(m, 0, "in/u1"), "e1");
    assert_string_equal(version_in(m, 1, "out/a/p=1/o1.jsonl"), "e2");
    assert_null(version_in(m, 0, "in/u2"));
    /* a second verify while this one works is refused */
    sk_partitions *s2, *d2;
    sk_vmark *m2 = NULL;
    assert_int_equal(open_mark(&s2, &d2, &m2), SKIPPR_LOCKED);
    assert_null(m2);
    close_mark(s2, d2, m2);
    /* this one dies without committing: the mark is as it was */
    seen(m, 0, "in/u2", "e3");
    add(src, "c", "{\"n\":4}");
    close_mark(src, dst, m);
    assert_int_equal(open_mark(&src, &dst, &m), 0);
    assert_int_equal(sk_vmark_prior(m).units, 1);
    assert_int_equal(sk_partitions_count(src), 2);
    assert_null(version_in(m, 0, "in/u2"));
    assert_string_equal(version_in(m, 0, "in/u1"), "e1");
    close_mark(src, dst, m);
}

static void test_damaged_mark_is_refused(void **state)
{
    (void)state;
    sk_partitions *src, *dst;
    sk_vmark *m;
    assert_int_equal(open_mark(&src, &dst, &m), 0);
    add(src, "a", "{\"n\":1}");
    sk_vmark_totals t = {.at = 1, .units = 1};
    assert_int_equal(sk_vmark_commit(m, src, dst, t), 0);
    close_mark(src, dst, m);
    char path[400];
    snprintf(path, sizeof path, "%s/m/gen-1/partitions", dir);
    FILE *f = fopen(path, "r+b");
    assert_non_null(f);
    assert_int_equal(fseek(f, 20, SEEK_SET), 0);
    assert_int_equal(fputc('X', f), 'X'); /* a total's byte */
    fclose(f);
    assert_int_equal(open_mark(&src, &dst, &m), SKIPPR_CORRUPT);
    close_mark(src, dst, NULL);
}

static void test_open_partitions_are_not_judged(void **state)
{
    (void)state;
    sk_partitions *src = sk_partitions_new(), *dst = sk_partitions_new();
    sk_partitions *open = sk_partitions_new();
    assert_non_null(open);
    add(src, "filling", "{\"n\":1}");
    add(src, "filling", "{\"n\":2}");
    add(dst, "filling", "{\"n\":1}");
    add(src, "broken", "{\"n\":3}");
    add(src, "waiting", "{\"n\":4}");
    add(dst, "same", "{\"n\":5}");
    add(src, "same", "{\"n\":5}");
    assert_non_null(sk_partitions_at(open, "filling", 7));
    assert_non_null(sk_partitions_at(open, "waiting", 7));
    assert_non_null(sk_partitions_at(open, "same", 4));
    sk_verify_result r;
    assert_int_equal(sk_verify_compare(src, dst, open, 8, &r), 0);
    assert_int_equal(r.by_verdict[SK_VERIFY_OPEN], 2);
    assert_int_equal(r.by_verdict[SK_VERIFY_MATCH], 1); /* open, but same */
    assert_int_equal(r.by_verdict[SK_VERIFY_MISSING], 1);
    assert_int_equal(r.nparts, 1);
    assert_string_equal(r.parts[0].key, "broken");
    assert_false(sk_verify_clean(&r));
    sk_verify_result_free(&r);
    assert_non_null(sk_partitions_at(open, "broken", 6));
    assert_int_equal(sk_verify_compare(src, dst, open, 8, &r), 0);
    assert_true(sk_verify_clean(&r));
    assert_string_equal(sk_verify_verdict_name(SK_VERIFY_OPEN), "open");
    sk_verify_result_free(&r);
    sk_partitions_free(src);
    sk_partitions_free(dst);
    sk_partitions_free(open);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_commit_reads_back, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_damaged_mark_is_refused, setup,
                                        teardown),
        cmocka_unit_test(test_open_partitions_are_not_judged),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
