/* The verify mark's files: see mark.h. */
#include "verify/mark.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/buf.h"
#include "base/common.h"
#include "base/fsio.h"
#include "verify/digestfile.h"

#define MAGIC "SKVMRK01"
#define NHEAD 3 /* at, units, objects */
#define TREE_DEPTH 4               /* gen-N/sink.d/run: two levels */

struct sk_vmark {
    char *dir;
    int lock_fd;
    uint64_t gen;      /* the generation worked on */
    char *gen_dir;     /* dir/gen-<gen> */
    sk_ledger *seen[2];
    sk_vmark_totals prior;
    int committed;
};

/* rm -rf path (depth at most TREE_DEPTH); ENOENT is no error. */
static int remove_tree(const char *path, int depth)
{
    struct stat st;
    if (lstat(path, &st) != 0)
        return errno == ENOENT ? SKIPPR_OK : SKIPPR_IO;
    if (!S_ISDIR(st.st_mode))
        return unlink(path) == 0 || errno == ENOENT ? SKIPPR_OK : SKIPPR_IO;
    if (depth <= 0)
        return SKIPPR_INVAL;
    DIR *d = opendir(path);
    if (!d)
        return SKIPPR_IO;
    int rc = SKIPPR_OK;
    struct dirent *de;
    while (!rc && (de = readdir(d))) {
        if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
            continue;
        char *sub = sk_asprintf("%s/%s", path, de->d_name);
        rc = sub ? remove_tree(sub, depth - 1) : SKIPPR_NOMEM;
        sk_free(sub);
    }
    closedir(d);
    if (!rc && rmdir(path) != 0 && errno != ENOENT)
        rc = SKIPPR_IO;
    return rc;
}

/* to made a copy of folder from whose files are hard links to from's. */
static int link_tree(const char *from, const char *to, int depth)
{
    if (depth <= 0)
        return SKIPPR_INVAL;
    int rc = sk_io_mkdir_p(to, 0755);
    DIR *d = rc ? NULL : opendir(from);
    if (!rc && !d)
        rc = SKIPPR_IO;
    struct dirent *de;
    while (!rc && (de = readdir(d))) {
        if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
            continue;
        char *a = sk_asprintf("%s/%s", from, de->d_name);
        char *b = sk_asprintf("%s/%s", to, de->d_name);
        struct stat st;
        if (!a || !b)
            rc = SKIPPR_NOMEM;
        else if (lstat(a, &st) != 0)
            rc = SKIPPR_IO;
        else if (S_ISDIR(st.st_mode))
            rc = link_tree(a, b, depth - 1);
        else if (link(a, b) != 0)
            rc = SKIPPR_IO;
        if (rc == SKIPPR_IO)
            sk_error("verify mark: %s -> %s: %s", a, b, strerror(errno));
        sk_free(a);
        sk_free(b);
    }
    if (d)
        closedir(d);
    return rc ? rc : sk_io_fsync_dir(to);
}

/* The generation in dir/current; 0 when there is none. */
static int read_current(const char *dir, uint64_t *gen)
{
    char *path = sk_asprintf("%s/current", dir);
    FILE *f = path ? fopen(path, "r") : NULL;
    sk_free(path);
    *gen = 0;
    if (!f)
        return errno == ENOENT ? SKIPPR_OK : SKIPPR_IO;
    int ok = fscanf(f, "%" SCNu64, gen) == 1 && *gen > 0;
    fclose(f);
    if (!ok)
        sk_error("verify mark: %s/current does not name a generation", dir);
    return ok ? SKIPPR_OK : SKIPPR_CORRUPT;
}

/* Remove every generation of dir but keep's (0: all). */
static int prune(const char *dir, uint64_t keep)
{
    DIR *d = opendir(dir);
    if (!d)
        return SKIPPR_IO;
    int rc = SKIPPR_OK;
    struct dirent *de;
    while (!rc && (de = readdir(d))) {
        uint64_t g;
        char tail;
        if (sscanf(de->d_name, "gen-%" SCNu64 "%c", &g, &tail) != 1 ||
            g == keep)
            continue;
        char *sub = sk_asprintf("%s/%s", dir, de->d_name);
        rc = sub ? remove_tree(sub, TREE_DEPTH) : SKIPPR_NOMEM;
        sk_free(sub);
    }
    closedir(d);
    return rc;
}

/* Read path whole and decode it. */
static int load(const char *path, sk_partitions *src, sk_partitions *dst,
                sk_vmark_totals *t)
{
    skippr_buf b;
    int rc = sk_digestfile_read(path, &b);
    if (rc == SKIPPR_NOENT || rc == SKIPPR_IO) {
        sk_error("verify mark: %s cannot be read", path);
        skippr_buf_free(&b);
        return SKIPPR_CORRUPT;
    }
    uint64_t head[NHEAD];
    if (!rc)
        rc = sk_digestfile_decode(MAGIC, b.data, b.len, head, NHEAD, src,
                                  dst);
    if (!rc)
        *t = (sk_vmark_totals){.at = (int64_t)head[0], .units = head[1],
                               .objects = head[2]};
    if (rc == SKIPPR_CORRUPT)
        sk_error("verify mark: %s does not read back whole; remove the "
                 "mark's folder to verify everything afresh", path);
    skippr_buf_free(&b);
    return rc;
}

