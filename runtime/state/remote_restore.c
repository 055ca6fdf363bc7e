/* State off the box: what the store holds (its listing, whether a state
 * is there), the restore of the state folder onto an empty disk from the
 * stored files and WAL objects, and the first store of a folder that was
 * never stored. See remote.h. */
#include "state/remote.h"

#include <dirent.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/common.h"
#include "base/crc32c.h"
#include "base/fsio.h"
#include "state/remote_impl.h"
#include "state/walname.h"

typedef struct listing {
    char **keys; /* relative to the state's prefix, in strcmp order */
    size_t n, cap;
    size_t skip; /* the state's prefix */
    int rc;
} listing;

static int list_one(void *ud, const skippr_unit *u)
{
    listing *ls = ud;
    if (strlen(u->id) < ls->skip)
        return 0;
    if (skippr_array_grow(&ls->keys, ls->n, &ls->cap, sizeof *ls->keys, 64) ||
        !(ls->keys[ls->n] = sk_strdup(u->id + ls->skip))) {
        ls->rc = SKIPPR_NOMEM;
        return 1;
    }
    ls->n++;
    return 0;
}

static void listing_free(listing *ls)
{
    for (size_t i = 0; i < ls->n; i++)
        sk_free(ls->keys[i]);
    sk_free(ls->keys);
}

static int list_all(sk_remote *r, listing *ls)
{
    memset(ls, 0, sizeof *ls);
    ls->skip = strlen(r->prefix);
    pthread_mutex_lock(&r->mu);
    int rc = r->ops->store_list(r->ctx, r->prefix, list_one, ls);
    pthread_mutex_unlock(&r->mu);
    return rc ? rc : ls->rc;
}

int sk_remote_list(sk_remote *r, const char *prefix, skippr_unit_cb cb,
                   void *ud)
{
    pthread_mutex_lock(&r->mu);
    int rc = r->ops->store_list(r->ctx, prefix, cb, ud);
    pthread_mutex_unlock(&r->mu);
    return rc;
}

int sk_remote_has_state(sk_remote *r)
{
    char buf[64];
    size_t got;
    uint64_t size;
    int rc = rm_get(r, "state_id", 0, buf, sizeof buf, &got, &size, NULL, 0);
    return rc == SKIPPR_NOENT ? 0 : rc ? rc : 1;
}

/* Copy key rel into the file path (through path.tmp). */
static int download(sk_remote *r, const char *rel, const char *path,
                    uint8_t *buf)
{
    char *tmp = sk_asprintf("%s.tmp", path);
    int fd = -1;
    int rc = tmp ? sk_io_open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC,
                              0644, &fd)
                 : SKIPPR_NOMEM;
    uint64_t off = 0, size = 1;
    while (!rc && off < size) {
        size_t got;
        rc = rm_get(r, rel, off, buf, WAL_CHUNK, &got, &size, NULL, 0);
        if (!rc && got == 0 && off < size)
            rc = SKIPPR_CORRUPT;
        if (!rc)
            rc = sk_io_write_all(fd, buf, got, tmp);
        off += got;
    }
    if (fd >= 0)
        close(fd);
    if (!rc)
        rc = sk_io_rename(tmp, path);
    sk_free(tmp);
    return rc;
}

/* Remove the state files of dir that the store's copy replaces. */
static int wipe(const char *dir)
{
    static const char *const folders[] = {"wal", "ledger.d"};
    static const char *const files[] = {"ledger", "listing_mark", "state_id",
                                        "taken_over", "took_over",
                                        "definition"};
    int rc = SKIPPR_OK;
    for (size_t i = 0; i < 2 && !rc; i++) {
        char *d = sk_asprintf("%s/%s", dir, folders[i]);
        DIR *dh = d ? opendir(d) : NULL;
        if (!d)
            rc = SKIPPR_NOMEM;
        struct dirent *e;
        while (dh && !rc && (e = readdir(dh))) {
            if (e->d_name[0] == '.')
                continue;
            char *p = sk_asprintf("%s/%s", d, e->d_name);
            rc = p ? sk_io_unlink(p) : SKIPPR_NOMEM;
            sk_free(p);
        }
        if (dh)
            closedir(dh);
        sk_free(d);
    }
    for (size_t i = 0; i < sizeof files / sizeof *files && !rc; i++) {
        char *p = sk_asprintf("%s/%s", dir, files[i]);
        rc = p ? sk_io_unlink(p) : SKIPPR_NOMEM;
        sk_free(p);
    }
    return rc;
}

/* Write p[0..n) at offset off of segment seg in the WAL folder waldir. */
static int restore_bytes(const char *waldir, uint64_t seg, uint64_t off,
                         const void *p, size_t n)
{
    char path[PATH_MAX];
    sk_wal_segment_path(waldir, seg, path, sizeof path);
    int fd = -1;
    int rc = sk_io_open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0644, &fd);
    if (!rc)
        rc = sk_io_pwrite_all(fd, p, n, (off_t)off, path);
    if (fd >= 0)
        close(fd);
    return rc;
}

/* The segment a restore is rebuilding from its wal/{n} objects. */
typedef struct seg_track {
    uint64_t seg;
    uint64_t at;    /* where its next object must start */
    uint64_t reach; /* how far the objects before the current copy went */
    size_t first;   /* its entries in r->deltas start here */
    size_t copy;    /* and those of its latest copy from offset 0 here */
    int drop;       /* its first bytes are gone: it was being dropped */
} seg_track;

int sk_remote_wal_rebased(sk_remote *r, uint64_t seg, uint64_t first)
{
    size_t i = r->ndeltas;
    while (i > 0 && r->deltas[i - 1].seg == seg)
        i--;
    size_t j = i;
    while (j < r->ndeltas && r->deltas[j].n < first)
        j++;
    /* Newest first: a removal cut short leaves objects that start at
     * offset 0, which a restore reads as the older copy. */
    return rm_forget(r, i, j, 1);
}

