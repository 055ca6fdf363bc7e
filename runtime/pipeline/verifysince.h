/* `skipprd verify --since-state` (verifysince.c): a verify that reads only
 * what the copy finished since the last such verify, kept in a mark
 * beside the copy's state (verify/mark.h).
 *
 * What is compared is still every partition, whole: the mark holds both
 * sides' digests of what earlier verifies read, and this verify adds what
 * is new. Read now: the source units that the copy's ledger says are
 * done and no verify has read (or that changed, and the copy copied
 * again), and the sink's objects no verify has read. A partition the
 * copy still has a live slice of (read from its state at the start and
 * at the end) is not judged until its records have landed.
 *
 * Owns: the copy's state (read only, never locked) and the mark, until
 * pl_since_close. Thread: the pipeline thread.
 */
#ifndef SK_PIPELINE_VERIFYSINCE_H
#define SK_PIPELINE_VERIFYSINCE_H

#include "pipeline/verify.h"
#include "verify/mark.h"

typedef struct pl_since pl_since;

/* Open the copy's state and the mark; the mark's digests go into
 * e->verify, which then reads incrementally (pl_verify_since). Caller
 * owns *out: pl_since_close. */
int pl_since_open(engine *e, pl_since **out);
/* After both passes: the partitions the copy has live slices of now are
 * not judged either. */
int pl_since_settle(const engine *e, pl_since *s);
/* The last mark's totals; the partitions not judged. */
sk_vmark_totals pl_since_prior(const pl_since *s);
size_t pl_since_open_count(const pl_since *s);
/* The sink's faults only an incremental verify sees: objects read by an
 * earlier verify that are gone from the sink or hold other bytes now. */
uint64_t pl_since_gone(const engine *e, const pl_since *s);
uint64_t pl_since_faults(const engine *e, const pl_since *s);
/* Record what this verify read as the new mark. */
int pl_since_commit(engine *e, pl_since *s);
void pl_since_close(pl_since *s);

#endif
