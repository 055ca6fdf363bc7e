#include "state/ledger.h"
#include "state/unitrec_impl.h"

#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/common.h"
#include "base/fault.h"
#include "base/fsio.h"
#include "state/ledger_legacy.h"
#include "state/ledger_merge.h"
#include "state/ledger_run.h"
#include "state/remote.h"


typedef struct run {
    char *path;
    sk_run_meta m;
    sk_run_cursor c;
} run;

struct sk_ledger {
    char *dir; /* the runs' folder */
    uint64_t next_slice_id;
    uint64_t next_seq;
    run *runs; /* newest (highest last seq) first */
    size_t nruns, cap;
    sk_map recent;
    ZSTD_DCtx *dctx;
    uint64_t legacy_count; /* read-only open of an unconverted ledger */
    sk_remote *remote; /* runs are stored there too; not owned */
    char **dropped; /* paths of runs a merge replaced, removed at open */
    size_t ndropped, dropped_cap;
};

static void rec_free(sk_unit_rec *r)
{
    if (!r)
        return;
    sk_free(r->id);
    sk_free(r->version);
}

static void run_free(run *r)
{
    sk_run_cursor_free(&r->c);
    sk_run_meta_free(&r->m);
    sk_free(r->path);
}

static int by_newest(const void *a, const void *b)
{
    const run *x = a, *y = b;
    return x->m.hi < y->m.hi ? 1 : x->m.hi > y->m.hi ? -1 : 0;
}

/* Add the run at path (its footer read) to the list. Takes path. */
static int add_run(sk_ledger *l, char *path)
{
    if (skippr_array_grow(&l->runs, l->nruns, &l->cap, sizeof *l->runs, 16)) {
        sk_free(path);
        return SKIPPR_NOMEM;
    }
    run *r = &l->runs[l->nruns];
    memset(r, 0, sizeof *r);
    r->path = path;
    int rc = sk_run_read_meta(path, &r->m);
    if (rc) {
        sk_free(path);
        return rc;
    }
    l->nruns++;
    if (r->m.hi >= l->next_seq)
        l->next_seq = r->m.hi + 1;
    l->next_slice_id = SK_MAX(l->next_slice_id, r->m.next_slice_id);
    return SKIPPR_OK;
}

static char *run_path(const sk_ledger *l, uint64_t lo, uint64_t hi)
{
    size_t n = strlen(l->dir) + 48;
    char *p = sk_malloc(n);
    if (p)
        snprintf(p, n, "%s/%016" PRIx64 "-%016" PRIx64 ".run", l->dir, lo,
                 hi);
    return p;
}

/* Store the run file at path in the remote (its key "ledger.d/NAME"),
 * or, removed, remove the stored copy. */
static int mirror_run(sk_ledger *l, const char *path, int removed)
{
    if (!l->remote)
        return SKIPPR_OK;
    const char *name = strrchr(path, '/');
    char *rel = sk_asprintf("ledger.d/%s", name ? name + 1 : path);
    int rc = !rel       ? SKIPPR_NOMEM
             : removed ? sk_remote_delete(l->remote, rel)
                       : sk_remote_put_file(l->remote, rel, path);
    sk_free(rel);
    return rc;
}

int sk_ledger_set_remote(sk_ledger *l, sk_remote *r, int store_existing)
{
    l->remote = r;
    int rc = SKIPPR_OK;
    /* Runs a merge replaced go from the store as they went from here. */
    for (size_t i = 0; i < l->ndropped && !rc; i++)
        rc = mirror_run(l, l->dropped[i], 1);
    for (size_t i = 0; store_existing && i < l->nruns && !rc; i++)
        rc = mirror_run(l, l->runs[i].path, 0);
    return rc;
}

/* Read every run in the folder; remove temp files and runs a merge has
 * replaced (a crash between the merge's rename and its unlinks). */
