/* WAL recovery: replay order, torn tails cut, corruption reported, and the
 * rule that blocks count only when a commit follows them. */
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "state/slice.h"
#include "state/state.h"
#include "state/state_impl.h"
#include "state/unitrec_impl.h"
#include "base/fault.h"
#include "state/wal.h"

static char dir[256];

static int setup(void **state)
{
    (void)state;
    snprintf(dir, sizeof dir, "/tmp/skippr-test-wal-XXXXXX");
    assert_non_null(mkdtemp(dir));
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    char cmd[512];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    return system(cmd);
}

typedef struct seen {
    int n;
    uint32_t payload[64];
} seen;

static int collect(void *ud, sk_wal_pos pos, int type, const uint8_t *p,
                   size_t len)
{
    (void)pos;
    (void)type;
    seen *s = ud;
    assert_int_equal(len, 4);
    s->payload[s->n++] = sk_get_u32(p);
    return 0;
}

static void write_frames(const char *wdir, int start, int n)
{
    sk_wal *w;
    assert_int_equal(sk_wal_open(wdir, &w), 0);
    seen s = {0};
    assert_int_equal(sk_wal_replay(w, collect, &s), 0);
    for (int i = 0; i < n; i++) {
        uint8_t b[4];
        sk_put_u32(b, (uint32_t)(start + i));
        sk_iov part = {b, 4};
        assert_int_equal(sk_wal_append(w, SK_WAL_DONE, &part, 1, NULL), 0);
    }
    assert_int_equal(sk_wal_sync(w), 0);
    sk_wal_close(w);
}

static int replay_count(const char *wdir, int *rc_out)
{
    sk_wal *w;
    assert_int_equal(sk_wal_open(wdir, &w), 0);
    seen s = {0};
    *rc_out = sk_wal_replay(w, collect, &s);
    for (int i = 0; i < s.n; i++)
        assert_int_equal(s.payload[i], 1000 + i);
    sk_wal_close(w);
    return s.n;
}

static off_t seg_size(const char *wdir, int seg)
{
    char p[512];
    snprintf(p, sizeof p, "%s/wal-%016x.log", wdir, seg);
    struct stat st;
    return stat(p, &st) == 0 ? st.st_size : -1;
}

static void patch(const char *wdir, int seg, off_t off, int truncate_there)
{
    char p[512];
    snprintf(p, sizeof p, "%s/wal-%016x.log", wdir, seg);
    if (truncate_there) {
        assert_int_equal(truncate(p, off), 0);
        return;
    }
    int fd = open(p, O_RDWR);
    uint8_t b;
    assert_int_equal(pread(fd, &b, 1, off), 1);
    b ^= 0x5a;
    assert_int_equal(pwrite(fd, &b, 1, off), 1);
    close(fd);
}

static void test_replay_in_order(void **state)
{
    (void)state;
    char w[300];
    snprintf(w, sizeof w, "%s/a", dir);
    write_frames(w, 1000, 10);
    write_frames(w, 1010, 5); /* a second run appends in a new segment */
    int rc;
    assert_int_equal(replay_count(w, &rc), 15);
    assert_int_equal(rc, 0);
    assert_int_equal(seg_size(w, 2), 5 * (SK_WAL_HEADER + 4));
}

static void test_torn_tail_cut(void **state)
{
    (void)state;
    char w[300];
    snprintf(w, sizeof w, "%s/b", dir);
    write_frames(w, 1000, 10);
    off_t full = seg_size(w, 1);
    assert_int_equal(full, 10 * (SK_WAL_HEADER + 4));
    patch(w, 1, full - 3, 1); /* last frame cut short */
    int rc;
    assert_int_equal(replay_count(w, &rc), 9);
    assert_int_equal(rc, 0);
    assert_int_equal(seg_size(w, 1), 9 * (SK_WAL_HEADER + 4));
    /* A corrupted (not short) last frame is a torn tail too. */
    patch(w, 1, 8 * (SK_WAL_HEADER + 4) + SK_WAL_HEADER + 1, 0);
    assert_int_equal(replay_count(w, &rc), 8);
    assert_int_equal(rc, 0);
    assert_int_equal(seg_size(w, 1), 8 * (SK_WAL_HEADER + 4));
}

