/* One sorted run of the ledger (ledger.h): a file of unit records in id
 * order, written once and then only read, as a stream.
 *
 * File format (little-endian; varints are LEB128, at most 10 bytes):
 *   "SKLRUN02" (a run of version 1, "SKLRUN01", is read as well)
 *   blocks  u32 stored length S (> 0), u32 raw length R, u32 records in
 *           it, u32 CRC32C of the S stored bytes, then the S bytes: the
 *           raw bytes compressed with zstd (one frame)
 *   u32 0   (no more blocks)
 *   index   per block: u64 its offset, u16 its first id's length, the id;
 *           then u32 CRC32C of the index
 *   footer  u64 first seq, u64 last seq, u64 next slice id, u64 records,
 *           u64 records flagged done, u32 level, u16 first id length,
 *           u16 last id length, u64 index offset, u32 index entries,
 *           u32 index bytes (CRC included), the two ids
 *   u32 footer length, u32 CRC32C of the footer, "SKLRUNEN"
 * The footer is read first (the file's last 16 bytes say where it is), so
 * a lookup outside [first id, last id] opens nothing; a lookup that has to
 * start afresh reads the index and goes straight to the block that may
 * hold its id, so a listing that starts deep in the key space (an
 * incremental poll) does not read the ledger from its start.
 * Records, each front-coded against the one before it in the same block
 * (the first against nothing), so that keys listed in order, which share
 * long prefixes, cost little:
 *   varint id bytes shared, varint id bytes added, the added bytes,
 *   varint version bytes shared, varint version bytes added, the bytes,
 *   varint size, varint offset (both zigzag: a size may be -1), varint flags
 * A block's raw bytes hold its records in three columns, so that alike
 * bytes sit together for zstd: varint length M of the first, varint
 * length I of the second; then every record's varints (M bytes); the id
 * bytes each adds (I bytes); the version bytes each adds (the rest). In
 * a version 1 run the raw bytes are the records one after another.
 * A run's seqs say which flushes it holds: a flush is one seq, a merge
 * covers its inputs' range. Where two runs hold one id, the run with the
 * higher last seq holds the newer record.
 */
#ifndef SK_LEDGER_RUN_H
#define SK_LEDGER_RUN_H

#include <stdint.h>
#include <stdio.h>

#include <zstd.h>

#include "base/common.h"
#include "state/unitrec_impl.h"

#define SK_RUN_ID_MAX 65535u

typedef struct sk_run_meta {
    uint64_t lo, hi;        /* seqs held */
    uint64_t next_slice_id; /* the ledger's when the run was written */
    uint64_t count, done;   /* records; records flagged done */
    uint32_t level;
    uint64_t index_off;           /* where the block index starts */
    uint32_t index_n, index_len;  /* its entries; its bytes with the CRC */
    char *first, *last; /* ids, NULL in an empty run; owned */
} sk_run_meta;

/* Reads a run in order. The current record's id and version point into
 * the cursor, valid until the next step. */
typedef struct sk_run_cursor {
    FILE *f;
    const char *path; /* borrowed */
    ZSTD_DCtx *dctx;  /* borrowed */
    uint8_t *stored, *raw;
    size_t stored_cap, raw_cap;
    size_t raw_len;
    /* Where the block's next varint, id bytes and version bytes are, and
     * where each column ends (a v1 block: all in one, at pos). */
    size_t pos, ipos, vpos, mend, iend, vend;
    int columns;                     /* the run is of version 2 */
    uint32_t left_in_block, in_block; /* records left; in the block */
    uint64_t read; /* records stepped over */
    int valid;     /* rec holds a record */
    int ended;     /* past the last record */
    sk_unit_rec rec;
    size_t id_cap, ver_cap;
} sk_run_cursor;

/* Read the header of the run at path into *m (caller frees with
 * sk_run_meta_free). */
int sk_run_read_meta(const char *path, sk_run_meta *m);
void sk_run_meta_free(sk_run_meta *m);

/* Position c before the first record of the run at path. */
int sk_run_cursor_open(sk_run_cursor *c, const char *path, ZSTD_DCtx *dctx);
/* Position c (open or not) so that the next step gives the first record
 * >= id, using the run's block index (m: the run's footer). */
int sk_run_cursor_seek(sk_run_cursor *c, const char *path,
                       const sk_run_meta *m, ZSTD_DCtx *dctx,
                       const char *id);
/* Next record into c->rec (c->valid), or c->ended. */
int sk_run_cursor_step(sk_run_cursor *c);
void sk_run_cursor_close(sk_run_cursor *c);
/* Close and free the cursor's buffers; it may be opened again. */
void sk_run_cursor_free(sk_run_cursor *c);

/* Writes a run: records must come in strictly ascending id order. */
typedef struct sk_run_writer {
    int fd;
    char tmp[4096], path[4096];
    ZSTD_CCtx *cctx; /* owned */
    skippr_buf raw;        /* the block's numbers column (varints) */
    skippr_buf ids, vers;  /* its id and version bytes columns */
    skippr_buf block;      /* the columns joined, to compress */
    skippr_buf stored;
    skippr_buf index; /* the block index, written before the footer */
    uint64_t off; /* bytes written so far */
    sk_run_meta meta;
    uint32_t in_block;
    char *prev_id, *prev_ver; /* the previous record in the block; owned */
    size_t prev_id_len, prev_ver_len, prev_id_cap, prev_ver_cap;
} sk_run_writer;

/* Start writing path (through path.tmp). */
int sk_run_writer_open(sk_run_writer *w, const char *path, uint64_t lo,
                       uint64_t hi, uint32_t level, uint64_t next_slice_id);
int sk_run_writer_add(sk_run_writer *w, const sk_unit_rec *r);
/* Finish: header, fsync, rename into place (the folder fsynced). */
int sk_run_writer_finish(sk_run_writer *w);
/* Free everything; removes the temp file unless finished. */
void sk_run_writer_close(sk_run_writer *w);

#endif