static int load_runs(sk_ledger *l, int readonly)
{
    DIR *d = opendir(l->dir);
    if (!d) {
        if (errno == ENOENT)
            return SKIPPR_OK;
        sk_error("open %s: %s", l->dir, strerror(errno));
        return SKIPPR_IO;
    }
    int rc = SKIPPR_OK;
    struct dirent *e;
    while (!rc && (e = readdir(d))) {
        size_t n = strlen(e->d_name);
        char *p = sk_malloc(strlen(l->dir) + n + 2);
        if (!p) {
            rc = SKIPPR_NOMEM;
            break;
        }
        sprintf(p, "%s/%s", l->dir, e->d_name);
        if (n > 4 && strcmp(e->d_name + n - 4, ".tmp") == 0 && !readonly) {
            unlink(p); /* a run or merge cut short */
            sk_free(p);
        } else if (n > 4 && strcmp(e->d_name + n - 4, ".run") == 0) {
            rc = add_run(l, p);
        } else {
            sk_free(p);
        }
    }
    closedir(d);
    if (rc)
        return rc;
    /* A merge's input has a lower level than the merge, whose seq range
     * holds the input's; a run of the same level or above is another
     * merge's, and stays. */
    size_t k = 0;
    for (size_t i = 0; i < l->nruns; i++) {
        int replaced = 0;
        for (size_t j = 0; j < l->nruns && !replaced; j++)
            replaced = j != i && l->runs[j].m.level > l->runs[i].m.level &&
                       l->runs[j].m.lo <= l->runs[i].m.lo &&
                       l->runs[i].m.hi <= l->runs[j].m.hi;
        if (replaced) {
            if (!readonly) {
                unlink(l->runs[i].path);
                /* kept by name, for the store (sk_ledger_set_remote) */
                if (skippr_array_grow(&l->dropped, l->ndropped, &l->dropped_cap,
                                      sizeof *l->dropped, 4) == 0) {
                    l->dropped[l->ndropped++] = l->runs[i].path;
                    l->runs[i].path = NULL;
                } else {
                    rc = SKIPPR_NOMEM;
                }
            }
            run_free(&l->runs[i]);
        } else {
            l->runs[k++] = l->runs[i];
        }
    }
    l->nruns = k;
    if (l->nruns > 1)
        qsort(l->runs, l->nruns, sizeof *l->runs, by_newest);
    return rc;
}

/* ---- the ledger of earlier versions: one file, converted once ---------- */

/* A ledger file from before runs: convert it into the first run and
 * remove it. If runs exist already, a conversion finished and only the
 * removal was lost. Read-only, only its count is read. */
static int legacy_convert(sk_ledger *l, const char *path, int readonly)
{
    FILE *f;
    uint64_t next_slice, count;
    int rc = sk_legacy_open(path, &f, &next_slice, &count);
    if (rc)
        return rc == SKIPPR_NOENT ? SKIPPR_OK : rc;
    if (readonly || l->nruns) {
        fclose(f);
        if (readonly && !l->nruns) {
            l->legacy_count = count;
            l->next_slice_id = SK_MAX(l->next_slice_id, next_slice);
            return SKIPPR_OK;
        }
        return readonly ? SKIPPR_OK : sk_io_unlink(path);
    }
    char *rp = run_path(l, 0, 0);
    sk_run_writer w;
    rc = rp ? sk_run_writer_open(&w, rp, 0, 0, sk_ledger_level_for(count),
                                 next_slice)
            : SKIPPR_NOMEM;
    if (!rc)
        rc = sk_legacy_copy(f, path, count, &w);
    if (!rc)
        rc = sk_run_writer_finish(&w);
    if (rp)
        sk_run_writer_close(&w);
    fclose(f);
    if (!rc) {
        rc = add_run(l, rp);
        rp = NULL;
    }
    sk_free(rp);
    if (!rc) {
        sk_info("ledger %s converted to sorted runs (%" PRIu64 " units)",
                path, count);
        rc = sk_io_unlink(path);
    }
    return rc;
}

/* ---- open, close, counts ----------------------------------------------- */

int sk_ledger_open(const char *path, int readonly, sk_ledger **out)
{
    int rc = SKIPPR_NOMEM;
    sk_ledger *l = sk_calloc(1, sizeof *l);
    if (!l)
        goto out;
    sk_map_init(&l->recent);
    l->next_slice_id = 1;
    size_t n = strlen(path) + 3;
    if (!(l->dir = sk_malloc(n)) || !(l->dctx = ZSTD_createDCtx()))
        goto out;
    snprintf(l->dir, n, "%s.d", path);
    if (!readonly && (rc = sk_io_mkdir_p(l->dir, 0755)))
        goto out;
    if ((rc = load_runs(l, readonly)) ||
        (rc = legacy_convert(l, path, readonly)))
        goto out;
    if (l->nruns > 1)
        qsort(l->runs, l->nruns, sizeof *l->runs, by_newest);
    *out = l;
    l = NULL; /* handed to the caller */
out:
    if (l)
        sk_ledger_close(l);
    return rc;
}