static void test_middle_corruption_reported(void **state)
{
    (void)state;
    char w[300];
    snprintf(w, sizeof w, "%s/c", dir);
    write_frames(w, 1000, 10);
    off_t before = seg_size(w, 1);
    patch(w, 1, 4 * (SK_WAL_HEADER + 4) + 20, 0); /* frame 5's CRC */
    int rc;
    replay_count(w, &rc);
    assert_int_equal(rc, SKIPPR_CORRUPT);
    assert_int_equal(seg_size(w, 1), before); /* nothing cut */
}

/* n frames 1000.. into a new WAL at w: the first three in segment 1,
 * the rest in segment 2. */
static void write_two_segments(const char *w, int n)
{
    sk_wal *wal;
    assert_int_equal(sk_wal_open(w, &wal), 0);
    for (int i = 0; i < n; i++) {
        uint8_t b[4];
        sk_put_u32(b, (uint32_t)(1000 + i));
        sk_iov part = {b, 4};
        assert_int_equal(sk_wal_append(wal, SK_WAL_DONE, &part, 1, NULL), 0);
        if (i == 2) { /* a commit, then the log moves on */
            assert_int_equal(sk_wal_sync(wal), 0);
            assert_int_equal(sk_wal_rotate(wal), 0);
        }
    }
    assert_int_equal(sk_wal_sync(wal), 0);
    sk_wal_close(wal);
}

static void test_old_segment_corruption_reported(void **state)
{
    (void)state;
    char w[300];
    snprintf(w, sizeof w, "%s/d", dir);
    write_two_segments(w, 6);
    int rc;
    assert_int_equal(replay_count(w, &rc), 6);
    assert_int_equal(rc, 0);
    patch(w, 1, 3 * (SK_WAL_HEADER + 4) - 1, 0); /* end of segment 1 */
    replay_count(w, &rc);
    assert_int_equal(rc, SKIPPR_CORRUPT);
}

/* fuzz_wal found it: an older segment cut short at a frame boundary left
 * the newest segment's only frame out of sequence, which replay took for
 * a torn tail and cut, losing it silently. A whole frame that is not the
 * next in sequence is corruption. */
static void test_fuzz_wal_sequence_gap_is_corruption(void **state)
{
    (void)state;
    char w[300];
    snprintf(w, sizeof w, "%s/gap", dir);
    write_two_segments(w, 4);
    patch(w, 1, 2 * (SK_WAL_HEADER + 4), 1); /* segment 1 loses frame 3 */
    off_t before = seg_size(w, 2);
    int rc;
    assert_int_equal(replay_count(w, &rc), 2);
    assert_int_equal(rc, SKIPPR_CORRUPT);
    assert_int_equal(seg_size(w, 2), before); /* nothing was cut */
}

static void copy_file(const char *from, const char *to)
{
    char cmd[1100];
    snprintf(cmd, sizeof cmd, "cp '%s' '%s'", from, to);
    assert_int_equal(system(cmd), 0);
}

static int is_zeros(const char *path, off_t from, off_t to)
{
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    assert_int_equal(fseeko(f, from, SEEK_SET), 0);
    int zero = 1;
    for (off_t i = from; i < to; i++)
        zero &= fgetc(f) == 0;
    fclose(f);
    return zero;
}

/* Direct writes: a sync pads the last block with zeros, and the frames
 * that follow rewrite that block. A crash at either point leaves a
 * segment that replays whole, its padding cut; a clean close leaves it
 * its exact length, and so does a rotation. */