uint64_t sk_remote_wal_next(const sk_remote *r) { return r->next_n; }

/* One wal/{n} object into the segment files of waldir (t: the segment
 * being rebuilt). A segment whose first bytes are gone was being dropped:
 * its objects are removed. An object at offset 0 of the segment being
 * rebuilt starts a copy of it (sk_wal rebases a segment of many objects):
 * the bytes are the same, and once the copy reaches as far as the objects
 * before it, those are removed. */
static int restore_delta(sk_remote *r, const char *rel, const char *waldir,
                         uint8_t *buf, seg_track *t)
{
    size_t got;
    uint64_t size;
    int rc = rm_get(r, rel, 0, buf, WAL_CHUNK + DELTA_HEADER, &got, &size,
                    NULL, 0);
    if (rc)
        return rc;
    uint32_t n = got >= DELTA_HEADER ? sk_get_u32(buf + 20) : 0;
    if (got < DELTA_HEADER || sk_get_u32(buf) != DELTA_MAGIC ||
        got != DELTA_HEADER + (size_t)n ||
        sk_crc32c(sk_crc32c(0, buf, 24), buf + DELTA_HEADER, n) !=
            sk_get_u32(buf + 24)) {
        sk_error("state %s%s: damaged (header or checksum)", r->where, rel);
        return SKIPPR_CORRUPT;
    }
    uint64_t seg = sk_get_u64(buf + 4), off = sk_get_u64(buf + 12);
    if (seg != t->seg)
        *t = (seg_track){seg, 0, 0, r->ndeltas, r->ndeltas, off != 0};
    if (t->drop)
        return sk_remote_delete(r, rel);
    if (off == 0 && t->at > 0) {
        t->reach = SK_MAX(t->reach, t->at);
        t->copy = r->ndeltas;
        t->at = 0;
    }
    if (off != t->at) {
        sk_error("state %s%s: WAL segment %" PRIu64 " has a gap at offset "
                 "%" PRIu64, r->where, rel, seg, t->at);
        return SKIPPR_CORRUPT;
    }
    if ((rc = restore_bytes(waldir, seg, off, buf + DELTA_HEADER, n)))
        return rc;
    t->at += n;
    if (skippr_array_grow(&r->deltas, r->ndeltas, &r->cap, sizeof *r->deltas,
                          64))
        return SKIPPR_NOMEM;
    r->deltas[r->ndeltas++] = (delta){strtoull(rel + 4, NULL, 16), seg};
    if (t->copy > t->first && t->at >= t->reach) {
        size_t older = t->copy - t->first;
        rc = rm_forget(r, t->first, t->copy, 1);
        t->copy -= older;
    }
    return rc;
}

int sk_remote_restore(sk_remote *r, const char *dir)
{
    listing ls;
    int rc = list_all(r, &ls);
    uint8_t *buf = sk_malloc(WAL_CHUNK + DELTA_HEADER);
    char *waldir = sk_asprintf("%s/wal", dir);
    char *runs = sk_asprintf("%s/ledger.d", dir);
    if (!rc && (!buf || !waldir || !runs))
        rc = SKIPPR_NOMEM;
    if (!rc && !(rc = sk_io_mkdir_p(dir, 0755)) && !(rc = wipe(dir)) &&
        !(rc = sk_io_mkdir_p(waldir, 0755)))
        rc = sk_io_mkdir_p(runs, 0755);
    seg_track t = {UINT64_MAX, 0, 0, 0, 0, 0};
    uint64_t bytes = 0;
    size_t nwal = 0;
    for (size_t i = 0; i < ls.n && !rc; i++) {
        const char *k = ls.keys[i];
        if (strncmp(k, "wal/", 4) == 0) {
            uint64_t n = strtoull(k + 4, NULL, 16);
            r->next_n = SK_MAX(r->next_n, n + 1);
            rc = restore_delta(r, k, waldir, buf, &t);
            nwal++;
        } else if (strcmp(k, "state_id") == 0 ||
                   strcmp(k, "definition") == 0 ||
                   strcmp(k, "listing_mark") == 0 ||
                   strcmp(k, "taken_over") == 0 ||
                   strcmp(k, "took_over") == 0 ||
                   (strncmp(k, "ledger.d/", 9) == 0 && !strchr(k + 9, '/'))) {
            char *path = sk_asprintf("%s/%s", dir, k);
            rc = path ? download(r, k, path, buf) : SKIPPR_NOMEM;
            sk_free(path);
            bytes++;
        }
    }
    if (!rc)
        sk_info("state %s: restored (%zu WAL objects, %" PRIu64 " files)",
                r->where, nwal, bytes);
    listing_free(&ls);
    sk_free(buf);
    sk_free(waldir);
    sk_free(runs);
    return rc;
}

int sk_remote_seed_begin(sk_remote *r)
{
    listing ls;
    int rc = list_all(r, &ls);
    for (size_t i = 0; i < ls.n && !rc; i++)
        if (strcmp(ls.keys[i], "lease") != 0)
            rc = sk_remote_delete(r, ls.keys[i]);
    listing_free(&ls);
    r->next_n = 0;
    r->ndeltas = 0;
    return rc;
}

int sk_remote_seed_done(sk_remote *r, const char *dir)
{
    char *path = sk_asprintf("%s/state_id", dir);
    int rc = path ? sk_remote_put_file(r, "state_id", path) : SKIPPR_NOMEM;
    sk_free(path);
    if (!rc)
        sk_info("state %s: stored for the first time", r->where);
    return rc;
}
