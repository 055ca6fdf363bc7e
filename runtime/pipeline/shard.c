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
#include "pipeline/shard.h"

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
    if (sk_state_nlive(st))
        return "has slices open or awaiting the sink";
    const sk_ledger *l = sk_state_ledger(st);
    if (sk_ledger_runs(l) == 0 && sk_ledger_file_count(l))
        return "keeps its ledger in an earlier version's format (run it once "
               "with this version to convert it)";
    size_t it = 0;
    sk_unit_rec *u;
    while ((u = sk_ledger_recent_next(sk_state_ledger(st), &it)))
        if (!(sk_unit_flags(u) & SK_UNIT_DONE))
            return "has a unit partly read";
    return NULL;
}

typedef struct share {
    uint32_t index, count;
} share;

static int in_share(const sk_unit_rec *r, void *ud)
{
    const share *s = ud;
    return sk_shard_of(sk_unit_id(r), s->count) == s->index;
}

/* The state folders of other layouts being taken over: each open
 * read-only, and with the state in a bucket its lease held (and the
 * instance the lease uses) until the takeover is marked. */
typedef struct siblings {
    sk_state **sts;
    sk_remote **rfs;
    sk_instance **insts;
    size_t n, cap;
} siblings;

/* Open sibling folder `name` (of another layout) into sb, or skip it when
 * it never copied anything; SKIPPR_INVAL (logged) when it cannot be taken
 * over yet. */
static int open_sibling(engine *e, const char *name, siblings *sb)
{
    const sk_pipeline_cfg *cfg = e->cfg;
    if (sb->n == sb->cap) {
        sk_error("more than %zu state folders of other shard counts "
                 "beside %s", sb->cap, sk_state_dir(e->st));
        return SKIPPR_INVAL;
    }
    char *dir = sk_asprintf("%s/%s/%s", cfg->state_dir, cfg->workspace, name);
    if (!dir)
        return SKIPPR_NOMEM;
    size_t i = sb->n;
    const char *why = NULL;
    int rc = SKIPPR_OK;
    if (e->remote) {
        /* Its lease first: no process may run it meanwhile. */
        rc = pl_remote_open(e, name, &sb->insts[i], &sb->rfs[i]);
        if (rc == SKIPPR_LOCKED)
            why = "is in use by a running skipprd";
        else if (!rc)
            rc = sk_remote_restore(sb->rfs[i], dir);
    } else if (sk_state_in_use(dir, NULL, 0)) {
        why = "is in use by a running skipprd";
    }
    sk_state *o = NULL;
    if (!rc && !why &&
        !(rc = sk_state_open(cfg->state_dir, cfg->workspace, name, 1, NULL,
                             &o)))
        why = unfinished(o);
    sb->sts[i] = o;
    sb->n++; /* closed by the caller, whatever happens next */
    if (!rc && !why && !sk_state_nlive(o) &&
        !sk_ledger_count(sk_state_ledger(o))) {
        sk_state_close(o); /* never copied anything: nothing to take */
        sb->sts[i] = NULL;
    } else if (why) {
        sk_error("%s %s. Changing the shard count takes over what the old "
                 "count finished, so first run every old shard to the end "
                 "(skipprd sync --once with its old --shard), then start the "
                 "new count", dir, why);
        rc = SKIPPR_INVAL;
    }
    sk_free(dir);
    return rc;
}

/* The sibling states found in the bucket (ws/FOLDER/state_id): their
 * folder names, gathered first, so that the listing (which holds this
 * state's store) is over before any of them is opened. */
typedef struct found {
    engine *e;
    size_t skip; /* "{workspace}/" */
    char **names;
    size_t n, cap;
    int rc;
} found;