/* The lock on dir/lock, held until close. */
static int take_lock(sk_vmark *m)
{
    char *path = sk_asprintf("%s/lock", m->dir);
    int rc = path ? sk_io_open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644,
                               &m->lock_fd)
                  : SKIPPR_NOMEM;
    sk_free(path);
    if (!rc && flock(m->lock_fd, LOCK_EX | LOCK_NB) != 0) {
        sk_error("verify mark %s: another verify of this pipeline is "
                 "running", m->dir);
        rc = SKIPPR_LOCKED;
    }
    return rc;
}

/* The generation to work on, from the last one (cur, 0: none). */
static int new_generation(sk_vmark *m, uint64_t cur, sk_partitions *src,
                          sk_partitions *dst)
{
    m->gen = cur + 1;
    if (!(m->gen_dir = sk_asprintf("%s/gen-%" PRIu64, m->dir, m->gen)))
        return SKIPPR_NOMEM;
    int rc = SKIPPR_OK;
    if (cur) {
        char *old = sk_asprintf("%s/gen-%" PRIu64, m->dir, cur);
        char *parts = sk_asprintf("%s/partitions", old ? old : "");
        rc = !old || !parts ? SKIPPR_NOMEM
                            : load(parts, src, dst, &m->prior);
        if (!rc)
            rc = link_tree(old, m->gen_dir, TREE_DEPTH);
        sk_free(old);
        sk_free(parts);
    } else {
        rc = sk_io_mkdir_p(m->gen_dir, 0755);
    }
    static const char *const names[2] = {"source", "sink"};
    for (int s = 0; !rc && s < 2; s++) {
        char *path = sk_asprintf("%s/%s", m->gen_dir, names[s]);
        rc = path ? sk_ledger_open(path, 0, &m->seen[s]) : SKIPPR_NOMEM;
        sk_free(path);
    }
    return rc;
}

int sk_vmark_open(const char *dir, sk_partitions *src, sk_partitions *dst,
                  sk_vmark **out)
{
    *out = NULL;
    sk_vmark *m = sk_calloc(1, sizeof *m);
    if (!m)
        return SKIPPR_NOMEM;
    m->lock_fd = -1;
    uint64_t cur = 0;
    int rc = (m->dir = sk_strdup(dir)) ? sk_io_mkdir_p(dir, 0755)
                                       : SKIPPR_NOMEM;
    if (!rc)
        rc = take_lock(m);
    if (!rc)
        rc = read_current(dir, &cur);
    if (!rc)
        rc = prune(dir, cur);
    if (!rc)
        rc = new_generation(m, cur, src, dst);
    if (rc) {
        sk_vmark_close(m);
        return rc;
    }
    *out = m;
    return SKIPPR_OK;
}

sk_vmark_totals sk_vmark_prior(const sk_vmark *m)
{
    return m->prior;
}

sk_ledger *sk_vmark_ledger(sk_vmark *m, int side)
{
    return m->seen[side ? 1 : 0];
}

int sk_vmark_commit(sk_vmark *m, const sk_partitions *src,
                    const sk_partitions *dst, sk_vmark_totals t)
{
    int rc = SKIPPR_OK;
    for (int s = 0; !rc && s < 2; s++)
        rc = sk_ledger_compact(m->seen[s], 0);
    skippr_buf b = {0};
    char *parts = sk_asprintf("%s/partitions", m->gen_dir);
    char *cur = sk_asprintf("%s/current", m->dir);
    char num[24];
    int len = snprintf(num, sizeof num, "%" PRIu64 "\n", m->gen);
    if (!rc && (!parts || !cur))
        rc = SKIPPR_NOMEM;
    uint64_t head[NHEAD] = {(uint64_t)t.at, t.units, t.objects};
    if (!rc)
        rc = sk_digestfile_encode(MAGIC, head, NHEAD, src, dst, &b);
    if (!rc)
        rc = sk_io_replace_file(parts, b.data, b.len);
    if (!rc)
        rc = sk_io_fsync_dir(m->gen_dir);
    if (!rc)
        rc = sk_io_replace_file(cur, num, (size_t)len);
    if (!rc) {
        m->committed = 1;
        rc = prune(m->dir, m->gen); /* the generation before */
    }
    skippr_buf_free(&b);
    sk_free(parts);
    sk_free(cur);
    return rc;
}

void sk_vmark_close(sk_vmark *m)
{
    if (!m)
        return;
    for (int s = 0; s < 2; s++)
        sk_ledger_close(m->seen[s]);
    if (m->gen_dir && !m->committed)
        remove_tree(m->gen_dir, TREE_DEPTH);
    if (m->lock_fd >= 0)
        close(m->lock_fd); /* releases the flock */
    sk_free(m->gen_dir);
    sk_free(m->dir);
    sk_free(m);
}
