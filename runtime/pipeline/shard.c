/* A pipeline started with a shard count it has not run with before takes
 * over, once, what the other layout finished: the units of its share that
 * the state folders of the other count (or of the unsharded pipeline)
 * record as done are imported into its new ledger, so that changing N
 * copies nothing twice. Those folders must be idle and finished: no
 * process on them, no slice open or pending, no unit half read; otherwise
 * their records would be neither delivered nor safe to read again, and
 * the start is refused with what to run first. Each folder taken over
 * gets a file `taken_over` naming the new count, and a sync on it is
 * refused from then on: the old count, run again, would not know what
 * the new one copied.
 *
 * Owns: nothing past the call. Thread: the pipeline thread.
 */
#include "pipeline/engine.h"

#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

/* The layout a sibling state folder's name gives: 1 for NAME itself,
 * M for NAME.shard-I-of-M; 0 when it is not this pipeline's. */
static uint32_t layout_of(const char *entry, const char *name)
{
    size_t n = strlen(name);
    if (strncmp(entry, name, n) != 0)
        return 0;
    if (entry[n] == '\0')
        return 1;
    unsigned i, m;
    int used = 0;
    if (sscanf(entry + n, ".shard-%u-of-%u%n", &i, &m, &used) == 2 &&
        entry[n + (size_t)used] == '\0' && m >= 2 && i < m)
        return m;
    return 0;
}

/* Why st cannot be taken over yet, or NULL. */
static const char *unfinished(sk_state *st)
{
    if (st->nlive)
        return "has slices open or awaiting the sink";
    if (sk_ledger_runs(st->ledger) == 0 && sk_ledger_file_count(st->ledger))
        return "keeps its ledger in an earlier version's format (run it once "
               "with this version to convert it)";
    size_t it = 0;
    sk_unit_rec *u;
    while ((u = sk_ledger_recent_next(st->ledger, &it)))
        if (!(u->flags & SK_UNIT_DONE))
            return "has a unit partly read";
    return NULL;
}

typedef struct share {
    uint32_t index, count;
} share;

static int in_share(const sk_unit_rec *r, void *ud)
{
    const share *s = ud;
    return sk_shard_of(r->id, s->count) == s->index;
}

/* Open every sibling of another layout read-only into sts (up to cap). */
static int open_siblings(engine *e, const char *parent, sk_state **sts,
                         size_t cap, size_t *n)
{
    const sk_pipeline_cfg *cfg = e->cfg;
    uint32_t mine = cfg->shard_count > 1 ? cfg->shard_count : 1;
    DIR *d = opendir(parent);
    if (!d)
        return SKIPPR_OK;
    int rc = SKIPPR_OK;
    struct dirent *de;
    while (!rc && (de = readdir(d))) {
        uint32_t m = layout_of(de->d_name, cfg->name);
        if (m == 0 || m == mine)
            continue;
        if (*n == cap) {
            sk_error("more than %zu state folders of other shard counts "
                     "beside %s", cap, e->st->dir);
            rc = SKIPPR_INVAL;
            break;
        }
        char *dir = sk_asprintf("%s/%s", parent, de->d_name);
        if (!dir) {
            rc = SKIPPR_NOMEM;
            break;
        }
        sk_state *o = NULL;
        const char *why = sk_state_in_use(dir, NULL, 0) ? "is in use by a running skipprd"
                                      : NULL;
        if (!why) {
            if ((rc = sk_state_open(cfg->state_dir, cfg->workspace,
                                    de->d_name, 1, NULL, &o))) {
                sk_free(dir);
                break;
            }
            why = unfinished(o);
        }
        if (!why && !o->nlive && !sk_ledger_count(o->ledger)) {
            sk_state_close(o); /* never copied anything: nothing to take */
            sk_free(dir);
            continue;
        }
        if (!why) {
            sts[(*n)++] = o;
            sk_free(dir);
            continue;
        }
        sk_error("%s %s. Changing the shard count takes over what the old "
                 "count finished, so first run every old shard to the end "
                 "(skipprd sync --once with its old --shard), then start the "
                 "new count", dir, why);
        sk_free(dir);
        sk_state_close(o);
        rc = SKIPPR_INVAL;
    }
    closedir(d);
    return rc;
}