void sk_ledger_close(sk_ledger *l)
{
    if (!l)
        return;
    for (size_t i = 0; i < l->nruns; i++)
        run_free(&l->runs[i]);
    sk_free(l->runs);
    for (size_t i = 0; i < l->ndropped; i++)
        sk_free(l->dropped[i]);
    sk_free(l->dropped);
    size_t it = 0;
    sk_unit_rec *r;
    while ((r = sk_map_next(&l->recent, &it))) {
        rec_free(r);
        sk_free(r);
    }
    sk_map_free(&l->recent);
    ZSTD_freeDCtx(l->dctx);
    sk_free(l->dir);
    sk_free(l);
}

uint64_t sk_ledger_next_slice_id(const sk_ledger *l) { return l->next_slice_id; }

uint64_t sk_ledger_file_count(const sk_ledger *l)
{
    uint64_t n = l->legacy_count;
    for (size_t i = 0; i < l->nruns; i++)
        n += l->runs[i].m.count;
    return n;
}

uint64_t sk_ledger_file_done(const sk_ledger *l)
{
    uint64_t n = l->legacy_count;
    for (size_t i = 0; i < l->nruns; i++)
        n += l->runs[i].m.done;
    return n;
}

uint64_t sk_ledger_count(const sk_ledger *l)
{
    return sk_ledger_file_count(l) + l->recent.live;
}

uint64_t sk_ledger_recent_count(const sk_ledger *l) { return l->recent.live; }

size_t sk_ledger_runs(const sk_ledger *l) { return l->nruns; }

/* ---- lookups ------------------------------------------------------------ */

/* Move r's cursor to the first record >= id; 1 if it is id. */
static int run_seek(sk_ledger *l, run *r, const char *id, int *rc)
{
    sk_run_cursor *c = &r->c;
    if (!c->f || (c->valid && strcmp(c->rec.id, id) > 0) ||
        (!c->valid && c->ended)) {
        /* Start afresh at the block that may hold id (the run's index). */
        if ((*rc = sk_run_cursor_seek(c, r->path, &r->m, l->dctx, id)) ||
            (*rc = sk_run_cursor_step(c)))
            return 0;
    } else if (!c->valid && (*rc = sk_run_cursor_step(c))) {
        return 0;
    }
    while (c->valid && strcmp(c->rec.id, id) < 0)
        if ((*rc = sk_run_cursor_step(c)))
            return 0;
    return c->valid && strcmp(c->rec.id, id) == 0;
}

int sk_ledger_lookup(sk_ledger *l, const char *id, const sk_unit_rec **out)
{
    size_t n = strlen(id);
    *out = sk_map_get(&l->recent, id, n, sk_hash_fast(id, n));
    if (*out)
        return SKIPPR_OK;
    for (size_t i = 0; i < l->nruns; i++) {
        run *r = &l->runs[i];
        if (r->m.count == 0 || strcmp(id, r->m.first) < 0 ||
            strcmp(id, r->m.last) > 0)
            continue; /* no I/O for an id outside the run */
        int rc = SKIPPR_OK;
        if (run_seek(l, r, id, &rc)) {
            *out = &r->c.rec;
            return SKIPPR_OK;
        }
        if (rc)
            return rc;
    }
    return SKIPPR_OK;
}

sk_unit_rec *sk_ledger_touch(sk_ledger *l, const char *id,
                             const char *version, int64_t size)
{
    size_t n = strlen(id);
    uint64_t h = sk_hash_fast(id, n);
    sk_unit_rec *r = sk_map_get(&l->recent, id, n, h);
    if (r)
        return r;
    if (n == 0 || n > SK_RUN_ID_MAX || strlen(version) > SK_RUN_ID_MAX)
        return NULL;
    r = sk_calloc(1, sizeof *r);
    if (!r)
        return NULL;
    r->id = sk_strdup(id);
    r->version = sk_strdup(version);
    r->size = size;
    if (!r->id || !r->version || sk_map_put(&l->recent, r->id, n, h, r)) {
        rec_free(r);
        sk_free(r);
        return NULL;
    }
    return r;
}

