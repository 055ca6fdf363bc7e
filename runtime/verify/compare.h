/* The source's partitions against the sink's (compare.c): what
 * `skipprd verify` reports at the level of digests. A partition matches
 * when both sides hold the same multiset of records (digest.h); else it
 * differs, is missing from the sink, or is in the sink only. Which
 * records differ inside a partition is a second, record-level step.
 *
 * Owns: the result and the keys of the partitions it lists (free it with
 * sk_verify_result_free). Thread: any; one result per call.
 */
#ifndef SK_VERIFY_COMPARE_H
#define SK_VERIFY_COMPARE_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "verify/partitions.h"

typedef enum sk_verify_verdict {
    SK_VERIFY_MATCH,   /* the same records on both sides */
    SK_VERIFY_DIFFER,  /* on both sides, not the same records */
    SK_VERIFY_MISSING, /* the source's, not in the sink */
    SK_VERIFY_EXTRA,   /* in the sink only */
    SK_VERIFY_OPEN     /* not the same, but the copy still has records of
                        * it on its way: judged once they land */
} sk_verify_verdict;
#define SK_VERIFY_VERDICTS 5

/* One partition that does not match. */
typedef struct sk_verify_part {
    char *key;
    sk_verify_verdict verdict;
    sk_digest want, got; /* zero on the side that has none */
} sk_verify_part;

typedef struct sk_verify_result {
    sk_digest want, got;  /* every record, each side */
    uint64_t partitions;  /* keys on either side */
    uint64_t by_verdict[SK_VERIFY_VERDICTS]; /* partitions per sk_verify_verdict */
    sk_verify_part *parts; /* the first `keep` that do not match, by key */
    size_t nparts;
    size_t keep;
} sk_verify_result;

/* Compare src (what the source's records route to) with dst (what the
 * sink holds, by partition) into *out, listing at most keep partitions
 * that do not match. A partition that does not match and is one of open
 * (NULL: none) is SK_VERIFY_OPEN, and not listed. SKIPPR_OK or
 * SKIPPR_NOMEM. */
int sk_verify_compare(const sk_partitions *src, const sk_partitions *dst,
                      const sk_partitions *open, size_t keep,
                      sk_verify_result *out);
void sk_verify_result_free(sk_verify_result *r);
/* Whether every partition matched, but those still open. */
int sk_verify_clean(const sk_verify_result *r);
/* A verdict's name: "match", "differ", "missing", "extra", "open". */
const char *sk_verify_verdict_name(sk_verify_verdict v);

#endif
