/* The ledger's sorted runs (state/ledger.c, state/ledger_run.c): flushes,
 * merges by level, lookups that stream, the newest record winning,
 * recovery from a merge cut short, damage found, and the conversion of a
 * ledger file of earlier versions. */
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "base/common.h"
#include "base/crc32c.h"
#include "base/fault.h"
#include "state/ledger.h"
#include "state/ledger_run.h"

static char dir[256];

static int setup(void **state)
{
    (void)state;
    snprintf(dir, sizeof dir, "/tmp/skippr-ledger-XXXXXX");
    return mkdtemp(dir) ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    return system(cmd);
}

static void ledger_path(char *out, size_t n, const char *name)
{
    snprintf(out, n, "%s/%s", dir, name);
}

/* Firehose-like ids: long shared prefixes, a varying tail. */
static void unit_id(char *id, size_t n, int i)
{
    snprintf(id, n, "2024/01/%02d/%02d/stream-1-2024-01-%02d-%08x-%d",
             1 + i / 10000 % 28, i / 1000 % 24, 1 + i / 10000 % 28,
             (unsigned)i * 2654435761u, i);
}

static size_t runs_on_disk(const char *path)
{
    char cmd[400];
    snprintf(cmd, sizeof cmd, "ls '%s.d' | grep -c '\\.run$'", path);
    FILE *p = popen(cmd, "r");
    size_t n = 0;
    if (p) {
        if (fscanf(p, "%zu", &n) != 1)
            n = 0;
        pclose(p);
    }
    return n;
}

/* 20,000 units finished and flushed 500 at a time (40 flushes): levels
 * merge (8 level-0 runs make one level-1 run), every unit is found in
 * listing order and out of it, ids between them are not, and a reopened
 * ledger gives the same answers. Ids are listed unsorted within each
 * flush, as a hash map holds them. */
static void test_flush_merge_lookup(void **state)
{
    (void)state;
    char path[300], id[128];
    ledger_path(path, sizeof path, "many");
    sk_ledger *l = NULL;
    assert_int_equal(sk_ledger_open(path, 0, &l), 0);
    const int N = 20000;
    for (int i = 0; i < N; i++) {
        int k = (i / 500) * 500 + (i * 7919) % 500;
        unit_id(id, sizeof id, k * 2); /* even numbers only */
        sk_unit_rec *u = sk_ledger_touch(l, id, "1733400000.123456789", k);
        assert_non_null(u);
        u->flags = SK_UNIT_DONE;
        u->offset = k;
        if (i % 500 == 499)
            assert_int_equal(sk_ledger_compact(l, 7 + (uint64_t)i), 0);
    }
    assert_int_equal(sk_ledger_recent_count(l), 0);
    assert_int_equal(sk_ledger_file_done(l), (uint64_t)N);
    /* 40 flushes: 5 merged runs of level 1, no level-0 run left. */
    assert_int_equal(sk_ledger_runs(l), 5);
    assert_int_equal(runs_on_disk(path), 5);
    for (int round = 0; round < 2; round++) {
        for (int k = 0; k < 2 * N; k++) {
            unit_id(id, sizeof id, k);
            const sk_unit_rec *u = NULL;
            assert_int_equal(sk_ledger_lookup(l, id, &u), 0);
            if (k % 2)
                assert_null(u);
            else {
                assert_non_null(u);
                assert_string_equal(u->id, id);
                assert_int_equal(u->size, k / 2);
                assert_int_equal(u->offset, k / 2);
                assert_string_equal(u->version, "1733400000.123456789");
            }
        }
        for (int k = 0; k < 2 * N; k += 997) { /* out of order */
            unit_id(id, sizeof id, (k * 31) % (2 * N) & ~1);
            const sk_unit_rec *u = NULL;
            assert_int_equal(sk_ledger_lookup(l, id, &u), 0);
            assert_non_null(u);
        }
        assert_int_equal(sk_ledger_next_slice_id(l), 7 + N - 1);
        sk_ledger_close(l);
        l = NULL;
        assert_int_equal(sk_ledger_open(path, 0, &l), 0);
    }
    sk_ledger_close(l);
}

/* A unit recorded partly done, then done in a later flush: the newer run
 * wins before and after the runs are merged. */