static void test_direct_write_padding(void **state)
{
    (void)state;
    char w[300], crash1[300], crash2[300], seg[400], to[400];
    snprintf(w, sizeof w, "%s/direct", dir);
    snprintf(crash1, sizeof crash1, "%s/crash1", dir);
    snprintf(crash2, sizeof crash2, "%s/crash2", dir);
    snprintf(seg, sizeof seg, "%s/wal-%016x.log", w, 1);
    assert_int_equal(mkdir(crash1, 0755), 0);
    assert_int_equal(mkdir(crash2, 0755), 0);
    sk_wal *wal;
    assert_int_equal(sk_wal_open(w, &wal), 0);
    const off_t frame = SK_WAL_HEADER + 4;
    for (int i = 0; i < 6; i++) {
        uint8_t b[4];
        sk_put_u32(b, (uint32_t)(1000 + i));
        sk_iov part = {b, 4};
        assert_int_equal(sk_wal_append(wal, SK_WAL_DONE, &part, 1, NULL), 0);
        if (i == 2 || i == 5) {
            assert_int_equal(sk_wal_sync(wal), 0);
            if (sk_wal_direct(wal)) { /* ext4, where the suite runs */
                assert_int_equal(seg_size(w, 1), 4096);
                assert_true(is_zeros(seg, (i + 1) * frame, 4096));
            } else {
                assert_int_equal(seg_size(w, 1), (i + 1) * frame);
            }
            snprintf(to, sizeof to, "%s/wal-%016x.log",
                     i == 2 ? crash1 : crash2, 1);
            copy_file(seg, to); /* the segment as a kill -9 leaves it */
        }
    }
    sk_wal_close(wal);
    assert_int_equal(seg_size(w, 1), 6 * frame);
    int rc;
    assert_int_equal(replay_count(crash1, &rc), 3);
    assert_int_equal(rc, 0);
    assert_int_equal(seg_size(crash1, 1), 3 * frame);
    assert_int_equal(replay_count(crash2, &rc), 6);
    assert_int_equal(rc, 0);
    assert_int_equal(seg_size(crash2, 1), 6 * frame);

    /* A rotation leaves the older segment its exact length (a sync before
     * it must not write the padding back), so zeros after an older
     * segment's last frame are corruption. */
    char old[300];
    snprintf(old, sizeof old, "%s/old", dir);
    write_two_segments(old, 6);
    assert_int_equal(seg_size(old, 1), 3 * frame);
    snprintf(seg, sizeof seg, "%s/wal-%016x.log", old, 1);
    assert_int_equal(truncate(seg, 4000), 0);
    replay_count(old, &rc);
    assert_int_equal(rc, SKIPPR_CORRUPT);
}

/* A file system that took O_DIRECT at open and then refuses a direct
 * write (EINVAL; injected): the segment leaves direct mode, the refused
 * frames go through the page cache over the padded block, and neither a
 * kill nor the log moving on leaves padding where replay would call it
 * corruption. */
static void test_direct_write_refused(void **state)
{
    (void)state;
    char w[300], crash[300], seg[400], to[400];
    snprintf(w, sizeof w, "%s/refused", dir);
    snprintf(crash, sizeof crash, "%s/refused-crash", dir);
    snprintf(seg, sizeof seg, "%s/wal-%016x.log", w, 1);
    assert_int_equal(mkdir(crash, 0755), 0);
    sk_wal *wal;
    assert_int_equal(sk_wal_open(w, &wal), 0);
    const off_t frame = SK_WAL_HEADER + 4;
    sk_fault_arm(SK_FAULT_DIRECT, 2, 0);
    for (int i = 0; i < 9; i++) {
        uint8_t b[4];
        sk_put_u32(b, (uint32_t)(1000 + i));
        sk_iov part = {b, 4};
        assert_int_equal(sk_wal_append(wal, SK_WAL_DONE, &part, 1, NULL), 0);
        if (i == 2) { /* the first direct write: a padded block */
            assert_int_equal(sk_wal_sync(wal), 0);
            if (!sk_wal_direct(wal)) { /* tmpfs: nothing to refuse */
                sk_fault_arm(SK_FAULT_DIRECT, 0, 0);
                sk_wal_close(wal);
                skip();
            }
            assert_int_equal(seg_size(w, 1), 4096);
        }
        if (i == 5) { /* refused: written again through the page cache */
            assert_int_equal(sk_wal_sync(wal), 0);
            assert_false(sk_wal_direct(wal));
            assert_true(is_zeros(seg, 6 * frame, 4096));
            snprintf(to, sizeof to, "%s/wal-%016x.log", crash, 1);
            copy_file(seg, to); /* the segment as a kill -9 leaves it */
            assert_int_equal(sk_wal_rotate(wal), 0);
            /* the log moved on: the older segment is cut to its frames */
            assert_int_equal(seg_size(w, 1), 6 * frame);
        }
    }
    sk_fault_arm(SK_FAULT_DIRECT, 0, 0);
    assert_int_equal(sk_wal_sync(wal), 0);
    sk_wal_close(wal);
    int rc;
    assert_int_equal(replay_count(w, &rc), 9);
    assert_int_equal(rc, 0);
    assert_int_equal(replay_count(crash, &rc), 6);
    assert_int_equal(rc, 0);
    assert_int_equal(seg_size(crash, 1), 6 * frame);
}

