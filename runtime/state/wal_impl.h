/* The write-ahead log's frame format, and the log's state that wal.c
 * (segments, appends, syncs) and walread.c (replay, read-back) share.
 * Nothing outside those two includes it; wal.h is the contract.
 *
 * FILES. The WAL folder holds segments named wal-NNNNNNNNNNNNNNNN.log (16
 * hex digits, increasing). A segment is a sequence of frames with nothing
 * before, between or after them.
 *
 * FRAME. All integers little-endian.
 *
 *   offset size  field
 *        0    4  magic 0x31574B53 ("SKW1")
 *        4    1  type (wal.h: SLICE_V1, BLOCK, COMMIT, SEAL, DONE, BLOCKZ,
 *                 STREAM, TAIL, NOTE, STAGE, SLICE)
 *        5    1  format version, 1
 *        6    2  reserved, 0
 *        8    8  sequence number: previous frame's + 1, across segments
 *       16    4  payload length L, at most 2^30
 *       20    4  CRC32C of bytes 0..19 followed by the payload
 *       24    L  payload
 *
 * A frame is valid when its magic, version, length bound and CRC hold and
 * its sequence number follows the previous valid frame's. Replay reads each
 * segment from its start and stops a segment at its first invalid frame.
 * If that happens in the newest segment and no valid frame follows anywhere
 * after it, it is a torn tail from a crash: the segment is truncated there
 * and fsynced. Anywhere else it is corruption: replay fails and names the
 * segment and offset, so that nothing is ever skipped silently.
 *
 * PAYLOADS (n: u64 slice id; str: u32 length then bytes). The frames'
 * meaning is state.c's and replay.c's; their layout is written down here.
 *   SLICE   (type 11) n, str partition (the object's name), u8 kind (0
 *           data, 1 dead letters; plus 0x80 for a streamed slice, whose
 *           object grows in the sink, and 0x40 once such a slice has had
 *           staging pieces), u64 opened_at (unix seconds), then the tag
 *           that sets the slice apart from others of its partition: u8
 *           form (state/types.h: 0 JSON lines, 1 multi-line JSON, 2 CSV
 *           rows, 3 XML elements), u64 header id (CSV: the header row's;
 *           XML: the prolog's), str XML root name. A streamed slice's
 *           SLICE frame is fsynced before the sink gets a byte of it, and
 *           written again at the start of each new segment while the
 *           slice is open (the restatement).
 *   SLICE_V1 (type 1, read only) n, str partition, for a tagged slice
 *           then a NUL and the tag as text (state/v1tag.c), u8 kind, u64
 *           opened_at: read as SLICE. Older skipprd refuse type 11.
 *   BLOCK   n, u32 record count, then per record: u32 length, bytes
 *   BLOCKZ  n, u32 record count, u32 length R of the records part, then
 *           one zstd frame that decompresses to exactly that part (R
 *           bytes: per record u32 length, bytes). Written instead of BLOCK
 *           when the pipeline sets wal_zstd_level and compression helps;
 *           it counts exactly as a BLOCK does.
 *   COMMIT  u64 next slice id, u32 unit count, then per unit: str id,
 *           str version, i64 size, i64 offset, u32 flags (ledger.h
 *           SK_UNIT_*: 1 done, 2 inflated, 4 in a top-level array, 8 CSV,
 *           16 XML), u8 reserved (0). Blocks of the commit come before
 *           it in the segment (see WHICH FRAMES COUNT).
 *   SEAL    n, str object key, u64 object bytes, u64 records, u32 crc32c
 *   DONE    n
 *   STREAM  u32 count, then per streamed slice: n, u64 object bytes the
 *           sink holds durably (its sync() ran before this frame was
 *           written, or, for a parted slice, its parts were uploaded),
 *           u64 object bytes in all (for a parted slice, the rest are in
 *           its TAIL frames; else the same), u64 records, u32 crc32c of
 *           all those bytes. Written just before a COMMIT, for the slices
 *           that grew since the last one (and restated ones); counts as a
 *           BLOCK does. An entry whose sink bytes grew retires every TAIL
 *           frame of the slice before that offset.
 *   TAIL    n, u64 object offset, then bytes of a parted slice's object
 *           that no part holds yet. Written after the commit's STREAM
 *           frame; counts as a BLOCK does.
 *   NOTE    n, u8 flags (1: replaces the slice's earlier notes, a
 *           restatement), then the sink's notes of new parts (grow_note:
 *           an upload id, part numbers and ETags), which a reopen after a
 *           crash gets back. Written before the commit's STREAM frame.
 *   STAGE   n, u64 object offset, u64 length, u64 tag (part of the
 *           piece's name, unique per piece stored): those bytes of a parted
 *           slice, which TAIL frames held, are now a staging piece in the
 *           sink (stage_put returned before this frame was written); it
 *           retires the slice's TAIL frames before offset + length.
 *           Written again at the start of each new segment while the
 *           piece is needed; counts as a BLOCK does.
 *
 * WHICH FRAMES COUNT. SLICE, BLOCK and STREAM frames count only when a
 * COMMIT frame follows them in the same segment: a crash between appending
 * blocks and the group commit's fsync must not resurrect them, and every
 * replay starts
 * a new segment, so uncommitted frames of an old segment never gain a
 * COMMIT. SEAL and DONE frames are written only after a commit and count
 * wherever they are valid. Segments are deleted oldest first, and only below
 * the oldest segment any unfinished slice uses; so a BLOCK whose SLICE frame
 * is gone belongs to a slice whose DONE frame follows later in the log.
 * A streamed slice's SLICE frame that no COMMIT follows names a growing
 * object a crash left behind: recovery removes it.
 * (These rules are applied by the replay's consumer, state/replay.c; this
 * file only guarantees frame validity.)
 */
#ifndef SK_STATE_WAL_IMPL_H
#define SK_STATE_WAL_IMPL_H

#include <stddef.h>
#include <stdint.h>

#include "state/remote.h"
#include "state/wal.h"

#define WAL_MAGIC 0x31574B53u
#define WAL_VERSION 1
#define WRITE_BUF (4u << 20) /* a multiple of DIO_ALIGN */
#define DIO_ALIGN 4096u      /* offset, length and address of direct writes */
#define MAX_SEGS 65536
#define REBASE_AFTER 256 /* stored objects of a segment before a copy */

struct sk_wal {
    char *dir;
    uint64_t *segs; /* sorted live segment numbers */
    uint64_t *sizes;
    size_t nsegs;
    size_t segs_cap, sizes_cap; /* grown together, up to MAX_SEGS */
    int fd;         /* active segment, -1 before the first append */
    uint64_t active;
    uint64_t active_size; /* including buffered bytes */
    uint64_t next_seq;
    uint8_t *wbuf;        /* WRITE_BUF bytes at a DIO_ALIGN address */
    size_t wlen;          /* bytes of frames in wbuf */
    uint64_t wbuf_off;    /* segment offset of wbuf[0] */
    uint64_t written;     /* segment bytes of frames written out */
    int direct;           /* the active segment is open O_DIRECT */
    int readonly; /* replay repairs nothing */
    int unsynced; /* frames appended since the last sync */
    sk_remote *remote; /* where synced bytes go too (remote.h); not owned */
    uint64_t mseg, moff; /* the bytes stored there end here */
    uint32_t mpieces;    /* objects stored of mseg since its last copy */
};

static inline void seg_path(const sk_wal *w, uint64_t seg, char *out, size_t cap)
{
    sk_wal_segment_path(w->dir, seg, out, cap);
}

#endif