static void test_newest_wins(void **state)
{
    (void)state;
    char path[300];
    ledger_path(path, sizeof path, "newest");
    sk_ledger *l = NULL;
    assert_int_equal(sk_ledger_open(path, 0, &l), 0);
    sk_unit_rec *u = sk_ledger_touch(l, "a/unit", "v1", 100);
    u->offset = 40;
    /* A size the source does not know (-1) survives a run. */
    sk_ledger_touch(l, "b/unknown-size", "", -1)->flags = SK_UNIT_DONE;
    assert_int_equal(sk_ledger_compact(l, 1), 0);
    /* Unfinished units stay in memory after a flush. */
    assert_int_equal(sk_ledger_recent_count(l), 1);
    u->offset = 100;
    u->flags = SK_UNIT_DONE;
    for (int f = 0; f < 7; f++) /* 8 level-0 runs: merged */
        assert_int_equal(sk_ledger_compact(l, 2 + (uint64_t)f), 0);
    assert_int_equal(sk_ledger_recent_count(l), 0);
    assert_int_equal(sk_ledger_runs(l), 1);
    const sk_unit_rec *got = NULL;
    assert_int_equal(sk_ledger_lookup(l, "a/unit", &got), 0);
    assert_non_null(got);
    assert_int_equal(got->offset, 100);
    assert_true(got->flags & SK_UNIT_DONE);
    assert_int_equal(sk_ledger_lookup(l, "b/unknown-size", &got), 0);
    assert_non_null(got);
    assert_int_equal(got->size, -1);
    assert_string_equal(got->version, "");
    assert_int_equal(sk_ledger_file_count(l), 2);
    sk_ledger_close(l);
}

/* One finished unit, i, flushed as a run of its own. */
static void flush_one(sk_ledger *l, int i)
{
    char id[128];
    unit_id(id, sizeof id, i);
    sk_ledger_touch(l, id, "v", i)->flags = SK_UNIT_DONE;
    assert_int_equal(sk_ledger_compact(l, 1), 0);
}

/* Units 0..n-1 are all known, each with its size. */
static void expect_units(sk_ledger *l, int n)
{
    char id[128];
    for (int i = 0; i < n; i++) {
        unit_id(id, sizeof id, i);
        const sk_unit_rec *u = NULL;
        assert_int_equal(sk_ledger_lookup(l, id, &u), 0);
        assert_non_null(u);
        assert_int_equal(u->size, i);
    }
}

/* A merge cut short leaves its inputs beside the merged run (a crash
 * between the rename and the unlinks) and a temp file: the next open
 * removes both and answers as before. */
static void test_merge_cut_short(void **state)
{
    (void)state;
    char path[300], cmd[1200];
    ledger_path(path, sizeof path, "cut");
    sk_ledger *l = NULL;
    assert_int_equal(sk_ledger_open(path, 0, &l), 0);
    for (int f = 0; f < 7; f++)
        flush_one(l, f);
    assert_int_equal(runs_on_disk(path), 7);
    snprintf(cmd, sizeof cmd, "mkdir -p '%s.keep' && cp '%s.d'/*.run '%s.keep'/",
             path, path, path);
    assert_int_equal(system(cmd), 0);
    flush_one(l, 7); /* the 8th: merged */
    assert_int_equal(runs_on_disk(path), 1);
    sk_ledger_close(l);
    snprintf(cmd, sizeof cmd, "cp '%s.keep'/*.run '%s.d'/ && "
             "echo half > '%s.d/0000000000000009-0000000000000009.run.tmp'",
             path, path, path);
    assert_int_equal(system(cmd), 0);
    assert_int_equal(runs_on_disk(path), 8);
    assert_int_equal(sk_ledger_open(path, 0, &l), 0);
    assert_int_equal(sk_ledger_runs(l), 1);
    assert_int_equal(runs_on_disk(path), 1);
    snprintf(cmd, sizeof cmd, "test ! -e '%s.d/0000000000000009-"
             "0000000000000009.run.tmp'", path);
    assert_int_equal(system(cmd), 0);
    expect_units(l, 8);
    sk_ledger_close(l);
}

/* A kill between a flush and its merge leaves nine level-0 runs after the
 * next flush. All nine are merged: had the newest eight been, the oldest
 * would have joined the next eight into a run whose seq range holds the
 * first merge's, and opening the ledger would have removed that one as a
 * merge's input (its units then forgotten and copied again). */
static void test_merge_after_a_kill(void **state)
{
    (void)state;
    char path[300];
    ledger_path(path, sizeof path, "killed");
    sk_ledger *l = NULL;
    assert_int_equal(sk_ledger_open(path, 0, &l), 0);
    for (int f = 0; f < 7; f++)
        flush_one(l, f);
    sk_ledger_close(l);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        setenv("SKIPPR_CRASH", "ledger_merge:1", 1);
        if (sk_fault_init_from_env() != 0 || sk_ledger_open(path, 0, &l))
            _exit(2);
        flush_one(l, 7); /* killed before its merge */
        _exit(3);
    }
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFSIGNALED(status));
    assert_int_equal(runs_on_disk(path), 8);
    assert_int_equal(sk_ledger_open(path, 0, &l), 0);
    for (int f = 8; f < 24; f++)
        flush_one(l, f);
    sk_ledger_close(l);
    assert_int_equal(sk_ledger_open(path, 0, &l), 0);
    expect_units(l, 24);
    sk_ledger_close(l);
}

