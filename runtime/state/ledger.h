/* The ledger: what the pipeline knows about every unit it has touched.
 *
 * Two layers. The compacted file ({state}/ledger) holds unit records sorted
 * by id and is read as a stream, never loaded whole, so re-listing a
 * billion-key prefix merges against it in constant memory (the source lists
 * in the same order). Records changed since the last compaction (replayed
 * from WAL COMMIT frames or made in this run) live in a hash map in front.
 * Compaction merges both into a new file (temp, fsync, rename, fsync dir),
 * after which WAL segments holding older COMMIT frames may be deleted.
 *
 * File format (little-endian):
 *   header  "SKLEDG01", u64 next slice id, u64 record count,
 *           u32 CRC32C of the preceding 24 bytes
 *   record  u32 length L, L payload bytes, u32 CRC32C of the payload
 *           payload: u16 id length, id, u16 version length, version,
 *                    i64 size, i64 offset, u32 flags
 *   trailer "SKLEDEND", u64 record count
 */
#ifndef SK_LEDGER_H
#define SK_LEDGER_H

#include <stdint.h>
#include <stdio.h>

#include "base/map.h"

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

typedef struct sk_ledger sk_ledger;

/* Open (or start) the ledger at path. Caller owns: sk_ledger_close(). */
int sk_ledger_open(const char *path, sk_ledger **out);
void sk_ledger_close(sk_ledger *l);

uint64_t sk_ledger_next_slice_id(const sk_ledger *l);
/* Units in the compacted file plus recent ones not in it (approximate:
 * recent units already in the file count twice until compaction). */
uint64_t sk_ledger_count(const sk_ledger *l);
/* Units in the file, and units held in memory since the last compaction. */
uint64_t sk_ledger_file_count(const sk_ledger *l);
uint64_t sk_ledger_recent_count(const sk_ledger *l);

/* Find a unit. Lookups in ascending id order stream through the file;
 * a lookup below the previous one restarts the stream. *out points to a
 * record owned by the ledger, valid until the next call; NULL if unknown.
 * Returns SKIPPR_OK or SKIPPR_CORRUPT/IO. */
int sk_ledger_lookup(sk_ledger *l, const char *id, const sk_unit_rec **out);

/* The recent record for id, creating it (copying id/version) if needed.
 * Returned record is owned by the ledger and stays valid until compaction
 * removes finished units. NULL on allocation failure. */
sk_unit_rec *sk_ledger_touch(sk_ledger *l, const char *id,
                             const char *version, int64_t size);

/* Iterate recent records: start with *it = 0. */
sk_unit_rec *sk_ledger_recent_next(sk_ledger *l, size_t *it);

/* Write a new compacted file with next_slice_id. On success, finished
 * units leave the recent map (they are in the file). */
int sk_ledger_compact(sk_ledger *l, uint64_t next_slice_id);

#endif
