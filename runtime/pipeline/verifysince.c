/* `skipprd verify --since-state`: the copy's state read (never locked,
 * never written), the verify mark beside it (verify/mark.h) opened and,
 * after a verify that read both sides whole, committed. See verify.h.
 */
#include "pipeline/verifysince.h"

#include <string.h>
#include <time.h>

#include "pipeline/shard.h"
#include "state/sliceview.h"
#include "verify/mark.h"

struct pl_since {
    sk_state *st;          /* the copy's, read only */
    sk_vmark *mark;
    sk_partitions *open;   /* partitions with slices live in the copy */
};

/* The partitions of st's live data slices into open. */
static int add_open(sk_state *st, sk_partitions *open)
{
    for (size_t i = 0; i < sk_state_nlive(st); i++) {
        sk_slice *s = sk_state_slice_at(st, i);
        if (sk_slice_kind_of(s) == SK_SLICE_DEAD)
            continue;
        sk_digest *d = sk_partitions_at(open, sk_slice_key(s),
                                        sk_slice_key_len(s));
        if (!d)
            return SKIPPR_NOMEM;
        d->records += sk_slice_records(s);
        d->bytes += sk_slice_bytes(s);
    }
    return SKIPPR_OK;
}

/* The copy's state, read only (SKIPPR_NOENT, logged, when it never
 * ran). */
static int open_state(const engine *e, sk_state **st)
{
    char name[512];
    const sk_pipeline_cfg *cfg = e->cfg;
    int rc = sk_state_open(cfg->state_dir, cfg->workspace,
                           sk_pipeline_state_name(cfg, name, sizeof name), 1,
                           NULL, st);
    if (rc == SKIPPR_NOENT)
        sk_error("verify --since-state: pipeline %s has no state in %s/%s "
                 "on this machine: it never ran here (with the state in a "
                 "bucket, run verify on the box that runs the copy, or "
                 "without --since-state)",
                 cfg->name, cfg->state_dir, cfg->workspace);
    return rc;
}

int pl_since_open(engine *e, pl_since **out)
{
    *out = NULL;
    pl_since *s = sk_calloc(1, sizeof *s);
    if (!s || !(s->open = sk_partitions_new())) {
        pl_since_close(s);
        return SKIPPR_NOMEM;
    }
    int rc = open_state(e, &s->st);
    char *dir = rc ? NULL : sk_asprintf("%s.verify", sk_state_dir(s->st));
    if (!rc && !dir)
        rc = SKIPPR_NOMEM;
    if (!rc)
        rc = sk_vmark_open(dir, pl_verify_parts(e->verify, PL_VERIFY_SOURCE),
                           pl_verify_parts(e->verify, PL_VERIFY_SINK),
                           &s->mark);
    if (!rc)
        rc = add_open(s->st, s->open);
    sk_free(dir);
    if (rc) {
        pl_since_close(s);
        return rc;
    }
    sk_ledger *seen[2] = {sk_vmark_ledger(s->mark, 0),
                          sk_vmark_ledger(s->mark, 1)};
    pl_verify_since(e->verify, sk_state_ledger(s->st), seen, s->open);
    *out = s;
    return SKIPPR_OK;
}

int pl_since_settle(const engine *e, pl_since *s)
{
    sk_state *now = NULL;
    int rc = open_state(e, &now);
    if (!rc)
        rc = add_open(now, s->open);
    sk_state_close(now);
    return rc;
}

sk_vmark_totals pl_since_prior(const pl_since *s)
{
    return sk_vmark_prior(s->mark);
}

size_t pl_since_open_count(const pl_since *s)
{
    return sk_partitions_count(s->open);
}

uint64_t pl_since_gone(const engine *e, const pl_since *s)
{
    pl_verify_since_counts n = pl_verify_since_counts_of(e->verify);
    uint64_t had = sk_vmark_prior(s->mark).objects;
    uint64_t seen = n.before[PL_VERIFY_SINK] + n.changed[PL_VERIFY_SINK];
    return had > seen ? had - seen : 0;
}

uint64_t pl_since_faults(const engine *e, const pl_since *s)
{
    return pl_since_gone(e, s) +
           pl_verify_since_counts_of(e->verify).changed[PL_VERIFY_SINK];
}

int pl_since_commit(engine *e, pl_since *s)
{
    pl_verify_since_counts n = pl_verify_since_counts_of(e->verify);
    sk_vmark_totals t = sk_vmark_prior(s->mark);
    t.at = (int64_t)time(NULL);
    t.units += n.fresh[PL_VERIFY_SOURCE];
    t.objects += n.fresh[PL_VERIFY_SINK];
    return sk_vmark_commit(s->mark,
                           pl_verify_parts(e->verify, PL_VERIFY_SOURCE),
                           pl_verify_parts(e->verify, PL_VERIFY_SINK), t);
}

void pl_since_close(pl_since *s)
{
    if (!s)
        return;
    sk_vmark_close(s->mark);
    sk_state_close(s->st);
    sk_partitions_free(s->open);
    sk_free(s);
}
