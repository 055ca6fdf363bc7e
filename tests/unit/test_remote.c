/* State off the box (state/remote.c) against a store kept in memory that
 * honours If-None-Match and If-Match as S3 does: the lease (taken, refused
 * while renewed, taken over once it lapses or is released), the WAL's
 * synced bytes stored and restored into an empty folder, a segment whose
 * first bytes were dropped skipped, a gap refused, two writers fenced by
 * the names of their WAL objects, a segment of many objects stored
 * again as a few (also when that was cut short), and files stored through
 * store_put_file or, for a sink without it, mapped. */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "base/common.h"
#include "state/ledger.h"
#include "state/unitrec_impl.h"
#include "state/remote.h"
#include "state/wal.h"

/* ---- the store -------------------------------------------------------- */

#define MAX_OBJ 1024

typedef struct obj {
    char key[256];
    uint8_t *data;
    size_t len;
    char etag[32];
} obj;

static obj objs[MAX_OBJ];
static size_t nobj;
static unsigned etags;
/* Two remotes in one test (and their renewal threads) share the store. */
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;

static obj *find(const char *key)
{
    for (size_t i = 0; i < nobj; i++)
        if (strcmp(objs[i].key, key) == 0)
            return &objs[i];
    return NULL;
}

static int m_get_locked(void *ctx, const char *key, uint64_t off,
                        void *buf, size_t cap, size_t *got, uint64_t *size,
                        char *etag, size_t etag_cap)
{
    (void)ctx;
    obj *o = find(key);
    if (!o)
        return SKIPPR_NOENT;
    *size = o->len;
    *got = off >= o->len ? 0 : SK_MIN(cap, o->len - off);
    memcpy(buf, o->data + (off < o->len ? off : 0), *got);
    if (etag)
        snprintf(etag, etag_cap, "%s", o->etag);
    return SKIPPR_OK;
}

static int m_put_locked(void *ctx, const char *key, const void *buf,
                        size_t len, const char *cond, char *etag,
                        size_t etag_cap)
{
    (void)ctx;
    obj *o = find(key);
    if (cond && strcmp(cond, "*") == 0 && o)
        return SKIPPR_CHANGED;
    if (cond && strcmp(cond, "*") != 0 && (!o || strcmp(o->etag, cond)))
        return SKIPPR_CHANGED;
    if (!o) {
        assert_true(nobj < MAX_OBJ);
        o = &objs[nobj++];
        memset(o, 0, sizeof *o); /* the slot may hold a moved pointer */
        snprintf(o->key, sizeof o->key, "%s", key);
    }
    free(o->data);
    o->data = malloc(len ? len : 1);
    assert_non_null(o->data);
    memcpy(o->data, buf, len);
    o->len = len;
    snprintf(o->etag, sizeof o->etag, "e%u", ++etags);
    if (etag)
        snprintf(etag, etag_cap, "%s", o->etag);
    return SKIPPR_OK;
}

static int m_delete_locked(void *ctx, const char *key)
{
    (void)ctx;
    obj *o = find(key);
    if (o) {
        free(o->data);
        *o = objs[--nobj];
    }
    return SKIPPR_OK;
}

static int by_key(const void *a, const void *b)
{
    return strcmp(((const obj *)a)->key, ((const obj *)b)->key);
}

static int m_list_locked(void *ctx, const char *prefix, skippr_unit_cb cb,
                         void *cb_data)
{
    (void)ctx;
    qsort(objs, nobj, sizeof *objs, by_key);
    for (size_t i = 0; i < nobj; i++) {
        if (strncmp(objs[i].key, prefix, strlen(prefix)) != 0)
            continue;
        skippr_unit u = {objs[i].key, objs[i].etag, (int64_t)objs[i].len,
                         0};
        if (cb(cb_data, &u))
            break;
    }
    return SKIPPR_OK;
}

static int m_get(void *ctx, const char *key, uint64_t off, void *buf,
                 size_t cap, size_t *got, uint64_t *size, char *etag,
                 size_t etag_cap)
{
    pthread_mutex_lock(&mu);
    int rc = m_get_locked(ctx, key, off, buf, cap, got, size, etag, etag_cap);
    pthread_mutex_unlock(&mu);
    return rc;
}

