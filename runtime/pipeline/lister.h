/* The listing of a listed source (lister.c): a pass lists the source in
 * rounds, from the listing mark on, and hands the lanes (units.c) batches
 * of at most list_batch units that are not done yet, each with where it
 * resumes and when it arrived (event time). The units it skips are
 * counted here for the summary and the metrics.
 *
 * Owns: its struct, and each batch until the next one. pipeline.c makes
 * and frees it. Thread: the pipeline thread.
 */
#ifndef SK_PIPELINE_LISTER_H
#define SK_PIPELINE_LISTER_H

#include <stdint.h>

#include "pipeline/engine.h"

/* Units listed, and those skipped: done already, changed since copied
 * (changed_units: skip), another shard's; changed ones copied again. */
typedef struct pl_list_counts {
    uint64_t listed, done, changed, shard, recopied;
} pl_list_counts;

/* A lister with nothing listed; NULL on allocation failure. The caller
 * frees it with pl_lister_free (NULL is fine). */
pl_lister *pl_lister_new(void);
void pl_lister_free(pl_lister *l);

/* A pass begins: after the listing mark, or (a whole listing) at the
 * first key. */
int pl_lister_pass(engine *e);
/* The pass's next batch (the previous one is forgotten): list until
 * list_batch units wait or the listing ends. *more: the pass goes on. */
int pl_lister_next(engine *e, int *more);
/* The batch: *n units, borrowed until the next pl_lister_next. */
todo *pl_lister_batch(pl_lister *l, size_t *n);

/* Event time: 1 with *a the arrival of the batch's first unit not done,
 * 0 when every unit of the batch is done. */
int pl_lister_undone_arrival(pl_lister *l, int64_t *a);

pl_list_counts pl_lister_counts(const pl_lister *l);

#endif