sk_unit_rec *sk_ledger_recent_next(sk_ledger *l, size_t *it)
{
    return sk_map_next(&l->recent, it);
}

/* ---- flushes and merges ------------------------------------------------- */

static int cmp_rec(const void *a, const void *b)
{
    const sk_unit_rec *x = *(sk_unit_rec *const *)a;
    const sk_unit_rec *y = *(sk_unit_rec *const *)b;
    return strcmp(x->id, y->id);
}


/* Merge the runs at indexes idx[0..k) (any order) into one run at level,
 * the newest record of each id kept; then remove them. */
static int merge(sk_ledger *l, const size_t *idx, size_t k, uint32_t level)
{
    sk_crashpoint("ledger_merge");
    uint64_t lo = UINT64_MAX, hi = 0, next_slice = l->next_slice_id;
    for (size_t i = 0; i < k; i++) {
        run *r = &l->runs[idx[i]];
        lo = SK_MIN(lo, r->m.lo);
        hi = SK_MAX(hi, r->m.hi);
        sk_run_cursor_close(&r->c);
    }
    char *path = run_path(l, lo, hi);
    sk_merge_in *in = sk_calloc(k, sizeof *in);
    sk_run_writer w;
    int rc = path && in ? sk_run_writer_open(&w, path, lo, hi, level,
                                             next_slice)
                        : SKIPPR_NOMEM;
    int opened = path && in;
    for (size_t i = 0; i < k && !rc; i++)
        rc = sk_merge_open(&in[i], l->runs[idx[i]].path,
                           l->runs[idx[i]].m.hi, 0, l->dctx);
    uint64_t written;
    if (!rc)
        rc = sk_merge_into(in, k, &w, NULL, NULL, &written);
    if (!rc)
        rc = sk_run_writer_finish(&w);
    if (opened)
        sk_run_writer_close(&w);
    for (size_t i = 0; in && i < k; i++)
        sk_run_cursor_free(&in[i].c);
    sk_free(in);
    if (!rc)
        rc = mirror_run(l, path, 0);
    if (rc) {
        sk_free(path);
        return rc;
    }
    /* The merged run is durable: its inputs go (a crash before the last
     * unlink leaves runs that the next open sees are replaced). */
    for (size_t i = 0; i < k; i++)
        if (unlink(l->runs[idx[i]].path) != 0 && errno != ENOENT)
            sk_warn("remove %s: %s", l->runs[idx[i]].path, strerror(errno));
    sk_io_fsync_dir(l->dir);
    for (size_t i = 0; i < k && !rc; i++)
        rc = mirror_run(l, l->runs[idx[i]].path, 1);
    if (rc) {
        sk_free(path);
        return rc;
    }
    uint8_t *gone = sk_calloc(l->nruns, 1);
    if (!gone) {
        sk_free(path);
        return SKIPPR_NOMEM;
    }
    for (size_t i = 0; i < k; i++)
        gone[idx[i]] = 1;
    size_t m = 0;
    for (size_t i = 0; i < l->nruns; i++) {
        if (gone[i])
            run_free(&l->runs[i]);
        else
            l->runs[m++] = l->runs[i];
    }
    l->nruns = m;
    sk_free(gone);
    if ((rc = add_run(l, path)))
        return rc;
    qsort(l->runs, l->nruns, sizeof *l->runs, by_newest);
    return SKIPPR_OK;
}

/* While a level holds SK_LEDGER_FANOUT runs, merge them into one of the next.
 * Every run of the level goes into the merge, however many there are (a
 * crash between a flush and its merge leaves one more): the merged run's
 * seq range then holds no other run's, which would otherwise be taken
 * for one of its inputs and removed when the ledger is next opened. */
static int merge_levels(sk_ledger *l)
{
    for (uint32_t level = 0; level < 64; level++) {
        size_t k = 0;
        for (size_t i = 0; i < l->nruns; i++)
            k += l->runs[i].m.level == level;
        if (k < SK_LEDGER_FANOUT)
            continue;
        size_t *idx = sk_calloc(k, sizeof *idx);
        if (!idx)
            return SKIPPR_NOMEM;
        k = 0;
        for (size_t i = 0; i < l->nruns; i++)
            if (l->runs[i].m.level == level)
                idx[k++] = i;
        int rc = merge(l, idx, k, level + 1);
        sk_free(idx);
        if (rc)
            return rc;
    }
    return SKIPPR_OK;
}

