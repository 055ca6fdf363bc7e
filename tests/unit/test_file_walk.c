/* plugins/file/walk.c: a folder tree listed in the whole key's strcmp
 * order (as S3 lists), paused and resumed, with start_after and prefix. */
#include <errno.h>
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

#include "walk.h"

/* Names chosen so that per-folder name order differs from key order:
 * "a" < "a.b" by name, but "a.b" < "a/..." by key ('.' < '/'). */
static const char *const files[] = {
    "a-1", "a.b", "a/x", "a/y/z", "a0", "b/c/d/e", "b/c/d0", "b/c0", "b0",
    "z",
};
#define NFILES (sizeof files / sizeof *files)

static char root[256];

static void put(const char *key)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s", root, key);
    for (char *s = path + strlen(root) + 1; *s; s++)
        if (*s == '/') {
            *s = '\0';
            mkdir(path, 0755);
            *s = '/';
        }
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(key, f);
    fclose(f);
}

static int setup(void **state)
{
    (void)state;
    snprintf(root, sizeof root, "/tmp/skippr-walk-XXXXXX");
    assert_non_null(mkdtemp(root));
    for (size_t i = 0; i < NFILES; i++)
        put(files[i]);
    put(".hidden/f");
    put("a/.tmp-1");
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", root);
    return system(cmd);
}

typedef struct got {
    char keys[32][64];
    size_t n;
    size_t pause_at; /* pause after this many keys (0: never) */
} got;