#define TAKEN_OVER "taken_over"
#define TOOK_OVER "took_over"

int pl_shard_check_retired(engine *e)
{
    char line[64] = "";
    char *path = sk_asprintf("%s/" TAKEN_OVER, e->st->dir);
    if (!path)
        return SKIPPR_NOMEM;
    FILE *f = fopen(path, "r");
    sk_free(path);
    if (!f)
        return SKIPPR_OK;
    if (!fgets(line, sizeof line, f))
        line[0] = '\0';
    fclose(f);
    line[strcspn(line, "\n")] = '\0';
    sk_error("%s was taken over by the pipeline run with %s; this shard "
             "count would copy again what that one did. Run with that "
             "count, or start afresh with a new state_dir and output",
             e->st->dir, line);
    return SKIPPR_INVAL;
}

/* Mark each folder of sts taken over by this layout. */
static void mark_taken_over(engine *e, sk_state **sts, size_t n)
{
    char what[64];
    if (e->cfg->shard_count > 1)
        snprintf(what, sizeof what, "--shards %u", e->cfg->shard_count);
    else
        snprintf(what, sizeof what, "no --shard");
    for (size_t i = 0; i < n; i++) {
        char *path = sk_asprintf("%s/" TAKEN_OVER, sts[i]->dir);
        FILE *f = path ? fopen(path, "w") : NULL;
        if (!f || fprintf(f, "%s\n", what) < 0 || fsync(fileno(f)) != 0)
            sk_warn("cannot mark %s: %s", path ? path : sts[i]->dir,
                    strerror(errno));
        if (f)
            fclose(f);
        sk_free(path);
    }
}

int pl_shard_inherit(engine *e)
{
    sk_state *st = e->st;
    /* Only a new state folder takes over, once; later runs have their
     * own ledger. */
    char *mark = sk_asprintf("%s/" TOOK_OVER, st->dir);
    if (!mark)
        return SKIPPR_NOMEM;
    if (sk_ledger_count(st->ledger) || access(mark, F_OK) == 0) {
        sk_free(mark);
        return SKIPPR_OK;
    }
    char *parent = sk_asprintf("%s/%s", e->cfg->state_dir,
                               e->cfg->workspace);
    enum { MAX_SIBLINGS = 1024 };
    sk_state **sts = sk_calloc(MAX_SIBLINGS, sizeof *sts);
    if (!sts || !parent) {
        sk_free(sts);
        sk_free(parent);
        sk_free(mark);
        return SKIPPR_NOMEM;
    }
    size_t n = 0;
    int rc = open_siblings(e, parent, sts, MAX_SIBLINGS, &n);
    sk_ledger **from = NULL;
    if (!rc && n && !(from = sk_calloc(n, sizeof *from)))
        rc = SKIPPR_NOMEM;
    if (!rc && n) {
        for (size_t i = 0; i < n; i++)
            from[i] = sts[i]->ledger;
        share s = {e->cfg->shard_count > 1 ? e->cfg->shard_index : 0,
                   e->cfg->shard_count > 1 ? e->cfg->shard_count : 1};
        uint64_t got = 0;
        rc = sk_ledger_import(st->ledger, from, n, in_share, &s, &got);
        if (!rc) {
            sk_info("took over %" PRIu64 " finished units of this share "
                    "from %zu state folders of another shard count", got,
                    n);
            mark_taken_over(e, sts, n);
            FILE *f = fopen(mark, "w");
            if (!f || fprintf(f, "%zu state folders\n", n) < 0 ||
                fsync(fileno(f)) != 0)
                sk_warn("cannot write %s: %s", mark, strerror(errno));
            if (f)
                fclose(f);
        }
    }
    for (size_t i = 0; i < n; i++)
        sk_state_close(sts[i]);
    sk_free(from);
    sk_free(sts);
    sk_free(parent);
    sk_free(mark);
    return rc;
}
