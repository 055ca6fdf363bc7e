/* Event-time sealing's clock (clock.c): the arrival times of the units
 * listed, the watermark a flush last passed, when the next open slice
 * falls due, and the late records of slices opened for a time bucket
 * already passed. Event time is on while every listed unit names its
 * arrival time and the listing comes about in that order; the first unit
 * that does not, or modification times that are plainly not arrival
 * times, turn it off for the run (slices are then sealed by
 * buffer_threshold_seconds and max_object_bytes).
 *
 * The listing (units.c) feeds it, sealing (seal.c) asks it, the summary
 * and the metrics read it. Owns: its struct, with each open slice's time
 * once placed. Thread: the pipeline thread.
 */
#ifndef SK_PIPELINE_CLOCK_H
#define SK_PIPELINE_CLOCK_H

#include <stdint.h>

#include "config/settings.h"
#include "route/route.h"
#include "state/state.h"

typedef struct pl_clock pl_clock;

/* A clock, on when on is non-zero; NULL on allocation failure. The
 * caller frees it with pl_clock_free. */
pl_clock *pl_clock_new(int on);
void pl_clock_free(pl_clock *c);

/* Whether event time is on. */
int pl_clock_on(const pl_clock *c);

/* Unit id's arrival time into *a: from its key (cfg's
 * arrival_key_pattern, else a Firehose or Hive date), else modified (the
 * source's modification time). 1 when known; 0 when event time is, or
 * now turns, off (one line says why). */
int pl_clock_arrival(pl_clock *c, const sk_pipeline_cfg *cfg, const char *id,
                     int64_t modified, int64_t *a);

/* The latest arrival listed (INT64_MIN: none); whether any is known. */
int64_t pl_clock_latest(const pl_clock *c);
int pl_clock_known(const pl_clock *c);

/* Open slice s's time: when its bucket (by router r) and the lateness
 * make it due (*at; INT64_MAX when never). Placed the first time it is
 * asked, which also notes whether s opened after the watermark passed
 * that time (a late slice). SKIPPR_NOMEM when it cannot be kept. */
int pl_clock_seal_at(pl_clock *c, const sk_slice *s, const sk_router *r,
                     int64_t lateness, int64_t *at);
/* Open slice s leaves: sealed (a late one's records count as late), or
 * forgotten (sealed 0). */
void pl_clock_closed(pl_clock *c, const sk_slice *s, int sealed);

/* A flush looks at the open slices: pl_clock_flush_begin, then
 * pl_clock_pending for each one not due, then pl_clock_flush_end with
 * the watermark it used. */
void pl_clock_flush_begin(pl_clock *c);
void pl_clock_pending(pl_clock *c, int64_t seal_at);
void pl_clock_flush_end(pl_clock *c, int64_t wm);
/* The earliest time an open slice falls due (INT64_MIN before the first
 * flush: the first unit finished checks the slices it opened). */
int64_t pl_clock_next_due(const pl_clock *c);

/* The counts of late records and slices. */
uint64_t pl_clock_late_records(const pl_clock *c);
uint64_t pl_clock_late_slices(const pl_clock *c);

#endif
