/* Multiset digests of records: see digest.h. */
#include "verify/digest.h"

#include <xxhash.h>

sk_record_hash sk_record_hash_of(const void *rec, size_t n)
{
    XXH128_hash_t x = XXH3_128bits(rec, n);
    return (sk_record_hash){.lo = x.low64, .hi = x.high64};
}

/* d's sum += (hi, lo), mod 2^128. */
static void sum_add(sk_digest *d, uint64_t lo, uint64_t hi)
{
    uint64_t s = d->lo + lo;
    d->hi += hi + (s < lo);
    d->lo = s;
}

void sk_digest_add(sk_digest *d, sk_record_hash h, size_t n)
{
    d->records++;
    d->bytes += n;
    sum_add(d, h.lo, h.hi);
}

void sk_digest_merge(sk_digest *d, const sk_digest *o)
{
    d->records += o->records;
    d->bytes += o->bytes;
    sum_add(d, o->lo, o->hi);
}

int sk_digest_equal(const sk_digest *a, const sk_digest *b)
{
    return a->records == b->records && a->bytes == b->bytes &&
           a->lo == b->lo && a->hi == b->hi;
}