static int m_put(void *ctx, const char *key, const void *buf, size_t len,
                 const char *cond, char *etag, size_t etag_cap)
{
    pthread_mutex_lock(&mu);
    int rc = m_put_locked(ctx, key, buf, len, cond, etag, etag_cap);
    pthread_mutex_unlock(&mu);
    return rc;
}

static int m_delete(void *ctx, const char *key)
{
    pthread_mutex_lock(&mu);
    int rc = m_delete_locked(ctx, key);
    pthread_mutex_unlock(&mu);
    return rc;
}

static int m_list(void *ctx, const char *prefix, skippr_unit_cb cb,
                  void *cb_data)
{
    pthread_mutex_lock(&mu);
    int rc = m_list_locked(ctx, prefix, cb, cb_data);
    pthread_mutex_unlock(&mu);
    return rc;
}

/* store_put_file: the file read 4 KiB at a time, as a sink reads parts. */
static unsigned put_files;

static int m_put_file(void *ctx, const char *key, int fd, uint64_t len,
                      char *etag, size_t etag_cap)
{
    uint8_t *buf = malloc(len ? (size_t)len : 1);
    assert_non_null(buf);
    for (uint64_t off = 0; off < len;) {
        size_t want = (size_t)SK_MIN(len - off, 4096u);
        ssize_t k = pread(fd, buf + off, want, (off_t)off);
        assert_true(k > 0);
        off += (uint64_t)k;
    }
    put_files++;
    int rc = m_put(ctx, key, buf, (size_t)len, NULL, etag, etag_cap);
    free(buf);
    return rc;
}

static const skippr_sink_ops store = {
    .struct_size = sizeof(skippr_sink_ops),
    .flags = SKIPPR_SINK_STORE,
    .store_get = m_get,
    .store_put = m_put,
    .store_delete = m_delete,
    .store_list = m_list,
    .store_put_file = m_put_file,
};

/* A sink built before store_put_file was appended: files go mapped. */
static const skippr_sink_ops store_mapped = {
    .struct_size = offsetof(skippr_sink_ops, store_put_file),
    .flags = SKIPPR_SINK_STORE,
    .store_get = m_get,
    .store_put = m_put,
    .store_delete = m_delete,
    .store_list = m_list,
};

static char dir[256];
static char wdir[300]; /* the WAL folder written, dir/wal */

static int setup(void **state)
{
    (void)state;
    snprintf(dir, sizeof dir, "/tmp/skippr-remote-XXXXXX");
    if (!mkdtemp(dir))
        return -1;
    snprintf(wdir, sizeof wdir, "%s/wal", dir);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    for (size_t i = 0; i < nobj; i++)
        free(objs[i].data);
    nobj = 0;
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    return system(cmd);
}

static sk_remote *take(int64_t lease)
{
    sk_remote *r = NULL;
    assert_int_equal(sk_remote_open(&store, NULL, "mem://", "w/p/", lease,
                                    NULL, &r),
                     SKIPPR_OK);
    return r;
}

/* ---- the lease --------------------------------------------------------- */

static void test_lease(void **state)
{
    (void)state;
    sk_remote *a = take(3);
    /* Renewed every second: a second process sees it renewed and gives up
     * well within the lease. */
    sk_remote *b = NULL;
    uint64_t t0 = sk_now_ns();
    assert_int_equal(sk_remote_open(&store, NULL, "mem://", "w/p/", 3, NULL,
                                    &b),
                     SKIPPR_LOCKED);
    assert_null(b);
    assert_true(sk_now_ns() - t0 < 2500000000ull);
    assert_int_equal(sk_remote_check(a), SKIPPR_OK);
    /* Released: the next one takes it at once. */
    sk_remote_close(a, 1);
    t0 = sk_now_ns();
    b = take(3);
    assert_true(sk_now_ns() - t0 < 500000000ull);
    /* Gone without a release (renewals stop): taken over once the lease
     * has gone unrenewed for its whole length. */
    sk_remote_close(b, 0);
    t0 = sk_now_ns();
    sk_remote *c = take(3);
    uint64_t waited = sk_now_ns() - t0;
    assert_true(waited >= 3000000000ull && waited < 6000000000ull);
    sk_remote_close(c, 1);
}

