/* The run's tally: what the stages have done so far, one counter each.
 * The stage that does a thing counts it (apply.c: units and records;
 * append.c: records and dead letters; apply.c and stream.c: bytes in;
 * seal.c: objects and slices sealed); the summary, the minute report and
 * the metrics read it. A plain record the engine holds by value, touched
 * by the pipeline thread only.
 */
#ifndef SK_PIPELINE_TALLY_H
#define SK_PIPELINE_TALLY_H

#include <stdint.h>

typedef struct pl_tally {
    uint64_t units;   /* units copied to their end in this run */
    uint64_t records; /* records appended to data slices */
    uint64_t dead;    /* records dead-lettered */
    uint64_t bytes_in; /* bytes read (decompressed), or messages' bytes */
    uint64_t objects; /* objects written to the sink */
    uint64_t sealed;  /* slices sealed */
} pl_tally;

#endif