static int note(void *ud, const char *key, const struct stat *st)
{
    got *g = ud;
    assert_true(g->n < 32);
    assert_int_equal(st->st_size, (off_t)strlen(key));
    snprintf(g->keys[g->n], sizeof g->keys[0], "%s", key);
    g->n++;
    return g->pause_at && g->n % g->pause_at == 0;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Every file once, hidden names left out, in strcmp order of the key. */
static void test_whole_tree_in_key_order(void **state)
{
    (void)state;
    const char *want[NFILES];
    memcpy(want, files, sizeof want);
    qsort(want, NFILES, sizeof *want, cmp_str);
    walker w = {0};
    got g = {0};
    assert_int_equal(walk_run(&w, root, "", NULL, note, &g), 0);
    assert_int_equal(g.n, NFILES);
    for (size_t i = 0; i < NFILES; i++)
        assert_string_equal(g.keys[i], want[i]);
    assert_int_equal(w.depth, 0);
    walk_reset(&w);
}

/* Paused every 3 keys and resumed from the last one given, the walk goes
 * on where it stopped; started after any key, it gives exactly the keys
 * after it, whether or not the walker was paused there. */
static void test_pause_resume_and_start_after(void **state)
{
    (void)state;
    walker w = {0};
    got g = {.pause_at = 3};
    const char *after = NULL;
    for (int round = 0; round < 10; round++) {
        size_t before = g.n;
        assert_int_equal(walk_run(&w, root, "", after, note, &g), 0);
        if (g.n == before)
            break;
        after = g.keys[g.n - 1];
    }
    assert_int_equal(g.n, NFILES);
    const char *want[NFILES];
    memcpy(want, files, sizeof want);
    qsort(want, NFILES, sizeof *want, cmp_str);
    for (size_t i = 0; i < NFILES; i++)
        assert_string_equal(g.keys[i], want[i]);
    /* A fresh start after keys that are not file names too. */
    const char *starts[] = {"a", "a.", "a/", "a/y", "b/c/d", "b/c/d/", "y"};
    for (size_t s = 0; s < sizeof starts / sizeof *starts; s++) {
        walk_reset(&w);
        got h = {0};
        assert_int_equal(walk_run(&w, root, "", starts[s], note, &h), 0);
        size_t k = 0;
        for (size_t i = 0; i < NFILES; i++)
            if (strcmp(want[i], starts[s]) > 0) {
                assert_true(k < h.n);
                assert_string_equal(h.keys[k], want[i]);
                k++;
            }
        assert_int_equal(h.n, k);
    }
    walk_reset(&w);
}

/* A prefix is a string prefix of the key, not a folder. */
static void test_prefix(void **state)
{
    (void)state;
    walker w = {0};
    got g = {0};
    assert_int_equal(walk_run(&w, root, "b/c/d", NULL, note, &g), 0);
    assert_int_equal(g.n, 2);
    assert_string_equal(g.keys[0], "b/c/d/e");
    assert_string_equal(g.keys[1], "b/c/d0");
    walk_reset(&w);
}

/* A missing root is an error naming it; the walker can be used again. */
static void test_missing_root(void **state)
{
    (void)state;
    walker w = {0};
    got g = {0};
    char gone[300];
    snprintf(gone, sizeof gone, "%s/nothing-here", root);
    assert_int_equal(walk_run(&w, gone, "", NULL, note, &g), ENOENT);
    assert_string_equal(w.failed, gone);
    assert_int_equal(walk_run(&w, root, "", NULL, note, &g), 0);
    assert_int_equal(g.n, NFILES);
    walk_reset(&w);
}

/* A folder big enough for its stats to be taken ahead by the helpers:
 * "big/f0000" .. "big/f0999", file k holding k % 97 bytes, and a
 * sub-folder "big/f0500/" among them. */
enum { BIG = 1000 };

typedef struct big_seen {
    int count[BIG];
    int last;       /* the index of the last file given */
    size_t n, pause_at;
    int remove_at;  /* after this index, remove the next 50 files (-1) */
} big_seen;

static void big_path(char *path, size_t size, int k)
{
    snprintf(path, size, "%s/big/f%04d", root, k);
}

static void big_make(void)
{
    char path[512];
    snprintf(path, sizeof path, "%s/big", root);
    mkdir(path, 0755);
    for (int k = 0; k < BIG; k++) {
        big_path(path, sizeof path, k);
        FILE *f = fopen(path, "w");
        assert_non_null(f);
        for (int b = 0; b < k % 97; b++)
            fputc('x', f);
        fclose(f);
    }
    snprintf(path, sizeof path, "%s/big/f0500.d", root);
    mkdir(path, 0755);
    snprintf(path, sizeof path, "%s/big/f0500.d/inner", root);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fclose(f);
}

static int big_note(void *ud, const char *key, const struct stat *st)
{
    big_seen *s = ud;
    int k;
    if (strcmp(key, "big/f0500.d/inner") == 0) {
        assert_int_equal(s->last, 500);
        assert_int_equal(st->st_size, 0);
        return 0;
    }
    assert_int_equal(sscanf(key, "big/f%d", &k), 1);
    assert_true(k >= 0 && k < BIG);
    assert_true(k > s->last);
    assert_int_equal(st->st_size, k % 97);
    assert_true(S_ISREG(st->st_mode));
    s->count[k]++;
    s->last = k;
    s->n++;
    if (k == s->remove_at)
        for (int r = k + 1; r <= k + 50 && r < BIG; r++) {
            char path[512];
            big_path(path, sizeof path, r);
            unlink(path);
        }
    return s->pause_at && s->n % s->pause_at == 0;
}

/* Stats taken ahead give each file once, in order, with its own size,
 * through pauses, a fresh start in the middle of the folder, and files
 * removed after the folder was read (skipped, as without helpers). */
static void test_big_folder_stats_ahead(void **state)
{
    (void)state;
    big_make();
    walker w = {0};
    big_seen s = {.last = -1, .pause_at = 37, .remove_at = -1};
    char after[sizeof w.last] = "";
    for (int round = 0; round < 100; round++) {
        size_t before = s.n;
        assert_int_equal(walk_run(&w, root, "big/", *after ? after : NULL,
                                  big_note, &s), 0);
        if (s.n == before)
            break;
        snprintf(after, sizeof after, "%s", w.last);
    }
    assert_int_equal(s.n, BIG);
    for (int k = 0; k < BIG; k++)
        assert_int_equal(s.count[k], 1);

    /* A fresh start in the middle: only the keys after it. */
    walk_reset(&w);
    big_seen t = {.last = 700};
    assert_int_equal(walk_run(&w, root, "big/", "big/f0700", big_note, &t),
                     0);
    assert_int_equal(t.n, BIG - 701);

    /* Files removed behind the helpers are skipped, not given stale. */
    walk_reset(&w);
    big_seen u = {.last = -1, .remove_at = 300};
    assert_int_equal(walk_run(&w, root, "big/", NULL, big_note, &u), 0);
    for (int k = 301; k <= 350; k++)
        assert_true(u.count[k] <= 1);
    assert_true(u.n >= BIG - 50);
    /* A stat the helpers took before the removal may still be given;
     * a walk started afterwards never gives a removed file. */
    walk_reset(&w);
    big_seen v = {.last = -1, .remove_at = -1};
    assert_int_equal(walk_run(&w, root, "big/", NULL, big_note, &v), 0);
    assert_int_equal(v.n, BIG - 50);
    for (int k = 301; k <= 350; k++)
        assert_int_equal(v.count[k], 0);
    walk_reset(&w);
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s/big'", root);
    assert_int_equal(system(cmd), 0);
}

/* names_first: what the callback answered for each name. */
typedef struct named {
    char names[32][64], whole[32][64];
    size_t nn, nw;
    int asked; /* the last name was answered WALK_STAT */
    int want_stat; /* answer WALK_STAT for odd positions, 0 for even */
} named;

static int name_note(void *ud, const char *key, const struct stat *st)
{
    named *g = ud;
    if (st) { /* the whole report follows its WALK_STAT at once */
        assert_true(g->asked);
        assert_string_equal(key, g->names[g->nn - 1]);
        assert_int_equal(st->st_size, (off_t)strlen(key));
        snprintf(g->whole[g->nw++], sizeof g->whole[0], "%s", key);
        g->asked = 0;
        return 0;
    }
    assert_false(g->asked); /* an asked-for file that went away: skipped */
    assert_true(g->nn < 32);
    snprintf(g->names[g->nn++], sizeof g->names[0], "%s", key);
    if (strcmp(key, "b/c/d0") == 0)
        return 1; /* pause after a name */
    if (strcmp(key, "a0") == 0) { /* goes away between name and stat */
        char path[512];
        snprintf(path, sizeof path, "%s/a0", root);
        unlink(path);
        return WALK_STAT;
    }
    g->asked = g->want_stat && g->nn % 2;
    return g->asked ? WALK_STAT : 0;
}

static int name_only(void *ud, const char *key, const struct stat *st)
{
    (void)key;
    assert_null(st);
    ++*(size_t *)ud;
    return 0;
}

/* Names from big/f0600 on are asked for whole (big_note checks them). */
static int big_from_600(void *ud, const char *key, const struct stat *st)
{
    if (st)
        return big_note(ud, key, st);
    int k;
    return sscanf(key, "big/f%d", &k) == 1 && k >= 600 &&
                   strchr(key, '.') == NULL
               ? WALK_STAT
               : 0;
}

/* By name first: every file is named once, in key order and before any
 * stat; only the ones asked for come again whole, right after their
 * name; a pause after a name resumes past it; a file removed between
 * its name and its stat is left out. */
static void test_names_first(void **state)
{
    (void)state;
    const char *want[NFILES];
    memcpy(want, files, sizeof want);
    qsort(want, NFILES, sizeof *want, cmp_str);
    walker w = {.names_first = 1};
    named g = {.want_stat = 1};
    assert_int_equal(walk_run(&w, root, "", NULL, name_note, &g), 0);
    assert_string_equal(w.last, "b/c/d0");
    assert_int_equal(walk_run(&w, root, "", "b/c/d0", name_note, &g), 0);
    assert_int_equal(g.nn, NFILES);
    size_t k = 0;
    for (size_t i = 0; i < NFILES; i++) {
        assert_string_equal(g.names[i], want[i]);
        if ((i + 1) % 2 && strcmp(want[i], "a0") != 0 &&
            strcmp(want[i], "b/c/d0") != 0)
            assert_string_equal(g.whole[k++], want[i]);
    }
    assert_int_equal(g.nw, k);
    put("a0");
    walk_reset(&w);

    /* A big folder whose names are all answered 0 starts no helpers:
     * nothing is stat'ed. */
    big_make();
    w = (walker){.names_first = 1};
    size_t names = 0;
    assert_int_equal(walk_run(&w, root, "big/", NULL, name_only, &names), 0);
    assert_int_equal(names, BIG + 1); /* and big/f0500.d/inner */
    assert_null(w.pool);
    walk_reset(&w);

    /* Asked for from f0600 on: the helpers start there, and each file
     * asked for comes whole with its own size. */
    w = (walker){.names_first = 1};
    big_seen b = {.last = -1, .remove_at = -1};
    assert_int_equal(walk_run(&w, root, "big/", NULL, big_from_600, &b), 0);
    assert_int_equal(b.n, BIG - 600);
    assert_non_null(w.pool);
    for (int k = 600; k < BIG; k++)
        assert_int_equal(b.count[k], 1);
    walk_reset(&w);
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s/big'", root);
    assert_int_equal(system(cmd), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_whole_tree_in_key_order),
        cmocka_unit_test(test_pause_resume_and_start_after),
        cmocka_unit_test(test_prefix),
        cmocka_unit_test(test_missing_root),
        cmocka_unit_test(test_big_folder_stats_ahead),
        cmocka_unit_test(test_names_first),
    };    return cmocka_run_group_tests(tests, setup, teardown);
}
