/* The copy pipeline: list units, read and decompress them, frame and peek
 * records on the pool, route them into WAL-backed slices, seal and upload
 * slices through the sink, and keep exactly-once state on the way.
 *
 * Thread: sk_pipeline_run() runs on the calling thread (the "pipeline
 * thread"), which owns the state, the source and the sink. Framing, peeking
 * and routing run as tasks on the work-stealing pool.
 */
#ifndef SK_PIPELINE_H
#define SK_PIPELINE_H

#include "config/config.h"
#include "pipeline/shard.h" /* sk_shard_of, sk_pipeline_state_name */

typedef struct sk_run_opts {
    int once;     /* drain everything, flush every slice, exit */
    int progress; /* draw a progress line (stderr is a terminal) */
} sk_run_opts;

/* sk_pipeline_run's answer when the run did its work but left units that
 * changed since they were copied uncopied (changed_units: skip). */
#define SK_RUN_CHANGED_SKIPPED 1

/* Run a pipeline. Returns 0 on success (or a graceful stop),
 * SK_RUN_CHANGED_SKIPPED, otherwise a negative status after logging the
 * cause. */
int sk_pipeline_run(const sk_yaml_doc *doc, const sk_pipeline_cfg *cfg,
                    const sk_run_opts *opts);

/* skipprd verify: read the source as the pipeline does and the sink's
 * objects, and report on stdout whether every record of the source is in
 * the sink once, byte for byte, under its partition (per partition:
 * records expected and found). Reads only; needs no state. */
typedef struct sk_verify_opts {
    int as_json; /* the report as one JSON object */
    size_t keep; /* partitions that do not match, listed at most */
    int since_state; /* read only what is new since the last such verify
                      * (the copy's state; pipeline/verifysince.h) */
    uint32_t merge_shards; /* compare these shards' stored digests
                            * (pipeline/verifyshards.h); 0: none */
} sk_verify_opts;
/* SKIPPR_OK when clean, SKIPPR_CHANGED when the sink differs, else a
 * negative status after logging the cause. */
int sk_pipeline_verify(const sk_yaml_doc *doc, const sk_pipeline_cfg *cfg,
                       const sk_verify_opts *o);

/* Print the pipeline's durable state to stdout without taking its lock. */
int sk_pipeline_status(const sk_pipeline_cfg *cfg);

#endif
