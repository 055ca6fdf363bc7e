/* The ledger's merges, run by run: the level a run of a size belongs to,
 * and the k-way merge of sorted runs into one (ledger.c chooses the runs
 * and replaces them). */
#include "state/ledger_merge.h"
#include "state/unitrec_impl.h"

#include <string.h>

/* The level a run of count records would have reached by merges: runs
 * made whole (a conversion, an import) join their peers. */
uint32_t sk_ledger_level_for(uint64_t count)
{
    uint32_t level = 0;
    for (uint64_t cap = 4096; cap < count && level < 30; cap *= SK_LEDGER_FANOUT)
        level++;
    return level;
}

/* Write to w the records of in[0..k), whose cursors are open and on their
 * first record, in id order and one per id: within a source the newest
 * run's, across sources one flagged done. keep (NULL: all) chooses which
 * are written; *written counts them. */
int sk_merge_into(sk_merge_in *in, size_t k, sk_run_writer *w,
                  int (*keep)(const sk_unit_rec *r, void *ud), void *ud,
                  uint64_t *written)
{
    int rc = SKIPPR_OK;
    *written = 0;
    for (;;) {
        size_t best = k;
        for (size_t i = 0; i < k; i++) {
            if (!in[i].c.valid)
                continue;
            if (best == k) {
                best = i;
                continue;
            }
            const sk_unit_rec *a = &in[i].c.rec, *b = &in[best].c.rec;
            int c = strcmp(a->id, b->id);
            if (c < 0 ||
                (c == 0 && in[i].src == in[best].src &&
                 in[i].hi > in[best].hi) ||
                (c == 0 && in[i].src != in[best].src &&
                 (a->flags & SK_UNIT_DONE) && !(b->flags & SK_UNIT_DONE)))
                best = i;
        }
        if (best == k)
            return SKIPPR_OK;
        const sk_unit_rec *r = &in[best].c.rec;
        if (!keep || keep(r, ud)) {
            if ((rc = sk_run_writer_add(w, r)))
                return rc;
            (*written)++;
        }
        for (size_t i = 0; i < k; i++)
            if (i != best && in[i].c.valid &&
                strcmp(in[i].c.rec.id, r->id) == 0 &&
                (rc = sk_run_cursor_step(&in[i].c)))
                return rc;
        if ((rc = sk_run_cursor_step(&in[best].c)))
            return rc;
    }
}

int sk_merge_open(sk_merge_in *in, const char *path, uint64_t hi, size_t src,
                  ZSTD_DCtx *dctx)
{
    in->src = src;
    in->hi = hi;
    int rc = sk_run_cursor_open(&in->c, path, dctx);
    return rc ? rc : sk_run_cursor_step(&in->c);
}
