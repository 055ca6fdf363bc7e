/* Both sides' digests by partition as bytes (digestfile.c): what the
 * verify mark (mark.h) and a shard's verify (pipeline/verifyshards.c)
 * write and read back.
 *
 * Layout (little-endian): an 8-byte magic naming the file's use, nhead
 * u64 values of its header (the user's), u64 entries; per entry u32 key
 * length, the key, u8 sides (bit 0 source, bit 1 sink), and per side
 * present its digest as four u64 (records, bytes, lo, hi); then u32
 * CRC32C of everything after the magic.
 *
 * Owns: nothing. Thread: any.
 */
#ifndef SK_VERIFY_DIGESTFILE_H
#define SK_VERIFY_DIGESTFILE_H

#include <stddef.h>
#include <stdint.h>

#include "base/buf.h"
#include "verify/partitions.h"

#define SK_DIGESTFILE_MAX ((size_t)1 << 30) /* about 10M partitions */

/* src and dst (either may be NULL: empty) with head[0..nhead) under
 * magic (8 bytes) into *out, initialised here (the caller frees it).
 * SKIPPR_OK, or SKIPPR_NOMEM (also past SK_DIGESTFILE_MAX bytes). */
int sk_digestfile_encode(const char *magic, const uint64_t *head,
                         size_t nhead, const sk_partitions *src,
                         const sk_partitions *dst, skippr_buf *out);
/* The file at path, read whole into *out (initialised here, bounded by
 * SK_DIGESTFILE_MAX; the caller frees it). SKIPPR_NOENT when there is no
 * such file, SKIPPR_IO when it cannot be read, SKIPPR_NOMEM. */
int sk_digestfile_read(const char *path, skippr_buf *out);
/* p[0..n), made with magic and nhead header values, into head and added
 * into src and dst. SKIPPR_CORRUPT when it is not whole or not magic's,
 * SKIPPR_NOMEM. */
int sk_digestfile_decode(const char *magic, const uint8_t *p, size_t n,
                         uint64_t *head, size_t nhead, sk_partitions *src,
                         sk_partitions *dst);

#endif