/* ---- WAL bytes --------------------------------------------------------- */

static void frame(sk_wal *w, int i)
{
    char p[64];
    int n = snprintf(p, sizeof p, "frame %d", i);
    sk_iov v = {p, (size_t)n};
    assert_int_equal(sk_wal_append(w, SK_WAL_COMMIT, &v, 1, NULL), 0);
}

typedef struct seen {
    int n;
    char last[64];
} seen;

static int count_frame(void *ud, sk_wal_pos pos, int type,
                       const uint8_t *p, size_t len)
{
    (void)pos;
    (void)type;
    seen *s = ud;
    s->n++;
    snprintf(s->last, sizeof s->last, "%.*s", (int)len, (const char *)p);
    return 0;
}

/* Frames 0..n-1 written into wdir through a WAL that stores its syncs, two
 * segments (a rotation after half of them). */
static void write_frames(sk_remote *r, int n)
{
    sk_wal *w;
    assert_int_equal(sk_wal_open(wdir, &w), 0);
    assert_int_equal(sk_wal_set_remote(w, r, 1), 0);
    for (int i = 0; i < n; i++) {
        frame(w, i);
        assert_int_equal(sk_wal_sync(w), 0);
        if (i == n / 2 - 1)
            assert_int_equal(sk_wal_rotate(w), 0);
    }
    sk_wal_close(w);
}

static seen replay_restored(sk_remote *r, int *rc)
{
    char state[300], rdir[320];
    snprintf(state, sizeof state, "%s/restored", dir);
    snprintf(rdir, sizeof rdir, "%s/wal", state);
    seen s = {0, ""};
    *rc = sk_remote_restore(r, state);
    if (*rc)
        return s;
    sk_wal *w;
    assert_int_equal(sk_wal_open(rdir, &w), 0);
    *rc = sk_wal_replay(w, count_frame, &s);
    sk_wal_close(w);
    return s;
}

/* The store's copy restored into a new folder replays n frames, the
 * last one `last`. */
static void expect_restored(sk_remote *r, int n, const char *last)
{
    int rc;
    seen s = replay_restored(r, &rc);
    assert_int_equal(rc, 0);
    assert_int_equal(s.n, n);
    assert_string_equal(s.last, last);
}

static void test_wal_restored(void **state)
{
    (void)state;
    sk_remote *r = take(30);
    write_frames(r, 10);
    expect_restored(r, 10, "frame 9");
    sk_remote_close(r, 1);
}

static void test_dropped_segment_skipped(void **state)
{
    (void)state;
    sk_remote *r = take(30);
    write_frames(r, 10); /* segment 1: frames 0-4, 2: 5-9 */
    /* A drop of segment 1 cut short after its first object went. */
    assert_int_equal(sk_remote_delete(r, "wal/0000000000000000"), 0);
    expect_restored(r, 5, "frame 9");
    /* ... and the rest of segment 1 is gone from the store too. */
    assert_null(find("w/p/wal/0000000000000001"));
    sk_remote_close(r, 1);
}

static void test_gap_refused(void **state)
{
    (void)state;
    sk_remote *r = take(30);
    write_frames(r, 10);
    assert_int_equal(sk_remote_delete(r, "wal/0000000000000007"), 0);
    int rc;
    replay_restored(r, &rc);
    assert_int_equal(rc, SKIPPR_CORRUPT);
    sk_remote_close(r, 1);
}

/* A process that still believes it holds the state after another took
 * it over: its next WAL object's name is taken, and it stops. */
