/* A multiset digest of records (digest.c): what `skipprd verify` keeps of
 * each partition on each side, so that the source and the sink can be
 * compared without holding a record.
 *
 * A record's hash is XXH3-128 of its bytes (the record alone, without the
 * line feed the sink writes after it). A digest is the count of records,
 * their bytes, and the sum of their hashes modulo 2^128. Sums commute, so
 * the order records are read in, and how they are split among threads
 * and objects, do not matter; and a record added twice counts twice.
 * Two different multisets of records with the same count and bytes have
 * the same sum with a probability of about 2^-128 for records that are
 * not chosen to collide (XXH3 is not a cryptographic hash).
 *
 * Owns: a digest is a plain value; nothing to free. Thread: any (a
 * digest is changed by one thread at a time; merge them after).
 */
#ifndef SK_VERIFY_DIGEST_H
#define SK_VERIFY_DIGEST_H

#include <stddef.h>
#include <stdint.h>

typedef struct sk_digest {
    uint64_t records;
    uint64_t bytes;
    uint64_t lo, hi; /* the sum of the records' hashes, mod 2^128 */
} sk_digest;

/* A record's 128-bit hash (hi, lo). */
typedef struct sk_record_hash {
    uint64_t lo, hi;
} sk_record_hash;

sk_record_hash sk_record_hash_of(const void *rec, size_t n);

/* Add one record of n bytes (its hash h) to d. */
void sk_digest_add(sk_digest *d, sk_record_hash h, size_t n);
/* Add every record of o to d. */
void sk_digest_merge(sk_digest *d, const sk_digest *o);
/* Whether a and b hold the same multiset of records (see above). */
int sk_digest_equal(const sk_digest *a, const sk_digest *b);

#endif
