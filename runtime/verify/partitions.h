/* The digests of one side's partitions (partitions.c): partition key ->
 * sk_digest, as `skipprd verify` reads the source (each record under the
 * key routing gives it) or the sink (each record under its object's
 * folder). Then the two sides are paired, partition by partition.
 *
 * Memory grows with the number of partitions (about 100 bytes and the key
 * each), not with records or objects.
 *
 * Owns: its entries and their keys. Thread: one at a time; each thread
 * may fill a set of its own, merged after (sk_partitions_merge).
 */
#ifndef SK_VERIFY_PARTITIONS_H
#define SK_VERIFY_PARTITIONS_H

#include <stddef.h>

#include "verify/digest.h"

typedef struct sk_partitions sk_partitions;

/* An empty set; NULL on allocation failure. Free with
 * sk_partitions_free. */
sk_partitions *sk_partitions_new(void);
void sk_partitions_free(sk_partitions *p);

/* Partition key's digest (klen bytes of key), empty on first use; NULL
 * on allocation failure. The pointer stays valid until the set is
 * freed. */
sk_digest *sk_partitions_at(sk_partitions *p, const char *key, size_t klen);
/* Partition key's digest, or NULL when it has none. */
const sk_digest *sk_partitions_get(const sk_partitions *p, const char *key,
                                   size_t klen);
/* Add every partition of from to into: SKIPPR_OK or SKIPPR_NOMEM. */
int sk_partitions_merge(sk_partitions *into, const sk_partitions *from);
size_t sk_partitions_count(const sk_partitions *p);
/* All of them summed into *total. */
void sk_partitions_total(const sk_partitions *p, sk_digest *total);

/* The partitions of a and b paired, in byte order of their keys: fn is
 * called once per key with its digest on each side (NULL on a side that
 * has none), and a non-zero return stops the walk and is returned.
 * SKIPPR_NOMEM when the keys cannot be sorted. */
typedef int (*sk_partitions_fn)(const char *key, size_t klen,
                                const sk_digest *a, const sk_digest *b,
                                void *ud);
int sk_partitions_pair(const sk_partitions *a, const sk_partitions *b,
                       sk_partitions_fn fn, void *ud);

#endif