static int count_records(void *ud, const uint8_t *rec, size_t len)
{
    (void)rec;
    (void)len;
    (*(int *)ud)++;
    return 0;
}

static void test_uncommitted_blocks_do_not_count(void **state)
{
    (void)state;
    sk_state *st;
    assert_int_equal(sk_state_open(dir, "ws", "p", 0, NULL, &st), 0);
    sk_slice *s = sk_state_slice(st, "k", 1, sk_hash_fast("k", 1), NULL, 0);
    assert_non_null(s);
    for (int i = 0; i < 3; i++)
        assert_int_equal(sk_state_append(st, s, "{\"a\":1}", 7), 0);
    sk_unit_rec *u = sk_ledger_touch(st->ledger, "unit", "v1", 100);
    u->offset = 21;
    u->dirty = 1;
    assert_int_equal(sk_state_commit(st), 0);
    /* More records reach the WAL file, but no commit follows. */
    for (int i = 0; i < 5; i++)
        assert_int_equal(sk_state_append(st, s, "{\"b\":2}", 7), 0);
    u->offset = 56;
    u->dirty = 1;
    assert_int_equal(sk_state_flush_blocks(st, 0), 0);
    assert_int_equal(sk_wal_sync(st->wal), 0);
    sk_state_close(st);

    assert_int_equal(sk_state_open(dir, "ws", "p", 0, NULL, &st), 0);
    assert_int_equal(st->nlive, 1);
    assert_int_equal(st->live[0]->records, 3);
    int n = 0;
    skippr_buf scratch;
    skippr_buf_init(&scratch, 1 << 20);
    assert_int_equal(sk_state_foreach_record(st, st->live[0], &scratch,
                                             count_records, &n), 0);
    assert_int_equal(n, 3);
    const sk_unit_rec *got;
    assert_int_equal(sk_ledger_lookup(st->ledger, "unit", &got), 0);
    assert_int_equal(got->offset, 21);
    /* Appends continue the recovered slice; a second process is refused. */
    sk_slice *again = sk_state_slice(st, "k", 1, sk_hash_fast("k", 1), NULL, 0);
    assert_ptr_equal(again, st->live[0]);
    sk_state *other;
    assert_int_equal(sk_state_open(dir, "ws", "p", 0, NULL, &other),
                     SKIPPR_LOCKED);
    skippr_buf_free(&scratch);
    sk_state_close(st);
}

static void test_seal_survives_and_done_forgets(void **state)
{
    (void)state;
    sk_state *st;
    assert_int_equal(sk_state_open(dir, "ws", "q", 0, NULL, &st), 0);
    sk_slice *s = sk_state_slice(st, "ns/x=1", 6, sk_hash_fast("ns/x=1", 6), NULL, 0);
    assert_int_equal(sk_state_append(st, s, "{}", 2), 0);
    assert_int_equal(sk_state_commit(st), 0);
    assert_int_equal(sk_state_seal(st, s, ".jsonl", NULL, 0), 0);
    assert_int_equal(sk_wal_sync(st->wal), 0);
    char key[256];
    snprintf(key, sizeof key, "%s", s->object_key);
    uint32_t crc = s->object_crc;
    assert_int_equal(s->object_bytes, 3);
    sk_state_close(st);

    assert_int_equal(sk_state_open(dir, "ws", "q", 0, NULL, &st), 0);
    assert_int_equal(st->nlive, 1);
    assert_int_equal(st->live[0]->state, SK_SLICE_SEALED);
    assert_string_equal(st->live[0]->object_key, key);
    assert_int_equal(st->live[0]->object_crc, crc);
    assert_int_equal(sk_state_done(st, st->live[0]), 0);
    assert_int_equal(sk_wal_sync(st->wal), 0);
    sk_state_close(st);

    assert_int_equal(sk_state_open(dir, "ws", "q", 0, NULL, &st), 0);
    assert_int_equal(st->nlive, 0);
    sk_state_close(st);
}

/* A done slice whose SLICE frame went with a collected segment but whose
 * later blocks remain must not break recovery (found by the crash test). */
