/* What the ledger knows about one unit (ledger.c keeps them; its runs,
 * ledger_run.c, hold them sorted on disk). Types only. */
#ifndef SK_UNITREC_H
#define SK_UNITREC_H

#include <stdint.h>

#define SK_UNIT_DONE 1u        /* every record of the unit is durable */
#define SK_UNIT_INFLATED 2u    /* offset counts decompressed bytes */
#define SK_UNIT_IN_ARRAY 4u    /* resume inside a top-level JSON array */
#define SK_UNIT_CSV 8u         /* a CSV unit: resuming frames it again */
#define SK_UNIT_XML 16u        /* an XML unit: resuming frames it again */

typedef struct sk_unit_rec {
    char *id;
    char *version;
    int64_t size;
    int64_t offset;
    uint32_t flags;
    int dirty; /* changed since the last COMMIT frame (engine use) */
} sk_unit_rec;

#endif
