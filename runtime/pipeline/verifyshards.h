/* `skipprd verify --shard I/N` and `--merge-shards N` (verifyshards.c):
 * a verify split as the copy is. Each shard reads the source units and
 * the sink's objects whose folder falls to it (the copy's rule,
 * shard.h: every object of a partition falls to one shard) into both
 * sides' digests by partition, and stores them as shard-I-of-N; the
 * merge adds the N together (digests are sums) and compares, as one
 * verify would.
 *
 * Where: with the state in a bucket (skipprd_el_storage_mode: s3), in
 * the state's store under {workspace}/{pipeline}.verify-shards/, so that
 * the pods of an Indexed Job share them; else beside the state folders,
 * {state_dir}/{workspace}/{pipeline}.verify-shards/. Each is a digest
 * file (verify/digestfile.h), magic "SKVSHD01", header: shard, count,
 * source units, sink objects by kind (data, dead, own, partial,
 * outside), then the dead letters' digest.
 *
 * Owns: nothing past a call. Thread: the pipeline thread.
 */
#ifndef SK_PIPELINE_VERIFYSHARDS_H
#define SK_PIPELINE_VERIFYSHARDS_H

#include <stdint.h>

#include "pipeline/verify.h"

/* Store what e->verify read as this process's shard (cfg's shard_index
 * of shard_count) and say so on stdout. */
int pl_shards_store(engine *e);
/* Add the n shards' digests into e->verify. SKIPPR_NOENT (logged, with
 * the shards not stored yet) when one is missing, SKIPPR_INVAL when one
 * was made for another count. */
int pl_shards_load(engine *e, uint32_t n);

#endif
