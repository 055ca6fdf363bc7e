/* The verify mark (mark.c): what `skipprd verify --since-state` has read
 * before, so that the next verify reads only what is new.
 *
 * A mark is a folder beside the pipeline's state ({state}.verify):
 *   lock        flock()ed while a verify works on the mark
 *   current     the generation in use, as decimal text
 *   gen-N/      a generation: source.d/ and sink.d/, the ledgers
 *               (state/ledger.h) of the source units and sink objects
 *               read, by id and version; and `partitions`, both sides'
 *               digests per partition over exactly those
 * A verify works on gen-N+1, made of hard links to gen-N's files (a
 * ledger's runs are written once and never changed), and commits by
 * replacing `current`; a verify that dies leaves gen-N as it was, and
 * the next open removes every other generation. So a mark is either the
 * last committed verify's or the one before: never half of one.
 *
 * `partitions` is a digest file (digestfile.h) of magic "SKVMRK01" whose
 * header is the verify's unix seconds, source units and sink objects.
 *
 * Owns: its ledgers (until sk_vmark_close) and the lock. Thread: one.
 */
#ifndef SK_VERIFY_MARK_H
#define SK_VERIFY_MARK_H

#include <stdint.h>

#include "state/ledger.h"
#include "verify/partitions.h"

typedef struct sk_vmark sk_vmark;

/* What a mark covers: when it was made (unix seconds; 0: no mark), the
 * source units and sink objects read by the verifies up to it. */
typedef struct sk_vmark_totals {
    int64_t at;
    uint64_t units, objects;
} sk_vmark_totals;

/* Open the mark in dir (made if absent), locked against other verifies
 * (SKIPPR_LOCKED, logged, when one holds it), with a new generation to
 * work on. Both sides' digests of the last mark are added into src and
 * dst. SKIPPR_CORRUPT when the mark does not read back whole. Caller
 * owns *out: sk_vmark_close. */
int sk_vmark_open(const char *dir, sk_partitions *src, sk_partitions *dst,
                  sk_vmark **out);
/* The last mark's totals (at 0: there was none). */
sk_vmark_totals sk_vmark_prior(const sk_vmark *m);
/* The ledger of the source units (side 0) or sink objects (side 1) read
 * up to the last mark, to which this verify adds what it reads. Owned
 * by the mark. */
sk_ledger *sk_vmark_ledger(sk_vmark *m, int side);
/* Make the new generation the mark: its ledgers flushed, src and dst
 * written as its digests, with totals t; then `current` replaced. */
int sk_vmark_commit(sk_vmark *m, const sk_partitions *src,
                    const sk_partitions *dst, sk_vmark_totals t);
/* Close; an uncommitted generation is removed. */
void sk_vmark_close(sk_vmark *m);

#endif
