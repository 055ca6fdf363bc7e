/* The ledger: what the pipeline knows about every unit it has touched.
 *
 * Two layers, as in a log-structured merge tree. On disk, sorted runs in
 * {state}/ledger.d/ (ledger_run.h: front-coded, zstd-compressed blocks),
 * each read as a stream, never loaded whole: the source lists in id order,
 * so re-listing a billion-key prefix merges against them in constant
 * memory. In memory, records changed since the last flush (replayed from
 * WAL COMMIT frames or made in this run), in a hash map in front.
 *
 * A flush (sk_ledger_compact) writes the map as a new run of level 0 and
 * keeps only the unfinished units in memory; its cost is that of what
 * changed. When a level holds FANOUT (8) runs, all its runs are merged
 * into one of the next level, so each record is rewritten once per level:
 * log8 of the ledger's size over a flush's. A merge's seq range is then
 * its inputs' alone, and at open a run is taken for a merge's input (left
 * by a crash, and removed) only when a run of a higher level holds its
 * seqs. After a flush, WAL segments holding older
 * COMMIT frames may be deleted. Where runs disagree about a unit, the
 * newest run (highest seq) holds its record.
 *
 * A ledger file of earlier versions ({state}/ledger, "SKLEDG01") is
 * converted into the first run when a pipeline opens it for writing.
 */
#ifndef SK_LEDGER_H
#define SK_LEDGER_H

#include <stdint.h>

#include "base/map.h"
#include "state/unitrec.h" /* sk_unit_rec, SK_UNIT_* */

typedef struct sk_ledger sk_ledger;

/* Open (or start) the ledger at path ({state}/ledger; its runs are in
 * path.d). readonly: create, convert and remove nothing (`status`).
 * Caller owns: sk_ledger_close(). */
int sk_ledger_open(const char *path, int readonly, sk_ledger **out);
/* With r, every run written from now on is stored in r as well (remote.h)
 * and every run removed is removed there; with store_existing, the runs
 * open now are stored at once. r is not owned. */
struct sk_remote;
int sk_ledger_set_remote(sk_ledger *l, struct sk_remote *r,
                         int store_existing);
void sk_ledger_close(sk_ledger *l);

uint64_t sk_ledger_next_slice_id(const sk_ledger *l);
/* Records in the runs plus recent ones (approximate: a unit in several
 * runs, or in a run and in memory, counts more than once until merged). */
uint64_t sk_ledger_count(const sk_ledger *l);
/* Records in the runs; those flagged done; records held in memory since
 * the last flush; the number of runs. */
uint64_t sk_ledger_file_count(const sk_ledger *l);
uint64_t sk_ledger_file_done(const sk_ledger *l);
uint64_t sk_ledger_recent_count(const sk_ledger *l);
size_t sk_ledger_runs(const sk_ledger *l);

/* Find a unit. Lookups in ascending id order stream through the runs;
 * a lookup below the previous one restarts them (runs whose id range
 * does not hold the id are not read). *out points to a
 * record owned by the ledger, valid until the next call; NULL if unknown.
 * Returns SKIPPR_OK or SKIPPR_CORRUPT/IO. */
int sk_ledger_lookup(sk_ledger *l, const char *id, const sk_unit_rec **out);

/* The recent record for id, creating it (copying id/version) if needed.
 * Returned record is owned by the ledger and stays valid until compaction
 * removes finished units. NULL on allocation failure. */
sk_unit_rec *sk_ledger_touch(sk_ledger *l, const char *id,
                             const char *version, int64_t size);

/* Iterate recent records: start with *it = 0. */
sk_unit_rec *sk_ledger_recent_next(sk_ledger *l, size_t *it);

/* Copy into l, as one new run, every unit flagged done in the ledgers
 * from[0..n) (opened read-only) for which keep() says yes: the ledger of
 * a shard when the shard count changes. *imported counts them. */
int sk_ledger_import(sk_ledger *l, sk_ledger *const *from, size_t n,
                     int (*keep)(const sk_unit_rec *r, void *ud), void *ud,
                     uint64_t *imported);

/* Flush: write the recent records as a new run that also holds
 * next_slice_id, then merge full levels. On success, finished units leave
 * the recent map (they are in the run). */
int sk_ledger_compact(sk_ledger *l, uint64_t next_slice_id);

#endif
