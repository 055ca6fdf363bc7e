/* A unit's record: private to runtime/state/ (and its unit tests). The
 * layers above use unitrec.h's functions. */
#ifndef SK_UNITREC_IMPL_H
#define SK_UNITREC_IMPL_H

#include "state/unitrec.h"

struct sk_unit_rec {
    char *id;
    char *version;
    int64_t size;
    int64_t offset;
    uint32_t flags;
    int dirty; /* changed since the last COMMIT frame (engine use) */
};

#endif
