/* libFuzzer target: WAL recovery (wal.c) reading corrupted segments.
 *
 * Once, a known log is written: 40 frames of every type over two
 * segments. Each input damages a copy of it: byte 0 picks a segment to
 * cut short (bytes 1-2 say where), the rest are (offset, xor) triples
 * that flip bytes in a segment. Both replays then run on the copy, the
 * read-only one first.
 *
 * Checked on every input: a replay ends with SKIPPR_OK or SKIPPR_CORRUPT
 * (never a crash, a hang or undefined behaviour); the frames it delivers
 * are a prefix of the known frames, each byte-equal; an undamaged log
 * delivers all of them; and damage to the older segment (not a torn tail)
 * is always reported as corruption. One exception, a known limit: an
 * older segment emptied to 0 bytes looks like a segment a crash left
 * empty (the log then starts with the next segment's frames).
 */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "state/wal.h"

#define NFRAMES 40
#define SEG0_FRAMES (NFRAMES / 2 + 1) /* frames before the rotation */

typedef struct frame {
    int type;
    uint8_t payload[300];
    size_t len;
} frame;

static frame known[NFRAMES];
static uint8_t *seg[2];
static size_t seg_len[2];
static char seg_name[2][64];
static char work[256];

typedef struct got {
    size_t base; /* index of the first frame expected */
    size_t n;
    int bad; /* a frame that is not the known one at its place */
} got;

static int on_frame(void *ud, sk_wal_pos pos, int type, const uint8_t *p,
                    size_t len)
{
    (void)pos;
    got *g = ud;
    size_t i = g->base + g->n;
    if (i >= NFRAMES || known[i].type != type || known[i].len != len ||
        memcmp(known[i].payload, p, len) != 0)
        g->bad = 1;
    g->n++;
    return 0;
}

static void clear_dir(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d)
        return;
    struct dirent *e;
    char path[512];
    while ((e = readdir(d)))
        if (e->d_name[0] != '.') {
            snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
            unlink(path);
        }
    closedir(d);
}

static uint8_t *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        abort();
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *b = malloc((size_t)n + 1);
    if (!b || fread(b, 1, (size_t)n, f) != (size_t)n)
        abort();
    fclose(f);
    *len = (size_t)n;
    return b;
}

static void setup(void)
{
    sk_log_level = -1; /* the replays' own lines are not wanted here */
    const char *base = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
    snprintf(work, sizeof work, "%s/skippr-fuzz-wal-XXXXXX", base);
    if (!mkdtemp(work))
        abort();
    sk_wal *w;
    if (sk_wal_open(work, &w))
        abort();
    uint32_t x = 12345;
    for (int i = 0; i < NFRAMES; i++) {
        frame *f = &known[i];
        f->type = 1 + i % 6;
        f->len = (size_t)(i * 37 % 300);
        for (size_t k = 0; k < f->len; k++) {
            x = x * 1103515245u + 12345u;
            f->payload[k] = (uint8_t)(x >> 16);
        }
        sk_iov part = {f->payload, f->len};
        if (sk_wal_append(w, f->type, &part, 1, NULL))
            abort();
        if (i == NFRAMES / 2 && (sk_wal_sync(w) || sk_wal_rotate(w)))
            abort();
    }
    if (sk_wal_sync(w))
        abort();
    sk_wal_close(w);
    /* the two segments, oldest first */
    DIR *d = opendir(work);
    struct dirent *e;
    int n = 0;
    while ((e = readdir(d)))
        if (strncmp(e->d_name, "wal-", 4) == 0 && n < 2)
            snprintf(seg_name[n++], sizeof seg_name[0], "%s", e->d_name);
    closedir(d);
    if (n != 2)
        abort();
    if (strcmp(seg_name[0], seg_name[1]) > 0) {
        char t[64];
        memcpy(t, seg_name[0], 64);
        memcpy(seg_name[0], seg_name[1], 64);
        memcpy(seg_name[1], t, 64);
    }
    for (int i = 0; i < 2; i++) {
        char path[512];
        snprintf(path, sizeof path, "%s/%s", work, seg_name[i]);
        seg[i] = slurp(path, &seg_len[i]);
    }
    clear_dir(work);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!seg[0])
        setup();
    uint8_t *copy[2];
    size_t len[2];
    int damaged[2];
    for (int i = 0; i < 2; i++) {
        copy[i] = malloc(seg_len[i]);
        if (!copy[i])
            abort();
        memcpy(copy[i], seg[i], seg_len[i]);
        len[i] = seg_len[i];
    }
    if (size >= 3 && data[0] % 3 != 2) {
        int s = data[0] % 3;
        len[s] = ((size_t)data[1] << 8 | data[2]) % (len[s] + 1);
    }
    for (size_t i = 3; i + 3 <= size; i += 4) {
        int s = data[i] & 1;
        if (!len[s])
            continue;
        size_t off = ((size_t)data[i + 1] << 8 | data[i + 2]) % len[s];
        copy[s][off] ^= i + 3 < size ? data[i + 3] : 0xff;
    }
    for (int s = 0; s < 2; s++)
        damaged[s] = len[s] != seg_len[s] ||
                     memcmp(copy[s], seg[s], len[s]) != 0;
    for (int i = 0; i < 2; i++) {
        char path[512];
        snprintf(path, sizeof path, "%s/%s", work, seg_name[i]);
        FILE *f = fopen(path, "wb");
        if (!f || fwrite(copy[i], 1, len[i], f) != len[i])
            abort();
        fclose(f);
        free(copy[i]);
    }
    for (int pass = 0; pass < 2; pass++) {
        sk_wal *w;
        if (sk_wal_open(work, &w))
            abort();
        got g = {len[0] == 0 ? SEG0_FRAMES : 0, 0, 0};
        int rc = pass == 0 ? sk_wal_replay_readonly(w, on_frame, &g)
                           : sk_wal_replay(w, on_frame, &g);
        sk_wal_close(w);
        const char *why = NULL;
        if (g.bad)
            why = "a frame that was never written, or out of place";
        else if (rc != SKIPPR_OK && rc != SKIPPR_CORRUPT)
            why = "neither OK nor CORRUPT";
        else if (!damaged[0] && !damaged[1] && (rc != SKIPPR_OK ||
                                                g.n != NFRAMES))
            why = "an undamaged log not replayed whole";
        /* The older segment was fsynced whole before the newer began:
         * damage there is corruption, never a torn tail to cut. */
        else if (damaged[0] && len[0] > 0 && rc != SKIPPR_CORRUPT)
            why = "damage to the older segment not reported";
        if (why) {
            fprintf(stderr, "fuzz_wal: %s (%s replay: %s, %zu frames; "
                    "damaged %d %d)\n", why, pass ? "repairing" : "read-only",
                    skippr_status_str(rc), g.n, damaged[0], damaged[1]);
            abort();
        }
    }
    clear_dir(work);
    return 0;
}
