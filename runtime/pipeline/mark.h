/* The listing mark (mark.c): every unit up to it is done and arrived more
 * than allowed_lateness_seconds ago, so a poll lists after it; a whole
 * listing comes every full_listing_interval_seconds. Kept in
 * {state}/listing_mark once a commit makes the units durable. The lister
 * (units.c) notes each unit it lists; pipeline.c loads and saves it.
 *
 * Thread: the pipeline thread.
 */
#ifndef SK_PIPELINE_MARK_H
#define SK_PIPELINE_MARK_H

#include <stdint.h>

#include "config/config.h"
#include "state/state.h"

typedef struct pl_mark pl_mark;

/* The mark of state st ({st->dir}/listing_mark; none, or damaged: list
 * everything), for units that arrive up to lateness seconds late. Caller
 * owns *out: pl_mark_free(). SKIPPR_OK or SKIPPR_NOMEM. */
int pl_mark_load(const sk_state *st, int64_t lateness, pl_mark **out);
void pl_mark_free(pl_mark *m);

/* A pass begins: a whole listing when there is no mark, when one is due
 * (full_listing_interval_seconds; a --once run lists incrementally only
 * with incremental_listing), else incremental. *after: where the listing
 * starts (a copy of the mark, the caller's), or NULL for the first key. */
int pl_mark_pass(pl_mark *m, const sk_pipeline_cfg *cfg, int once,
                 char **after);
/* A listed unit id, with its arrival time when has_arrival: the pass's
 * candidate moves on to it while every unit so far arrived long enough
 * ago; the first that did not (or has no time) freezes it. */
void pl_mark_note(pl_mark *m, const char *id, int has_arrival,
                  int64_t arrival);
/* Non-zero once the pass's candidate is frozen. */
int pl_mark_frozen(const pl_mark *m);
/* The pass listed and copied to its end: its candidate may be saved. */
void pl_mark_pass_done(pl_mark *m);
/* After a durable commit: the finished pass's candidate becomes the mark.
 * A whole listing replaces it (a unit found in an old prefix may have
 * moved it back); an incremental one only moves it on. m may be NULL. */
int pl_mark_save(pl_mark *m, sk_state *st);

#endif
