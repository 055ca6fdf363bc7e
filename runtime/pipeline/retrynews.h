/* What the pipeline says while a sink fails (retrynews.c): a retry once per
 * retry cycle, the first give-up once, and from then on every other slice
 * stops retrying. The upload threads share the run's pl_retrynews (atomic
 * access); pipeline.c makes and frees it. */
#ifndef SK_PIPELINE_RETRYNEWS_H
#define SK_PIPELINE_RETRYNEWS_H

#include <stdint.h>

#include "base/common.h"
#include "plugin/loader.h"

typedef struct pl_retrynews pl_retrynews;

/* A run's: nothing said yet. NULL when out of memory. Caller owns it:
 * pl_retrynews_free(). */
pl_retrynews *pl_retrynews_new(void);
void pl_retrynews_free(pl_retrynews *n);

/* Retry number attempt, said at warning level once per retry cycle of the
 * run (else debug). */
void pl_retry_say(pl_retrynews *n, int attempt, const char *fmt, ...)
    SKIPPR_PRINTF(3, 4);
/* Non-zero once a sink write gave up: retrying other slices is pointless,
 * and a unit that stops on it is not the source's failure. */
int pl_sink_failing(const pl_retrynews *n);
/* A sink write gave up: the run's first says so (unless the plugin has),
 * the rest at debug; the run then stops. */
void pl_sink_gave_up(pl_retrynews *n, const sk_instance *sink,
                     const char *fmt, ...) SKIPPR_PRINTF(3, 4);

#endif