static void test_gc_keeps_recovery_consistent(void **state)
{
    (void)state;
    sk_state *st;
    assert_int_equal(sk_state_open(dir, "ws", "gc", 0, NULL, &st), 0);
    sk_slice *a = sk_state_slice(st, "a", 1, sk_hash_fast("a", 1), NULL, 0);
    sk_slice *b = sk_state_slice(st, "b", 1, sk_hash_fast("b", 1), NULL, 0);
    assert_int_equal(sk_state_append(st, a, "{}", 2), 0);
    assert_int_equal(sk_state_commit(st), 0);
    assert_int_equal(sk_wal_rotate(st->wal), 0); /* a starts in segment 1 */
    assert_int_equal(sk_state_append(st, b, "[]", 2), 0);
    assert_int_equal(sk_state_append(st, a, "{}", 2), 0);
    assert_int_equal(sk_state_commit(st), 0);
    assert_int_equal(sk_wal_rotate(st->wal), 0);
    assert_int_equal(sk_state_seal(st, a, ".jsonl", NULL, 0), 0);
    assert_int_equal(sk_wal_sync(st->wal), 0);
    assert_int_equal(sk_state_done(st, a), 0);
    assert_int_equal(sk_wal_sync(st->wal), 0);
    /* b pins segment 2; segment 1 (a's start) is collected. */
    assert_int_equal(sk_state_gc(st), 0);
    assert_int_equal(sk_wal_first_seg(st->wal), 2);
    sk_state_close(st);

    assert_int_equal(sk_state_open(dir, "ws", "gc", 0, NULL, &st), 0);
    assert_int_equal(st->nlive, 1);
    assert_int_equal(st->live[0]->records, 1);
    assert_memory_equal(st->live[0]->key, "b", 1);
    sk_state_close(st);
}

/* A fake growing sink for streamed slices: one object per slice id in
 * memory; "synced" is what a sync made durable (what a power loss keeps). */
typedef struct fake_sink {
    char bytes[8][4096];
    size_t len[8], synced[8];
    int open[8]; /* the object is open (the pipeline's handle) */
    int puts, syncs;
} fake_sink;

static int fake_put(void *ud, sk_slice *s, const void *p, size_t n)
{
    fake_sink *f = ud;
    assert_true(s->id < 8);
    /* a reopen cuts back to what the state recorded */
    if (!f->open[s->id]) {
        assert_true(f->len[s->id] >= s->pushed);
        f->len[s->id] = s->pushed;
        f->open[s->id] = 1;
    }
    assert_true(f->len[s->id] + n <= sizeof f->bytes[0]);
    memcpy(f->bytes[s->id] + f->len[s->id], p, n);
    f->len[s->id] += n;
    f->puts++;
    return 0;
}

static int fake_sync(void *ud)
{
    fake_sink *f = ud;
    memcpy(f->synced, f->len, sizeof f->len);
    f->syncs++;
    return 0;
}

/* The caller's half of a flush (state/streamed.h; the pipeline's pl_flush):
 * due buffers put to the fake sink, then the blocks. */
static int fake_flush(sk_state *st, fake_sink *f)
{
    sk_slice **v = NULL;
    size_t n = 0;
    int rc = sk_state_announce(st);
    if (!rc)
        rc = sk_state_due_puts(st, &v, &n);
    for (size_t i = 0; !rc && i < n; i++)
        rc = fake_put(f, v[i], v[i]->open_block.data,
                      (size_t)sk_state_put_len(st, v[i]));
    if (!rc)
        sk_state_pushed(st, v, n);
    sk_free(v);
    return rc ? rc : sk_state_flush_blocks(st, 0);
}

/* ... and of a commit (pl_commit): the fake sink synced in between. */
static int fake_commit(sk_state *st, fake_sink *f)
{
    int rc = fake_flush(st, f);
    if (!rc && sk_state_sink_unsynced(st)) {
        rc = fake_sync(f);
        sk_state_sink_synced(st);
    }
    return rc ? rc : sk_state_commit(st);
}

/* The state of name, reopened with slices that stream into f, whose
 * objects are then all closed (a new run). */
static sk_state *open_streaming(const char *name, fake_sink *f)
{
    sk_state *st;
    assert_int_equal(sk_state_open(dir, "ws", name, 0, NULL, &st), 0);
    st->grow = (sk_grow_config){.stream_forms = 1u << SK_FORM_LINES};
    memset(f->open, 0, sizeof f->open);
    return st;
}

