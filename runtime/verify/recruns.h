/* Records kept by a verify, spilled to disk in sorted runs when they
 * pass their share of memory, and read back merged (recruns.c): so that
 * the records of partitions that differ are matched in bounded memory
 * however many there are (records.h).
 *
 * The runs are written one after another into one file in $TMPDIR (else
 * /tmp), unlinked as soon as it is made, so nothing is left behind
 * however the process ends: fixed 32-byte records (hash hi, lo; partition and place names' indexes;
 * offset), sorted as sk_rec_order sorts them. Reading merges every run
 * and the records still in memory through a heap, with a 16 KiB buffer a
 * run: at most SK_RECRUNS_MAX runs a side (past it, records are counted
 * and not kept, and the match says it is partial).
 *
 * Owns: its runs' descriptors and buffers. Thread: one at a time.
 */
#ifndef SK_VERIFY_RECRUNS_H
#define SK_VERIFY_RECRUNS_H

#include <stddef.h>
#include <stdint.h>

#define SK_RECRUNS_MAX 4096

typedef struct sk_rec {
    uint64_t hi, lo;      /* the record's hash */
    uint32_t part, where; /* indexes of its partition's and place's names */
    uint64_t offset;      /* where in its place */
} sk_rec;

/* qsort's order of records: hash, then partition, place, offset. */
int sk_rec_order(const void *a, const void *b);

typedef struct sk_recruns sk_recruns;

sk_recruns *sk_recruns_new(void);
void sk_recruns_free(sk_recruns *r);
size_t sk_recruns_count(const sk_recruns *r);
/* Sort v[0..n) and write it as a new run. SKIPPR_OK, SKIPPR_RANGE when
 * there are SK_RECRUNS_MAX runs already, or SKIPPR_IO (logged). */
int sk_recruns_spill(sk_recruns *r, sk_rec *v, size_t n);

/* The runs of r and mem[0..n) (sorted here), merged in order. The
 * records stay r's and mem's caller's; both outlive the cursor. */
typedef struct sk_recmerge sk_recmerge;
int sk_recmerge_open(sk_recruns *r, sk_rec *mem, size_t n,
                     sk_recmerge **out);
/* The next record (NULL at the end), valid until the next call;
 * *rc: SKIPPR_OK, or SKIPPR_IO / SKIPPR_CORRUPT when a run reads back
 * short. */
const sk_rec *sk_recmerge_next(sk_recmerge *m, int *rc);
void sk_recmerge_free(sk_recmerge *m);

#endif