static int found_one(void *ud, const skippr_unit *u)
{
    found *f = ud;
    size_t n = strlen(u->id);
    if (n < f->skip + 9 || strcmp(u->id + n - 9, "/state_id") != 0)
        return 0;
    char *name = sk_strndup(u->id + f->skip, n - f->skip - 9);
    uint32_t mine = f->e->cfg->shard_count > 1 ? f->e->cfg->shard_count : 1;
    uint32_t m = name ? layout_of(name, f->e->cfg->name) : 0;
    if (name && (m == 0 || m == mine || strchr(name, '/'))) {
        sk_free(name);
        return 0;
    }
    if (!name || skippr_array_grow(&f->names, f->n, &f->cap, sizeof *f->names,
                                   16)) {
        sk_free(name);
        f->rc = SKIPPR_NOMEM;
        return 1;
    }
    f->names[f->n++] = name;
    return 0;
}

/* Open every sibling of another layout: the folders beside this one, or
 * with the state in a bucket, the states beside this one there. */
static int open_siblings(engine *e, const char *parent, siblings *sb)
{
    if (e->remote) {
        found f = {.e = e, .skip = strlen(e->cfg->workspace) + 1};
        char *prefix = sk_asprintf("%s/%s", e->cfg->workspace, e->cfg->name);
        int rc = prefix ? sk_remote_list(e->remote, prefix, found_one, &f)
                        : SKIPPR_NOMEM;
        if (!rc)
            rc = f.rc;
        for (size_t i = 0; i < f.n; i++) {
            if (!rc)
                rc = open_sibling(e, f.names[i], sb);
            sk_free(f.names[i]);
        }
        sk_free(f.names);
        sk_free(prefix);
        return rc;
    }
    DIR *d = opendir(parent);
    if (!d)
        return SKIPPR_OK;
    int rc = SKIPPR_OK;
    struct dirent *de;
    uint32_t mine = e->cfg->shard_count > 1 ? e->cfg->shard_count : 1;
    while (!rc && (de = readdir(d))) {
        uint32_t m = layout_of(de->d_name, e->cfg->name);
        if (m != 0 && m != mine)
            rc = open_sibling(e, de->d_name, sb);
    }
    closedir(d);
    return rc;
}

#define TAKEN_OVER "taken_over"
#define TOOK_OVER "took_over"

int pl_shard_check_retired(engine *e)
{
    char line[64] = "";
    char *path = sk_asprintf("%s/" TAKEN_OVER, sk_state_dir(e->st));
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
             sk_state_dir(e->st), line);
    return SKIPPR_INVAL;
}

/* The definition of the first sibling that has one becomes this state's
 * (pipeline/definition.c then checks it as its own): what it took over
 * was copied under that definition and layout. Siblings from before
 * definitions have none, and this state is then judged as one of theirs. */
static int take_definition(engine *e, const siblings *sb)
{
    int rc = SKIPPR_NOENT;
    for (size_t i = 0; rc == SKIPPR_NOENT && i < sb->n; i++)
        if (sb->sts[i])
            rc = pl_definition_take(e, sk_state_dir(sb->sts[i]));
    return rc == SKIPPR_NOENT ? SKIPPR_OK : rc;
}

/* Mark each sibling taken over by this layout (and in the bucket). */
static void mark_taken_over(engine *e, siblings *sb)
{
    char what[64];
    if (e->cfg->shard_count > 1)
        snprintf(what, sizeof what, "--shards %u", e->cfg->shard_count);
    else
        snprintf(what, sizeof what, "no --shard");
    for (size_t i = 0; i < sb->n; i++) {
        if (!sb->sts[i])
            continue;
        char *path = sk_asprintf("%s/" TAKEN_OVER, sk_state_dir(sb->sts[i]));
        FILE *f = path ? fopen(path, "w") : NULL;
        int ok = f && fprintf(f, "%s\n", what) >= 0 && fflush(f) == 0 &&
                 fsync(fileno(f)) == 0;
        if (f)
            fclose(f);
        if (ok && sb->rfs[i])
            ok = sk_remote_put_file(sb->rfs[i], TAKEN_OVER, path) == 0;
        if (!ok)
            sk_warn("cannot mark %s: %s",
                    path ? path : sk_state_dir(sb->sts[i]), strerror(errno));
        sk_free(path);
    }
}