static void test_two_writers_fenced(void **state)
{
    (void)state;
    sk_remote *old = take(30);
    write_frames(old, 4);
    /* The new holder (the lease forced free here) restores and writes. */
    m_put(NULL, "w/p/lease", "skippr lease\nreleased\n", 22, NULL, NULL, 0);
    sk_remote *now = take(30);
    int rc;
    replay_restored(now, &rc);
    assert_int_equal(rc, 0);
    assert_int_equal(sk_remote_wal(now, 9, 0, "x", 1), 0);
    assert_int_equal(sk_remote_wal(old, 3, 99, "y", 1), SKIPPR_LOCKED);
    assert_int_equal(sk_remote_check(old), SKIPPR_LOCKED);
    sk_remote_close(now, 1);
    sk_remote_close(old, 0);
}

/* Hundreds of syncs of one segment: it is stored again from its start
 * every 256 objects and the objects before are removed, so the store
 * holds a few hundred objects, not one per sync; the restore is whole. */
static void test_rebase(void **state)
{
    (void)state;
    sk_remote *r = take(30);
    sk_wal *w;
    assert_int_equal(sk_wal_open(wdir, &w), 0);
    assert_int_equal(sk_wal_set_remote(w, r, 1), 0);
    for (int i = 0; i < 700; i++) {
        frame(w, i);
        assert_int_equal(sk_wal_sync(w), 0);
    }
    sk_wal_close(w);
    size_t wal_objects = 0;
    for (size_t i = 0; i < nobj; i++)
        wal_objects += strncmp(objs[i].key, "w/p/wal/", 8) == 0;
    assert_true(wal_objects < 256 + 8);
    expect_restored(r, 700, "frame 699");
    sk_remote_close(r, 1);
}

/* A copy from offset 0 whose removal of the older objects was cut short
 * (newest first: an older prefix is left): the restore reads the same
 * bytes, and removes the leftovers. */
static void test_rebase_cut_short(void **state)
{
    (void)state;
    sk_remote *r = take(30);
    assert_int_equal(sk_remote_wal(r, 1, 0, "aaaa", 4), 0);  /* n 0 */
    assert_int_equal(sk_remote_wal(r, 1, 4, "bbbb", 4), 0);  /* n 1 */
    assert_int_equal(sk_remote_wal(r, 1, 0, "aaaabbbb", 8), 0); /* n 2 */
    assert_int_equal(sk_remote_wal(r, 1, 8, "cc", 2), 0);    /* n 3 */
    assert_int_equal(sk_remote_delete(r, "wal/0000000000000001"), 0);
    char state_dir[300], seg[400];
    snprintf(state_dir, sizeof state_dir, "%s/restored", dir);
    assert_int_equal(sk_remote_restore(r, state_dir), 0);
    snprintf(seg, sizeof seg, "%s/wal/wal-0000000000000001.log", state_dir);
    FILE *f = fopen(seg, "rb");
    assert_non_null(f);
    char got[32] = "";
    size_t n = fread(got, 1, sizeof got - 1, f);
    fclose(f);
    assert_int_equal(n, 10);
    assert_string_equal(got, "aaaabbbbcc");
    assert_null(find("w/p/wal/0000000000000000"));
    assert_non_null(find("w/p/wal/0000000000000002"));
    sk_remote_close(r, 1);
}

/* ---- ledger runs --------------------------------------------------------- */

static size_t stored_runs(void)
{
    size_t n = 0;
    for (size_t i = 0; i < nobj; i++)
        n += strncmp(objs[i].key, "w/p/ledger.d/", 13) == 0;
    return n;
}

static void flush_unit(sk_ledger *l, int i)
{
    char id[64];
    snprintf(id, sizeof id, "2024/01/01/00/unit-%04d", i);
    sk_ledger_touch(l, id, "v", i)->flags = SK_UNIT_DONE;
    assert_int_equal(sk_ledger_compact(l, 1), 0);
}

/* A file (a ledger run) goes through store_put_file when the sink has
 * it, else mapped through store_put; either way the store holds its
 * bytes, and an empty file is an empty object. */
