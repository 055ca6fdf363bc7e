/* The ledger's merges (ledger_merge.c). */
#ifndef SK_STATE_LEDGER_MERGE_H
#define SK_STATE_LEDGER_MERGE_H

#include <stddef.h>
#include <stdint.h>

#include "state/ledger_run.h"

#define SK_LEDGER_FANOUT 8 /* runs of one level merged into one of the next */

/* The level a run of count records would have reached by merges: runs
 * made whole (a conversion, an import) join their peers. */
uint32_t sk_ledger_level_for(uint64_t count);

/* One input of a merge: a cursor over a run, the source ledger the run
 * is of, and the run's last seq (of two records of an id, the newer run's
 * wins). */
typedef struct sk_merge_in {
    sk_run_cursor c;
    size_t src;
    uint64_t hi;
} sk_merge_in;

/* Points in at the run at path (its last seq hi, of source src), on its
 * first record; dctx decompresses its blocks. sk_run_cursor_free(&in->c)
 * releases it, whatever the result. */
int sk_merge_open(sk_merge_in *in, const char *path, uint64_t hi, size_t src,
                  ZSTD_DCtx *dctx);

/* Write to w the records of in[0..k), whose cursors are open and on their
 * first record, in id order and one per id: within a source the newest
 * run's, across sources one flagged done. keep (NULL: all) chooses which
 * are written; *written counts them. */
int sk_merge_into(sk_merge_in *in, size_t k, sk_run_writer *w,
                  int (*keep)(const sk_unit_rec *r, void *ud), void *ud,
                  uint64_t *written);

#endif
