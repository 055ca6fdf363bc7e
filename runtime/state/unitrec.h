/* What the ledger knows about one unit (ledger.c keeps them; its runs,
 * ledger_run.c, hold them sorted on disk). */
#ifndef SK_UNITREC_H
#define SK_UNITREC_H

#include <stdint.h>

#define SK_UNIT_DONE 1u        /* every record of the unit is durable */
#define SK_UNIT_INFLATED 2u    /* offset counts decompressed bytes */
#define SK_UNIT_IN_ARRAY 4u    /* resume inside a top-level JSON array */
#define SK_UNIT_CSV 8u         /* a CSV unit: resuming frames it again */
#define SK_UNIT_XML 16u        /* an XML unit: resuming frames it again */

/* One unit's record: its fields are the state layer's (unitrec_impl.h);
 * the layers above read and move it through these (unitrec.c). A record
 * stays where it is while its unit is not done (see sk_ledger_touch). */
typedef struct sk_unit_rec sk_unit_rec;

/* Its id, version (NULL: none), size (-1: unknown), offset (where
 * progress stands: source bytes, or decompressed ones with
 * SK_UNIT_INFLATED) and flags (SK_UNIT_*). */
const char *sk_unit_id(const sk_unit_rec *u);
const char *sk_unit_version(const sk_unit_rec *u);
int64_t sk_unit_size(const sk_unit_rec *u);
int64_t sk_unit_offset(const sk_unit_rec *u);
uint32_t sk_unit_flags(const sk_unit_rec *u);

/* A blank record that no ledger holds (a streamed document's scratch);
 * NULL on allocation failure. The caller frees it with sk_unit_free. */
sk_unit_rec *sk_unit_new(void);
void sk_unit_free(sk_unit_rec *u);

/* Where a unit's copy starts (opening it): offset and flags, which no
 * commit need record until it makes progress. */
void sk_unit_set(sk_unit_rec *u, int64_t offset, uint32_t flags);
/* Progress: the offset, and the flags with clear's bits off and set's
 * on. The next commit records it. */
void sk_unit_progress(sk_unit_rec *u, int64_t offset, uint32_t set,
                      uint32_t clear);

#endif