static void test_files_by_fd_or_mapped(void **state)
{
    (void)state;
    char path[400];
    snprintf(path, sizeof path, "%s/run", dir);
    const skippr_sink_ops *both[] = {&store, &store_mapped};
    for (size_t k = 0; k < 2; k++) {
        for (size_t len = 0; len <= 100000; len += 100000) {
            FILE *f = fopen(path, "wb");
            assert_non_null(f);
            for (size_t i = 0; i < len; i++)
                fputc((int)((i * 7 + k) % 251), f);
            assert_int_equal(fclose(f), 0);
            sk_remote *r = NULL;
            assert_int_equal(sk_remote_open(both[k], NULL, "mem://", "w/p/",
                                            30, NULL, &r),
                             SKIPPR_OK);
            unsigned before = put_files;
            assert_int_equal(sk_remote_put_file(r, "ledger.d/x.run", path),
                             0);
            assert_int_equal(put_files - before, both[k] == &store);
            obj *o = find("w/p/ledger.d/x.run");
            assert_non_null(o);
            assert_int_equal(o->len, len);
            for (size_t i = 0; i < len; i++)
                if (o->data[i] != (uint8_t)((i * 7 + k) % 251))
                    fail_msg("byte %zu differs", i);
            sk_remote_close(r, 1);
        }
    }
}

/* A merge's inputs left in the store by a crash (the merged run stored,
 * the inputs not yet removed) are restored with it; opening the ledger
 * removes them, here and from the store, and every unit is still known. */
static void test_merge_inputs_removed_after_restore(void **state)
{
    (void)state;
    char path[400], cmd[1200];
    snprintf(path, sizeof path, "%s/a/ledger", dir);
    sk_remote *r = take(30);
    sk_ledger *l = NULL;
    assert_int_equal(sk_ledger_open(path, 0, &l), 0);
    assert_int_equal(sk_ledger_set_remote(l, r, 0), 0);
    for (int i = 0; i < 7; i++)
        flush_unit(l, i);
    snprintf(cmd, sizeof cmd, "mkdir '%s/keep' && cp '%s.d'/*.run '%s/keep'/",
             dir, path, dir);
    assert_int_equal(system(cmd), 0);
    flush_unit(l, 7); /* the eighth: merged, its inputs removed */
    sk_ledger_close(l);
    assert_int_equal(stored_runs(), 1);
    /* The crash: the inputs are still in the store. */
    for (int i = 0; i < 7; i++) {
        char rel[80], file[600];
        snprintf(rel, sizeof rel, "ledger.d/%016x-%016x.run", i, i);
        snprintf(file, sizeof file, "%s/keep/%016x-%016x.run", dir, i, i);
        assert_int_equal(sk_remote_put_file(r, rel, file), 0);
    }
    assert_int_equal(stored_runs(), 8);
    snprintf(path, sizeof path, "%s/b", dir);
    assert_int_equal(sk_remote_restore(r, path), 0);
    snprintf(path, sizeof path, "%s/b/ledger", dir);
    assert_int_equal(sk_ledger_open(path, 0, &l), 0);
    assert_int_equal(sk_ledger_runs(l), 1);
    assert_int_equal(sk_ledger_set_remote(l, r, 0), 0);
    assert_int_equal(stored_runs(), 1);
    for (int i = 0; i < 8; i++) {
        char id[64];
        const sk_unit_rec *u = NULL;
        snprintf(id, sizeof id, "2024/01/01/00/unit-%04d", i);
        assert_int_equal(sk_ledger_lookup(l, id, &u), 0);
        assert_non_null(u);
        assert_int_equal(u->size, i);
    }
    sk_ledger_close(l);
    sk_remote_close(r, 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_lease, setup, teardown),
        cmocka_unit_test_setup_teardown(test_files_by_fd_or_mapped, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(
            test_merge_inputs_removed_after_restore, setup, teardown),
        cmocka_unit_test_setup_teardown(test_wal_restored, setup, teardown),
        cmocka_unit_test_setup_teardown(test_dropped_segment_skipped, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_gap_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(test_two_writers_fenced, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_rebase, setup, teardown),
        cmocka_unit_test_setup_teardown(test_rebase_cut_short, setup,
                                        teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