/* Streamed slices: the WAL records lengths, never bytes; a crash after
 * puts that no commit recorded resumes at the recorded length; a slice
 * announced but never committed is an orphan; restatement lets old
 * segments go. */
static void test_streamed_slices(void **state)
{
    (void)state;
    fake_sink f;
    memset(&f, 0, sizeof f);
    sk_state *st = open_streaming("grow", &f);
    sk_slice *a = sk_state_slice(st, "a", 1, sk_hash_fast("a", 1), NULL, 0);
    assert_true(a->streamed);
    assert_int_equal(sk_state_append(st, a, "{\"r\":1}", 7), 0);
    assert_int_equal(f.puts, 0); /* waits for its SLICE frame */
    assert_int_equal(fake_commit(st, &f), 0);
    assert_int_equal(f.len[a->id], 8);
    assert_int_equal(f.synced[a->id], 8);
    assert_int_equal(a->durable_len, 8);
    uint64_t aid = a->id;
    /* More bytes put, then a crash before the commit records them. A
     * commit before the sink's sync refuses: it would record bytes a
     * power loss could take back. */
    assert_int_equal(sk_state_append(st, a, "{\"r\":2}", 7), 0);
    assert_int_equal(fake_flush(st, &f), 0);
    assert_int_equal(f.len[aid], 16);
    assert_int_equal(sk_state_commit(st), SKIPPR_INVAL);
    /* A new slice announced and put, never committed. */
    sk_slice *b = sk_state_slice(st, "b", 1, sk_hash_fast("b", 1), NULL, 0);
    assert_int_equal(sk_state_append(st, b, "{}", 2), 0);
    assert_int_equal(fake_flush(st, &f), 0);
    uint64_t bid = b->id;
    sk_state_close(st); /* the crash */

    /* No data frames: the WAL holds only metadata. */
    st = open_streaming("grow", &f);
    assert_int_equal(st->nlive, 1);
    a = st->live[0];
    assert_int_equal(a->id, aid);
    assert_true(a->streamed);
    assert_int_equal(a->durable_len, 8);
    assert_int_equal(a->records, 1);
    assert_int_equal(st->norphans, 1);
    assert_int_equal(st->orphans[0]->id, bid);
    assert_memory_equal(st->orphans[0]->key, "b", 1);
    sk_state_orphans_clear(st);
    /* The record comes again (the unit re-read); the object is cut back
     * at the first put and grows from there. */
    assert_int_equal(sk_state_append(st, a, "{\"r\":2}", 7), 0);
    assert_int_equal(fake_commit(st, &f), 0);
    assert_int_equal(f.len[aid], 16);
    assert_memory_equal(f.bytes[aid], "{\"r\":1}\n{\"r\":2}\n", 16);
    /* Restated in a new segment, the old ones can go. */
    assert_int_equal(sk_state_rotate(st), 0);
    assert_int_equal(sk_state_gc(st), 0);
    assert_int_equal(sk_wal_first_seg(st->wal), sk_wal_active_seg(st->wal));
    assert_int_equal(sk_state_seal(st, a, ".jsonl", NULL, 0), 0);
    assert_int_equal(sk_wal_sync(st->wal), 0);
    assert_int_equal(a->object_bytes, 16);
    sk_state_close(st);

    st = open_streaming("grow", &f);
    assert_int_equal(st->nlive, 1);
    assert_int_equal(st->live[0]->state, SK_SLICE_SEALED);
    assert_int_equal(st->live[0]->object_bytes, 16);
    assert_int_equal(st->norphans, 0);
    assert_int_equal(sk_state_done(st, st->live[0]), 0);
    assert_int_equal(sk_wal_sync(st->wal), 0);
    sk_state_close(st);
}

/* An append that fills a streamed slice's buffer asks the caller to put
 * it: after the record (SK_STATE_PUT_NOW) or, when the record would not
 * fit a full buffer, before it (SK_STATE_PUT_FIRST, not appended). A
 * flush that finds a buffer not put refuses rather than lose it. */
