/* What a run says while it works (report.c): the progress line on a
 * terminal and the minute report in the log. pipeline.c makes the run's
 * pl_report; only report.c reads or writes it. */
#ifndef SK_PIPELINE_REPORT_H
#define SK_PIPELINE_REPORT_H

#include <stdint.h>

typedef struct pl_report pl_report;

/* A run's, started at now (sk_now_ns). NULL when out of memory. Caller
 * owns it: pl_report_free(). */
pl_report *pl_report_new(uint64_t now);
void pl_report_free(pl_report *r);

struct engine;
/* The minute report when one is due, the metrics, and the progress line
 * (at most four times a second unless force). */
void pl_progress(struct engine *e, int force);

#endif
