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

/* 64 random bits (splitmix64), for names with an MD5 in them. */
static uint64_t mix(uint64_t x)
{
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

/* Records in columns: Firehose names with 16 random bytes in each (as
 * bench/units.py makes them) and nanosecond mtimes 20 to 60 µs apart for
 * versions cost 24.0 bytes a unit; whole records one after another (the
 * version 1 format) cost 26.3. The bound leaves half a byte for zstd's
 * versions. (The bench's own files, whose mtimes are closer together,
 * cost 23.6.) */
static void test_bytes_per_unit_random_names(void **state)
{
    (void)state;
    enum { N = 20000 };
    char path[300], id[160], ver[40], run[400];
    ledger_path(path, sizeof path, "md5names");
    sk_ledger *l = NULL;
    assert_int_equal(sk_ledger_open(path, 0, &l), 0);
    uint64_t ns = 100000000;
    for (int i = 0; i < N; i++) {
        uint64_t a = mix((uint64_t)i), b = mix(a);
        int day = 1 + i / 24000, hour = i / 1000 % 24;
        snprintf(id, sizeof id,
                 "2024/01/%02d/%02d/stream-1-2024-01-%02d-%02d-%03d-"
                 "%08x-%04x-%04x-%04x-%012llx",
                 day, hour, day, hour, i % 1000, (unsigned)(a >> 32),
                 (unsigned)(a >> 16) & 0xFFFF, (unsigned)a & 0xFFFF,
                 (unsigned)(b >> 48), (unsigned long long)b & 0xFFFFFFFFFFFFull);
        ns += 20000 + mix(b) % 40000; /* files written 20 to 60 µs apart */
        snprintf(ver, sizeof ver, "%llu.%09llu",
                 (unsigned long long)(1733400000 + ns / 1000000000),
                 (unsigned long long)(ns % 1000000000));
        sk_unit_rec *u = sk_ledger_touch(l, id, ver, 190 + i % 40);
        assert_non_null(u);
        u->flags = SK_UNIT_DONE;
        u->offset = u->size;
    }
    assert_int_equal(sk_ledger_compact(l, 1), 0);
    sk_ledger_close(l);
    snprintf(run, sizeof run, "%s.d/0000000000000000-0000000000000000.run",
             path);
    struct stat st;
    assert_int_equal(stat(run, &st), 0);
    printf("  %.1f bytes a unit\n", (double)st.st_size / N);
    assert_true(st.st_size * 2 <= 49 * N); /* 24.5 bytes a unit */
}

/* A run written by version 1 (records one after another in each block,
 * "SKLRUN01") is still read, from its start and from a seek. */
static const uint8_t run_v1[] =
    "\x53\x4b\x4c\x52\x55\x4e\x30\x31\x70\x00\x00\x00\x72\x00\x00\x00"
    "\x04\x00\x00\x00\x65\xf1\xd5\x4b\x28\xb5\x2f\xfd\x20\x72\x3d\x03"
    "\x00\xb2\xc6\x17\x1f\xb0\x27\x1d\x0c\xc3\x30\x4c\x4a\xcd\x43\xd9"
    "\xfe\x4c\x33\xdd\x7b\x93\xbd\x65\x92\x29\x08\x0e\x4e\x47\x43\xad"
    "\x98\x20\x57\xca\x88\x20\x77\x2d\xed\x44\x07\xc0\x08\x28\x12\x8b"
    "\xb3\xbe\x69\xb1\x55\x12\x4a\x16\x2d\x52\xac\xe9\x2a\x75\x26\x6d"
    "\x62\xda\x17\x76\xce\x2d\x79\x43\x70\x87\xc7\xc2\x71\x80\xd8\x60"
    "\xa3\x46\xd8\xeb\xff\x6e\xa2\x86\xd3\x83\x92\xea\x5c\xa7\x35\xf5"
    "\x3e\xe1\x02\x01\x00\xc9\xc0\x13\x00\x00\x00\x00\x08\x00\x00\x00"
    "\x00\x00\x00\x00\x11\x00\x32\x30\x32\x31\x2f\x31\x30\x2f\x30\x33"
    "\x2f\x30\x31\x2f\x61\x2d\x31\x53\x52\xd6\x27\x03\x00\x00\x00\x00"
    "\x00\x00\x00\x05\x00\x00\x00\x00\x00\x00\x00\x2a\x00\x00\x00\x00"
    "\x00\x00\x00\x04\x00\x00\x00\x00\x00\x00\x00\x03\x00\x00\x00\x00"
    "\x00\x00\x00\x01\x00\x00\x00\x11\x00\x0f\x00\x8c\x00\x00\x00\x00"
    "\x00\x00\x00\x01\x00\x00\x00\x1f\x00\x00\x00\x32\x30\x32\x31\x2f"
    "\x31\x30\x2f\x30\x33\x2f\x30\x31\x2f\x61\x2d\x31\x32\x30\x32\x31"
    "\x2f\x31\x30\x2f\x30\x34\x2f\x30\x30\x2f\x63\x60\x00\x00\x00\xc1"
    "\x97\x46\x5e\x53\x4b\x4c\x52\x55\x4e\x45\x4e";

static void test_version_1_run_read(void **state)
{
    (void)state;
    char path[300];
    ledger_path(path, sizeof path, "v1.run");
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(run_v1, 1, sizeof run_v1 - 1, f),
                     sizeof run_v1 - 1);
    fclose(f);
    sk_run_meta m;
    assert_int_equal(sk_run_read_meta(path, &m), 0);
    assert_int_equal(m.lo, 3);
    assert_int_equal(m.hi, 5);
    assert_int_equal(m.level, 1);
    assert_int_equal(m.next_slice_id, 42);
    assert_int_equal(m.count, 4);
    assert_int_equal(m.done, 3);
    static const struct {
        const char *id, *version;
        int64_t size, offset;
        uint32_t flags;
    } want[] = {
        {"2021/10/03/01/a-1", "1633222800.000000001", 120, 120, 1},
        {"2021/10/03/01/a-2", "1633222800.000000002", -1, 0, 0},
        {"2021/10/03/02/b", "\"9b2cf535f27731c974343645a3985328\"", 5000,
         640, 3},
        {"2021/10/04/00/c", "", 7, 7, 1},
    };
    ZSTD_DCtx *dctx = ZSTD_createDCtx();
    sk_run_cursor c = {0};
    assert_int_equal(sk_run_cursor_open(&c, path, dctx), 0);
    for (size_t i = 0; i < 4; i++) {
        assert_int_equal(sk_run_cursor_step(&c), 0);
        assert_true(c.valid);
        assert_string_equal(c.rec.id, want[i].id);
        assert_string_equal(c.rec.version, want[i].version);
        assert_int_equal(c.rec.size, want[i].size);
        assert_int_equal(c.rec.offset, want[i].offset);
        assert_int_equal(c.rec.flags, want[i].flags);
    }
    assert_int_equal(sk_run_cursor_step(&c), 0);
    assert_false(c.valid);
    assert_true(c.ended);
    assert_int_equal(sk_run_cursor_seek(&c, path, &m, dctx, "2021/10/03/02"),
                     0);
    assert_int_equal(sk_run_cursor_step(&c), 0);
    assert_true(c.valid);
    assert_string_equal(c.rec.id, "2021/10/03/01/a-1"); /* its block's start */
    sk_run_cursor_free(&c);
    ZSTD_freeDCtx(dctx);
    sk_run_meta_free(&m);
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
        cmocka_unit_test(test_bytes_per_unit_random_names),
        cmocka_unit_test(test_version_1_run_read),
        cmocka_unit_test(test_legacy_converted),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