static void test_streamed_full_buffer(void **state)
{
    (void)state;
    fake_sink f;
    memset(&f, 0, sizeof f);
    sk_state *st = open_streaming("full", &f);
    st->block_bytes = 16;
    sk_slice *a = sk_state_slice(st, "a", 1, sk_hash_fast("a", 1), NULL, 0);
    assert_int_equal(sk_state_append(st, a, "0123456789", 10), 0);
    assert_int_equal(fake_commit(st, &f), 0); /* announced, then put */
    assert_int_equal(f.len[a->id], 11);
    assert_int_equal(sk_state_append(st, a, "abcdefghij", 10), 0);
    assert_int_equal(sk_state_append(st, a, "ABCDEFGHIJ", 10),
                     SK_STATE_PUT_NOW);
    assert_int_equal(a->records, 3);
    assert_int_equal(sk_state_flush_blocks(st, 0), SKIPPR_INVAL);
    assert_int_equal(fake_put(&f, a, a->open_block.data,
                              (size_t)sk_state_put_len(st, a)), 0);
    sk_state_pushed_one(st, a);
    assert_int_equal(fake_commit(st, &f), 0);
    assert_int_equal(a->durable_len, 33);
    assert_memory_equal(f.bytes[a->id] + 11, "abcdefghij\nABCDEFGHIJ\n", 22);

    /* A full block's buffer that the next record does not fit. */
    char big[3000];
    memset(big, 'x', sizeof big);
    st->block_bytes = 4096;
    assert_int_equal(sk_state_append(st, a, big, sizeof big), 0);
    assert_true(a->open_block.cap >= 4096);
    assert_int_equal(sk_state_append(st, a, big, sizeof big),
                     SK_STATE_PUT_FIRST);
    assert_int_equal(a->records, 4); /* the second one waits */
    assert_int_equal(a->open_block.len, sizeof big + 1);
    sk_state_close(st);
}

/* Ledger lookups in listing order: after the stream reaches the file's
 * end, ids past the last one are answered "not there" (without reading it
 * all again), ids inside it are still found, and a compaction in the
 * middle (as a long run does) changes no answer. */
static void test_ledger_lookups_past_the_end(void **state)
{
    (void)state;
    char path[300];
    snprintf(path, sizeof path, "%s/ledger-lookups", dir);
    sk_ledger *l = NULL;
    assert_int_equal(sk_ledger_open(path, 0, &l), 0);
    char id[32];
    for (int i = 0; i < 300; i += 2) { /* even ids are finished */
        snprintf(id, sizeof id, "obj-%05d", i);
        sk_unit_rec *u = sk_ledger_touch(l, id, "v", 10);
        assert_non_null(u);
        u->flags = SK_UNIT_DONE;
        u->offset = 10;
        if (i == 150)
            assert_int_equal(sk_ledger_compact(l, 1), 0);
    }
    assert_int_equal(sk_ledger_compact(l, 1), 0);
    assert_int_equal(sk_ledger_file_count(l), 150);
    assert_int_equal(sk_ledger_recent_count(l), 0);
    for (int pass = 0; pass < 2; pass++) {
        for (int i = 0; i < 600; i++) {
            snprintf(id, sizeof id, "obj-%05d", i);
            const sk_unit_rec *u = NULL;
            assert_int_equal(sk_ledger_lookup(l, id, &u), 0);
            if (i < 300 && i % 2 == 0) {
                assert_non_null(u);
                assert_string_equal(u->id, id);
                assert_true(u->flags & SK_UNIT_DONE);
            } else {
                assert_null(u);
            }
        }
        /* Backwards after the end: found again. */
        const sk_unit_rec *u = NULL;
        assert_int_equal(sk_ledger_lookup(l, "obj-00002", &u), 0);
        assert_non_null(u);
    }
    sk_ledger_close(l);
}

/* A slice's tag is part of its identity and comes back from the WAL as
 * written: one partition holds a plain, a multi-line, two CSV and an XML
 * slice, each its own. */
