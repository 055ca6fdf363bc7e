/* `skipprd verify`'s side of the pipeline (verify.c, verifyrun.c): the
 * copy's read path (listing, lanes, framing, peeking, routing) run once
 * over the source and once over the sink's objects, with each record
 * counted into a digest of its partition (verify/) instead of appended to
 * a slice. The source's records go under the partition routing gives
 * them, the sink's under the folders of the object that holds them; the
 * two sides are then compared partition by partition. Nothing is written
 * to the source, the sink or the state.
 *
 * Owns: its struct and both sides' partitions. Thread: the pipeline
 * thread (records are hashed as they are applied).
 */
#ifndef SK_PIPELINE_VERIFY_H
#define SK_PIPELINE_VERIFY_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "pipeline/engine.h"
#include "state/ledger.h"
#include "verify/compare.h"
#include "verify/records.h"

typedef struct pl_verify pl_verify;

/* Which side is read. */
enum { PL_VERIFY_SOURCE = 0, PL_VERIFY_SINK = 1 };

/* A verify of a sink whose objects are under prefix (copied); NULL on
 * allocation failure. Free with pl_verify_free. */
pl_verify *pl_verify_new(const char *prefix);
void pl_verify_free(pl_verify *v);
/* The side read from now on; the side being read. */
void pl_verify_side(pl_verify *v, int side);
int pl_verify_side_of(const pl_verify *v);

/* A listed unit: whether to read it. Every source unit is read; of the
 * sink's objects, those that hold records (objkey.h), the others
 * counted by kind. Incremental (pl_verify_since), only what no verify
 * has read before, of the source only the units the copy has finished;
 * drilling, only what the mark holds. *rc: a ledger's failure. */
int pl_verify_listed(pl_verify *v, const skippr_unit *u, int *rc);

/* What an incremental verify found as it listed: source units (side 0)
 * and sink objects (1) read by an earlier verify and listed unchanged
 * (before), read now for the first time (fresh), listed with another
 * version than the one read before (changed: a source unit the copy
 * copied again is read again; a sink object is not, and is a fault);
 * and source units the copy has not finished (waiting, read later). */
typedef struct pl_verify_since_counts {
    uint64_t before[2], fresh[2], changed[2];
    uint64_t waiting;
} pl_verify_since_counts;
/* Verify incrementally: copied is the copy's ledger (read only), seen
 * the mark's of each side (verify/mark.h: what earlier verifies read;
 * what is read now is added), open the partitions the copy still has
 * records of on their way (judged later). None is owned; all outlive v.
 * The mark's digests go into pl_verify_parts before the passes. */
void pl_verify_since(pl_verify *v, sk_ledger *copied, sk_ledger *seen[2],
                     const sk_partitions *open);
pl_verify_since_counts pl_verify_since_counts_of(const pl_verify *v);
/* A side's digests (PL_VERIFY_SOURCE or _SINK), owned by v. */
sk_partitions *pl_verify_parts(pl_verify *v, int side);
/* The records of group g of a piece of unit (its bytes in buf, which
 * starts at unit offset base; its records in recs), which routing put
 * under key[0..klen). */
int pl_verify_group(pl_verify *v, const char *unit, uint64_t base,
                    const char *key, size_t klen, const uint8_t *buf,
                    const rec_out *recs, const group *g);
/* A record of unit at offset that the copy would dead-letter (len
 * bytes). */
int pl_verify_dead(pl_verify *v, const char *unit, uint64_t offset,
                   const uint8_t *rec, size_t len);

/* What the sink held besides records: objects of dead letters, of
 * skippr's own, growing objects not finished, objects in no partition
 * folder; and the objects read. */
typedef struct pl_verify_objects {
    uint64_t data, dead, own, partial, outside;
} pl_verify_objects;
pl_verify_objects pl_verify_sink_objects(const pl_verify *v);
/* The source's records that would be dead letters. */
sk_digest pl_verify_dead_letters(const pl_verify *v);
/* Units read on the source side. */
uint64_t pl_verify_units(const pl_verify *v);
/* Add what another verify read (a shard's: units, objects by kind, dead
 * letters) to v's counts; its digests go into pl_verify_parts. */
void pl_verify_absorb(pl_verify *v, uint64_t units, pl_verify_objects o,
                      sk_digest dead);

/* Compare the two sides (sk_verify_compare), listing at most keep
 * partitions that do not match. */
int pl_verify_compare(const pl_verify *v, size_t keep, sk_verify_result *r);
/* The records one by one: from now on, reading a side keeps each record
 * of a partition that does not match (at most max a side: records.h)
 * instead of adding it to the digests. */
int pl_verify_drill(pl_verify *v, size_t max);
/* Match the records kept (sk_recset_compare), naming at most keep. */
int pl_verify_records(pl_verify *v, size_t keep, sk_rec_report *r);

/* verifyreport.c: the report on f: the digests' verdicts (r) and, when
 * partitions differ, their records (rr; NULL when clean), and for an
 * incremental verify what it read (since; NULL otherwise), as text or as
 * one JSON document. SKIPPR_OK, or SKIPPR_NOMEM / SKIPPR_IO. */
struct pl_since;
int pl_verify_report(const engine *e, const sk_verify_result *r,
                     const sk_rec_report *rr, const struct pl_since *since,
                     int as_json, FILE *f);

/* verifyrun.c: the run, on an engine with its endpoints and routing set
 * up (pipeline.c): both sides read (with since_state, incrementally:
 * verifysince.h), compared, reported on stdout (as JSON with as_json),
 * listing at most keep partitions that do not match. SKIPPR_OK when
 * clean, SKIPPR_CHANGED when not, else a failure (logged). With the
 * config's shard count above 1, the shard's share is read and its
 * digests stored instead (verifyshards.h); with merge_shards, nothing is
 * read and those shards' digests are compared. */
int pl_verify_run(engine *e, int as_json, int since_state,
                  uint32_t merge_shards, size_t keep);

#endif
