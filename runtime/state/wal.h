/* Write-ahead log: segment files of checksummed frames. The byte format and
 * the validity rule are written at the top of wal.c.
 *
 * Thread: one writer (the pipeline thread). Reads of sealed frames
 * (sk_wal_read) may come from any thread; they use pread on their own fd.
 */
#ifndef SK_WAL_H
#define SK_WAL_H

#include <stddef.h>
#include <stdint.h>

#include "base/common.h"
#include "state/walname.h" /* sk_wal_segment_path */

enum sk_wal_type {
    SK_WAL_SLICE_V1 = 1, /* a slice opens, its tag as text in its key:
                          * read (an older state), no longer written */
    SK_WAL_BLOCK = 2,  /* records appended to a slice */
    SK_WAL_COMMIT = 3, /* group commit: unit progress; makes blocks count */
    SK_WAL_SEAL = 4,   /* slice closed: final object key, size, checksum */
    SK_WAL_DONE = 5,   /* the sink confirmed the slice's object */
    SK_WAL_BLOCKZ = 6, /* a BLOCK whose records are zstd-compressed */
    SK_WAL_STREAM = 7, /* streamed slices' durable lengths; counts with
                        * the COMMIT that follows */
    SK_WAL_TAIL = 8,   /* a parted slice's bytes not yet in a part */
    SK_WAL_NOTE = 9,   /* the sink's notes of a parted slice's parts */
    SK_WAL_STAGE = 10, /* a parted slice's bytes moved to a staging piece */
    SK_WAL_SLICE = 11  /* a slice opens: id, partition, kind, typed tag */
};

#define SK_WAL_HEADER 24
#define SK_WAL_MAX_PAYLOAD (1u << 30)

typedef struct sk_wal sk_wal;

typedef struct sk_iov {
    const void *p;
    size_t n;
} sk_iov;

/* Where a frame lives, for reading it back. */
typedef struct sk_wal_pos {
    uint64_t seg;
    uint64_t off;
} sk_wal_pos;

/* Open (creating) the WAL folder. Does not replay or write anything.
 * Caller owns *out: sk_wal_close(). */
int sk_wal_open(const char *dir, sk_wal **out);
void sk_wal_close(sk_wal *w);

/* Called for each valid frame, in log order. Return non-zero to abort the
 * replay with that status. */
typedef int (*sk_wal_cb)(void *ud, sk_wal_pos pos, int type,
                         const uint8_t *payload, size_t len);

/* Replay every segment in order. A torn tail of the last segment (an
 * invalid frame with no valid frame after it) is cut off and reported at
 * info level. Any other invalid frame fails with SKIPPR_CORRUPT and an
 * error naming the segment and offset: nothing is skipped silently. After a
 * successful replay the writer starts a fresh segment. */
int sk_wal_replay(sk_wal *w, sk_wal_cb cb, void *ud);

/* Replay without repairing: a torn tail is left in place (status). */
int sk_wal_replay_readonly(sk_wal *w, sk_wal_cb cb, void *ud);

/* Append one frame made of the concatenated parts. Buffered: durable only
 * after sk_wal_sync(). */
int sk_wal_append(sk_wal *w, int type, const sk_iov *parts, int nparts,
                  sk_wal_pos *pos_out);
/* Write out buffered frames and fsync the active segment. A failure is
 * fatal for the run (see fsio.h). */
int sk_wal_sync(sk_wal *w);
/* With r, every sync also stores the synced bytes in r (remote.h), and a
 * drop removes the stored bytes of the segments dropped; with
 * store_existing, the segments already in the folder are stored now (a
 * state stored for the first time). r is not owned; NULL stops. */
struct sk_remote;
int sk_wal_set_remote(sk_wal *w, struct sk_remote *r, int store_existing);
/* Write buffered frames and ask the kernel to start writing them to disk,
 * without waiting (sync_file_range where there is one). Not durable. */
int sk_wal_writeback(sk_wal *w);
/* Non-zero when frames were appended since the last sync. */
int sk_wal_unsynced(const sk_wal *w);
/* Bytes in the active segment, and its number. */
uint64_t sk_wal_active_size(const sk_wal *w);
/* 1 when the active segment is written with O_DIRECT (its last block
 * padded with zeros until more frames fill it); 0 through the page cache
 * or before the first append. */
int sk_wal_direct(const sk_wal *w);
uint64_t sk_wal_active_seg(const sk_wal *w);
/* Close the active segment (after a sync) and start the next one. */
int sk_wal_rotate(sk_wal *w);
/* Total bytes of all live segments. */
uint64_t sk_wal_disk_bytes(const sk_wal *w);

/* Read the frame at pos, checking its CRC. On success payload holds it
 * and *type (if not NULL) its frame type. */
int sk_wal_read(sk_wal *w, sk_wal_pos pos, skippr_buf *payload, int *type);

/* Delete every segment numbered below seg (oldest first, fsyncing the
 * folder). */
int sk_wal_drop_before(sk_wal *w, uint64_t seg);
/* Lowest live segment number. */
uint64_t sk_wal_first_seg(const sk_wal *w);

#endif