static void test_typed_tags_survive_reopen(void **state)
{
    (void)state;
    sk_state *st;
    assert_int_equal(sk_state_open(dir, "ws", "tags", 0, NULL, &st), 0);
    const char *k = "ns/x=1";
    uint64_t h = sk_hash_fast(k, 6);
    sk_slice_tag tags[] = {
        {.form = SK_FORM_LINES},
        {.form = SK_FORM_MULTILINE},
        {.form = SK_FORM_CSV, .header_id = 0x0123456789abcdefu},
        {.form = SK_FORM_CSV, .header_id = 7},
        {.form = SK_FORM_XML, .header_id = 9, .root = "events", .root_len = 6},
    };
    sk_slice *v[5];
    for (int i = 0; i < 5; i++) {
        v[i] = sk_state_slice(st, k, 6, h, &tags[i], SK_SLICE_DATA);
        assert_non_null(v[i]);
        for (int j = 0; j < i; j++)
            assert_ptr_not_equal(v[i], v[j]);
        assert_int_equal(sk_state_append(st, v[i], "{}", 2), 0);
    }
    assert_ptr_equal(sk_state_slice(st, k, 6, h, NULL, SK_SLICE_DATA), v[0]);
    assert_int_equal(sk_state_commit(st), 0);
    sk_state_close(st);

    assert_int_equal(sk_state_open(dir, "ws", "tags", 0, NULL, &st), 0);
    assert_int_equal(st->nlive, 5);
    for (int i = 0; i < 5; i++) {
        sk_slice *s = sk_state_slice(st, k, 6, h, &tags[i], SK_SLICE_DATA);
        assert_non_null(s);
        assert_true(s->recovered);
        assert_int_equal(s->key_len, 6);
        assert_memory_equal(s->key, k, 7); /* NUL-ended */
        assert_int_equal(s->tag.form, tags[i].form);
        assert_true(s->tag.header_id == tags[i].header_id);
        assert_int_equal(s->tag.root_len, tags[i].root_len);
        if (tags[i].root_len)
            assert_memory_equal(s->tag.root, "events", 6);
    }
    sk_state_close(st);
}

/* Version 1 keys: the partition, then a NUL and the tag as text in the
 * forms written then; text that is none of them is refused. */
static int v1(const char *tag, sk_slice_tag *t)
{
    static char key[64]; /* t's root points into it */
    size_t n = (size_t)snprintf(key, sizeof key, "ns/x=1%c%s", 0, tag);
    size_t nlen = 0;
    int rc = st_v1_key(key, n, &nlen, t);
    assert_int_equal(nlen, 6);
    return rc;
}

static void test_v1_tags_read(void **state)
{
    (void)state;
    sk_slice_tag t;
    size_t nlen;
    assert_int_equal(st_v1_key("ns/x=1", 6, &nlen, &t), 0);
    assert_int_equal(nlen, 6);
    assert_int_equal(t.form, SK_FORM_LINES);
    assert_int_equal(v1("json:multiline", &t), 0);
    assert_int_equal(t.form, SK_FORM_MULTILINE);
    assert_int_equal(v1("csv:00000000000000ff", &t), 0);
    assert_int_equal(t.form, SK_FORM_CSV);
    assert_true(t.header_id == 0xff);
    assert_int_equal(v1("xml:fedcba9876543210:ev:root", &t), 0);
    assert_int_equal(t.form, SK_FORM_XML);
    assert_true(t.header_id == 0xfedcba9876543210u);
    assert_int_equal(t.root_len, 7);
    assert_memory_equal(t.root, "ev:root", 7);
    assert_int_equal(v1("csv:00ff", &t), -1);
    assert_int_equal(v1("csv:00000000000000fg", &t), -1);
    assert_int_equal(v1("csv:00000000000000ff:", &t), -1);
    assert_int_equal(v1("tsv:00000000000000ff", &t), -1);
    assert_int_equal(v1("json:multi", &t), -1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_replay_in_order),
        cmocka_unit_test(test_torn_tail_cut),
        cmocka_unit_test(test_middle_corruption_reported),
        cmocka_unit_test(test_old_segment_corruption_reported),
        cmocka_unit_test(test_fuzz_wal_sequence_gap_is_corruption),
        cmocka_unit_test(test_direct_write_padding),
        cmocka_unit_test(test_direct_write_refused),
        cmocka_unit_test(test_uncommitted_blocks_do_not_count),
        cmocka_unit_test(test_seal_survives_and_done_forgets),
        cmocka_unit_test(test_gc_keeps_recovery_consistent),
        cmocka_unit_test(test_streamed_slices),
        cmocka_unit_test(test_streamed_full_buffer),
        cmocka_unit_test(test_typed_tags_survive_reopen),
        cmocka_unit_test(test_v1_tags_read),
        cmocka_unit_test(test_ledger_lookups_past_the_end),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