int pl_shard_inherit(engine *e)
{
    sk_state *st = e->st;
    /* Only a new state folder takes over, once; later runs have their
     * own ledger. */
    char *mark = sk_asprintf("%s/" TOOK_OVER, sk_state_dir(st));
    if (!mark)
        return SKIPPR_NOMEM;
    if (sk_ledger_count(sk_state_ledger(st)) || access(mark, F_OK) == 0) {
        sk_free(mark);
        return SKIPPR_OK;
    }
    char *parent = sk_asprintf("%s/%s", e->cfg->state_dir,
                               e->cfg->workspace);
    enum { MAX_SIBLINGS = 1024 };
    siblings sb = {sk_calloc(MAX_SIBLINGS, sizeof *sb.sts),
                   sk_calloc(MAX_SIBLINGS, sizeof *sb.rfs),
                   sk_calloc(MAX_SIBLINGS, sizeof *sb.insts), 0,
                   MAX_SIBLINGS};
    int rc = sb.sts && sb.rfs && sb.insts && parent
                 ? open_siblings(e, parent, &sb)
                 : SKIPPR_NOMEM;
    sk_ledger **from = NULL;
    size_t n = 0;
    if (!rc && sb.n && !(from = sk_calloc(sb.n, sizeof *from)))
        rc = SKIPPR_NOMEM;
    for (size_t i = 0; !rc && i < sb.n; i++)
        if (sb.sts[i])
            from[n++] = sk_state_ledger(sb.sts[i]);
    if (!rc && n) {
        share s = {e->cfg->shard_count > 1 ? e->cfg->shard_index : 0,
                   e->cfg->shard_count > 1 ? e->cfg->shard_count : 1};
        uint64_t got = 0;
        rc = sk_ledger_import(sk_state_ledger(st), from, n, in_share, &s, &got);
        if (!rc) {
            sk_info("took over %" PRIu64 " finished units of this share "
                    "from %zu state folders of another shard count", got,
                    n);
            mark_taken_over(e, &sb);
            rc = take_definition(e, &sb);
            FILE *f = fopen(mark, "w");
            if (!f || fprintf(f, "%zu state folders\n", n) < 0 ||
                fflush(f) != 0 || fsync(fileno(f)) != 0)
                sk_warn("cannot write %s: %s", mark, strerror(errno));
            if (f)
                fclose(f);
            if (!rc)
                rc = sk_state_file_changed(st, TOOK_OVER, 0);
        }
    }
    for (size_t i = 0; i < sb.n; i++) {
        sk_state_close(sb.sts[i]);
        sk_remote_close(sb.rfs[i], 1);
        sk_instance_free(sb.insts[i]);
    }
    sk_free(from);
    sk_free(sb.sts);
    sk_free(sb.rfs);
    sk_free(sb.insts);
    sk_free(parent);
    sk_free(mark);
    return rc;
}

size_t sk_shard_folder_len(const char *id)
{
    const char *slash = strrchr(id, '/');
    return slash ? (size_t)(slash - id) + 1 : strlen(id);
}

uint32_t sk_shard_of(const char *id, uint32_t count)
{
    if (count <= 1)
        return 0;
    uint64_t h = 14695981039346656037ULL;
    for (size_t i = 0, n = sk_shard_folder_len(id); i < n; i++)
        h = (h ^ (uint8_t)id[i]) * 1099511628211ULL;
    return (uint32_t)(h % count);
}

const char *sk_pipeline_state_name(const sk_pipeline_cfg *cfg, char *buf,
                                   size_t n)
{
    if (cfg->shard_count > 1)
        snprintf(buf, n, "%s.shard-%u-of-%u", cfg->name, cfg->shard_index,
                 cfg->shard_count);
    else
        snprintf(buf, n, "%s", cfg->name);
    return buf;
}