/* An import keeps finished units that the caller's filter wants. */
typedef struct import_filter {
    int (*keep)(const sk_unit_rec *r, void *ud);
    void *ud;
} import_filter;

static int keep_done(const sk_unit_rec *r, void *ud)
{
    const import_filter *f = ud;
    return (r->flags & SK_UNIT_DONE) && f->keep(r, f->ud);
}

int sk_ledger_import(sk_ledger *l, sk_ledger *const *from, size_t nfrom,
                     int (*keep)(const sk_unit_rec *r, void *ud), void *ud,
                     uint64_t *imported)
{
    *imported = 0;
    size_t k = 0;
    for (size_t s = 0; s < nfrom; s++)
        k += from[s]->nruns;
    if (k == 0)
        return SKIPPR_OK;
    sk_merge_in *in = sk_calloc(k, sizeof *in);
    uint64_t seq = l->next_seq;
    char *path = run_path(l, seq, seq);
    sk_run_writer w;
    int rc = in && path ? sk_run_writer_open(&w, path, seq, seq, 0,
                                             l->next_slice_id)
                        : SKIPPR_NOMEM;
    int opened = in && path;
    size_t j = 0;
    for (size_t s = 0; s < nfrom && !rc; s++)
        for (size_t i = 0; i < from[s]->nruns && !rc; i++)
            rc = sk_merge_open(&in[j++], from[s]->runs[i].path,
                               from[s]->runs[i].m.hi, s, l->dctx);
    import_filter f = {keep, ud};
    if (!rc)
        rc = sk_merge_into(in, k, &w, keep_done, &f, imported);
    if (!rc && *imported) {
        w.meta.level = sk_ledger_level_for(*imported);
        if (!(rc = sk_run_writer_finish(&w))) {
            sk_run_writer_close(&w);
            opened = 0;
            if (!(rc = mirror_run(l, path, 0))) {
                rc = add_run(l, path); /* takes path */
                path = NULL;
            }
            if (!rc && l->nruns > 1)
                qsort(l->runs, l->nruns, sizeof *l->runs, by_newest);
        }
    }
    if (opened) /* nothing kept, or a failure: no run */
        sk_run_writer_close(&w);
    for (size_t i = 0; in && i < k; i++)
        sk_run_cursor_free(&in[i].c);
    sk_free(in);
    sk_free(path);
    return rc;
}

int sk_ledger_compact(sk_ledger *l, uint64_t next_slice_id)
{
    size_t nrecent = l->recent.live, k = 0;
    if (nrecent == 0 && next_slice_id <= l->next_slice_id)
        return SKIPPR_OK; /* nothing new to hold */
    int rc = SKIPPR_NOMEM;
    sk_unit_rec **sorted = sk_calloc(nrecent ? nrecent : 1, sizeof *sorted);
    uint64_t seq = l->next_seq;
    char *path = run_path(l, seq, seq);
    if (!sorted || !path)
        goto out;
    size_t it = 0;
    sk_unit_rec *r;
    while ((r = sk_map_next(&l->recent, &it)))
        sorted[k++] = r;
    if (k > 1)
        qsort(sorted, k, sizeof *sorted, cmp_rec);
    sk_run_writer w;
    rc = sk_run_writer_open(&w, path, seq, seq, 0, next_slice_id);
    for (size_t i = 0; i < k && !rc; i++)
        rc = sk_run_writer_add(&w, sorted[i]);
    if (!rc)
        rc = sk_run_writer_finish(&w);
    sk_run_writer_close(&w);
    if (!rc)
        rc = mirror_run(l, path, 0);
    if (rc)
        goto out;
    rc = add_run(l, path); /* takes path */
    path = NULL;
    if (rc)
        goto out;
    qsort(l->runs, l->nruns, sizeof *l->runs, by_newest);
    /* Finished units now live in the run only. */
    for (size_t j = 0; j < k; j++) {
        r = sorted[j];
        if (r->flags & SK_UNIT_DONE) {
            size_t n = strlen(r->id);
            sk_map_del(&l->recent, r->id, n, sk_hash_fast(r->id, n));
            rec_free(r);
            sk_free(r);
        }
    }
    rc = merge_levels(l);
out:
    sk_free(path);
    sk_free(sorted);
    return rc;
}