/* A damaged block is reported, not read as other records. */
static void test_damage_found(void **state)
{
    (void)state;
    char path[300], id[128], run[400];
    ledger_path(path, sizeof path, "damaged");
    sk_ledger *l = NULL;
    assert_int_equal(sk_ledger_open(path, 0, &l), 0);
    for (int i = 0; i < 100; i++) {
        unit_id(id, sizeof id, i);
        sk_ledger_touch(l, id, "v", i)->flags = SK_UNIT_DONE;
    }
    assert_int_equal(sk_ledger_compact(l, 1), 0);
    sk_ledger_close(l);
    snprintf(run, sizeof run, "%s.d/0000000000000000-0000000000000000.run",
             path);
    int fd = open(run, O_RDWR);
    assert_true(fd >= 0);
    uint8_t b;
    assert_int_equal(pread(fd, &b, 1, 30), 1);
    b ^= 0x40;
    assert_int_equal(pwrite(fd, &b, 1, 30), 1);
    close(fd);
    assert_int_equal(sk_ledger_open(path, 0, &l), 0);
    unit_id(id, sizeof id, 50);
    const sk_unit_rec *u = NULL;
    assert_int_equal(sk_ledger_lookup(l, id, &u), SKIPPR_CORRUPT);
    sk_ledger_close(l);
}

/* Front coding and compression: Firehose-like ids with a random tail cost
 * far less than their length; sequential ones a few bytes. */
static void test_bytes_per_unit(void **state)
{
    (void)state;
    char path[300], id[128], run[400];
    ledger_path(path, sizeof path, "small");
    sk_ledger *l = NULL;
    assert_int_equal(sk_ledger_open(path, 0, &l), 0);
    for (int i = 0; i < 4000; i++) {
        snprintf(id, sizeof id, "2024/01/05/13/events-%07d.json", i);
        sk_unit_rec *u = sk_ledger_touch(l, id, "1733400000.12345", 300);
        u->flags = SK_UNIT_DONE;
        u->offset = 300;
    }
    assert_int_equal(sk_ledger_compact(l, 1), 0);
    sk_ledger_close(l);
    snprintf(run, sizeof run, "%s.d/0000000000000000-0000000000000000.run",
             path);
    struct stat st;
    assert_int_equal(stat(run, &st), 0);
    assert_true(st.st_size < 4000 * 8); /* 36-byte ids, 16-byte versions */
}

/* A ledger file of earlier versions becomes the first run, read-only
 * opens leave it alone, and its records are found. */
static void test_legacy_converted(void **state)
{
    (void)state;
    char path[300];
    ledger_path(path, sizeof path, "legacy");
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    uint8_t h[28];
    memcpy(h, "SKLEDG01", 8);
    sk_put_u64(h + 8, 42); /* next slice id */
    sk_put_u64(h + 16, 2);
    sk_put_u32(h + 24, sk_crc32c(0, h, 24));
    fwrite(h, 1, sizeof h, f);
    const char *ids[2] = {"a/1", "a/2"};
    for (int i = 0; i < 2; i++) {
        uint8_t p[64];
        size_t n = 0;
        sk_put_u16(p, 3);
        memcpy(p + 2, ids[i], 3);
        sk_put_u16(p + 5, 2);
        memcpy(p + 7, "v1", 2);
        sk_put_u64(p + 9, 10);
        sk_put_u64(p + 17, 10);
        sk_put_u32(p + 25, SK_UNIT_DONE);
        n = 29;
        uint8_t lb[4], cb[4];
        sk_put_u32(lb, (uint32_t)n);
        sk_put_u32(cb, sk_crc32c(0, p, n));
        fwrite(lb, 1, 4, f);
        fwrite(p, 1, n, f);
        fwrite(cb, 1, 4, f);
    }
    fwrite("SKLEDEND", 1, 8, f);
    uint8_t t[8];
    sk_put_u64(t, 2);
    fwrite(t, 1, 8, f);
    fclose(f);
    sk_ledger *l = NULL;
    assert_int_equal(sk_ledger_open(path, 1, &l), 0);
    assert_int_equal(sk_ledger_file_done(l), 2);
    sk_ledger_close(l);
    assert_int_equal(access(path, F_OK), 0);
    assert_int_equal(sk_ledger_open(path, 0, &l), 0);
    assert_int_equal(access(path, F_OK), -1);
    assert_int_equal(sk_ledger_next_slice_id(l), 42);
    const sk_unit_rec *u = NULL;
    assert_int_equal(sk_ledger_lookup(l, "a/2", &u), 0);
    assert_non_null(u);
    assert_string_equal(u->version, "v1");
    assert_int_equal(sk_ledger_file_done(l), 2);
    sk_ledger_close(l);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_flush_merge_lookup),
        cmocka_unit_test(test_newest_wins),
        cmocka_unit_test(test_merge_cut_short),
        cmocka_unit_test(test_merge_after_a_kill),
        cmocka_unit_test(test_damage_found),
        cmocka_unit_test(test_bytes_per_unit),
        cmocka_unit_test(test_legacy_converted),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
