/* The records of the partitions that differ, one by one (records.c):
 * after the digests (compare.h) name the partitions whose records are not
 * the same on both sides, `skipprd verify` reads those partitions again
 * and keeps each record's hash, partition and place (a source unit and
 * offset, or a sink object and offset); then the two sides are matched by
 * hash, and each record left over is named: missing from the sink, found
 * more than once, under another partition, or unexpected.
 *
 * Memory: 32 bytes a record kept and each name once. A side holds at most
 * the limit given to sk_recset_new in memory; each time it is full, they
 * are sorted and spilled to disk as a run (recruns.h), and the match
 * merges the runs back. Past SK_RECRUNS_MAX runs a side, the rest are
 * counted but not kept, and the comparison says it is partial.
 *
 * Owns: its records and names. Thread: one at a time.
 */
#ifndef SK_VERIFY_RECORDS_H
#define SK_VERIFY_RECORDS_H

#include <stddef.h>
#include <stdint.h>

#include "verify/digest.h"

typedef struct sk_recset sk_recset;

/* An empty set of both sides' records that keeps at most max a side in
 * memory; NULL on allocation failure. Free with sk_recset_free. */
sk_recset *sk_recset_new(size_t max);
void sk_recset_free(sk_recset *s);
/* Keep one record of side (0: the source, 1: the sink): its hash, its
 * partition (plen bytes), where it is (a unit or object id, NUL-ended)
 * and its offset there. SKIPPR_OK (also past the runs' bound: it is then
 * only counted), SKIPPR_NOMEM, or an I/O status when a spill fails. */
int sk_recset_add(sk_recset *s, int side, sk_record_hash h,
                  const char *part, size_t plen, const char *where,
                  uint64_t offset);

/* Runs spilled to disk so far, both sides. */
size_t sk_recset_runs(const sk_recset *s);

/* What befell a source record, or a sink record, that has no twin in
 * its partition on the other side. */
typedef enum sk_rec_kind {
    SK_REC_MISSING,    /* the source's, not in the sink */
    SK_REC_MOVED,      /* in the sink under another partition */
    SK_REC_DUPLICATED, /* in the sink once more than in the source */
    SK_REC_UNEXPECTED  /* in the sink, not in the source */
} sk_rec_kind;

/* One of them, named: the partition it belongs to (the source's, or for
 * an unexpected or duplicated record the sink's), where the source has it
 * (NULL for UNEXPECTED and DUPLICATED) and where the sink has it (NULL
 * for MISSING), and for MOVED the partition the sink has it under. The
 * strings belong to the set compared. */
typedef struct sk_rec_diff {
    sk_rec_kind kind;
    const char *partition;
    const char *src_where;
    uint64_t src_offset;
    const char *sink_where;
    uint64_t sink_offset;
    const char *sink_partition;
} sk_rec_diff;

typedef struct sk_rec_report {
    uint64_t counts[4];   /* records per sk_rec_kind */
    int partial;          /* a side had more records than it kept */
    size_t runs;          /* sorted runs they were spilled to on disk */
    sk_rec_diff *first;   /* the first `keep` differences (by hash) */
    size_t nfirst, keep;
} sk_rec_report;

/* Match the source's records with the sink's (sorted in place, merged
 * with their runs) into *r, naming at most keep of the differences.
 * SKIPPR_OK, SKIPPR_NOMEM, or an I/O status when a run reads back
 * short. */
int sk_recset_compare(sk_recset *s, size_t keep, sk_rec_report *r);
void sk_rec_report_free(sk_rec_report *r);
/* A kind's name: "missing", "moved", "duplicated", "unexpected". */
const char *sk_rec_kind_name(sk_rec_kind k);

#endif
