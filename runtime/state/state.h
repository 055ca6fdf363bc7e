/* Durable pipeline state: the state folder, its lock, the WAL-backed slice
 * buffer and the ledger. This is where exactly-once is kept.
 *
 * Folder: {state_dir}/{workspace}/{pipeline}/ holding
 *   lock       flock()ed while a process runs the pipeline; holds its pid
 *   state_id   16 random hex digits made once; part of every object name, so
 *              a lost state folder can never overwrite earlier output
 *   ledger     compacted unit records (ledger.h)
 *   wal/       WAL segments (wal.h)
 *
 * Slices. A slice collects the records of one partition key. Its records
 * live in WAL BLOCK frames; memory holds only each slice's open block. A
 * slice is OPEN (growing), SEALED (its object key and bytes are fixed and
 * durable; it is being uploaded) or DONE (the sink confirmed it).
 *
 * Protocol (see docs/EXACTLY_ONCE.md):
 *   append  records go to the slice's open block; full blocks become BLOCK
 *           frames (buffered, not yet durable)
 *   commit  all open blocks are written, then one COMMIT frame with the
 *           progress of every unit touched since the last commit, then one
 *           fsync. Only now is progress acknowledged anywhere.
 *   seal    after a commit: SEAL frame with the final object key, size and
 *           CRC32C, then fsync, before any byte is uploaded
 *   done    after the sink confirms: DONE frame (made durable by the next
 *           sync; losing it only causes an identical re-upload)
 * Recovery replays the WAL: units resume at their committed offsets, open
 * slices continue, sealed slices are uploaded again to the same key with
 * the same bytes.
 *
 * Thread: the pipeline thread owns the state: it alone opens, appends,
 * commits, seals, records DONE and closes. The one exception: while the
 * pipeline thread waits in upload_sealed() (pipeline/seal.c), upload
 * threads read sealed slices with sk_state_foreach_record(), each with its
 * own scratch buffer. A sealed slice does not change, and sk_wal_read()
 * opens the segment for each read and reads it with pread(), so those
 * reads share no descriptor, buffer or field with the pipeline thread,
 * which is blocked meanwhile anyway.
 */
#ifndef SK_STATE_H
#define SK_STATE_H

#include <stdint.h>

#include "base/bufpool.h"
#include "base/common.h"
#include "state/ledger.h"
#include "base/map.h"
#include "state/wal.h"

typedef enum sk_slice_state {
    SK_SLICE_OPEN,
    SK_SLICE_SEALED,
    SK_SLICE_DONE
} sk_slice_state;

typedef enum sk_slice_kind {
    SK_SLICE_DATA = 0,
    SK_SLICE_DEAD = 1 /* dead letters: records come in (meta, bytes) pairs */
} sk_slice_kind;

/* In a SLICE frame's kind byte: the slice streams into the sink; it has
 * had staging pieces. */
#define SK_SLICE_STREAMED 0x80u
#define SK_SLICE_STAGED 0x40u

typedef struct sk_slice {
    uint64_t id;
    char *key; /* partition key: "ns/p_x=v/p_year=2021/..." or "_errors" */
    size_t key_len;
    size_t name_len; /* key[0..name_len) names the object; after it, a NUL
                      * and a tag that sets this slice apart from others
                      * of the same name (pipeline/append.c), or nothing */
    uint64_t key_hash;
    uint8_t kind;
    int64_t opened_at; /* unix seconds */
    sk_slice_state state;
    sk_wal_pos *blocks;
    size_t nblocks, blocks_cap;
    uint64_t first_seg; /* oldest WAL segment holding a frame of this slice */
    uint64_t records;   /* records appended (pairs count once for DEAD) */
    uint64_t bytes;     /* record bytes appended */
    int announced;      /* SLICE frame written */
    int ghost;          /* replay only: blocks seen, start collected */
    sk_buf open_block;  /* [u32 len][bytes]... not yet in the WAL */
    uint32_t open_nrec;
    uint32_t out_crc;   /* CRC32C of the object so far (DATA slices) */
    int crc_known;      /* out_crc covers every record (not after replay) */
    /* Streamed slices (sk_grow_hooks): the object grows in the sink as
     * records come, so the WAL holds none of its bytes; open_block then
     * holds object bytes (each record and its newline) not yet put. */
    int streamed;
    int durable_announced; /* its SLICE frame is durable: the sink may hold
                            * a growing object for it */
    int restate;           /* its length goes into the next STREAM frame
                            * even when unchanged (a new segment) */
    uint64_t pushed;       /* object bytes handed to the sink */
    uint64_t durable_len;  /* object bytes a COMMIT recorded as durable */
    void *handle;          /* the sink's growing object; the pipeline's */
    /* Parted slices (sk_grow_hooks.part_bytes > 0: S3 multipart): the
     * object grows a part at a time. Object bytes [0, pushed) are in the
     * sink's parts, the next `staged` in staging pieces (stage_off[i],
     * stage_len[i], contiguous), the next `walled` in TAIL frames
     * (blocks, each at object offset tail_off[i]), and open_block holds
     * [mem_off, mem_off + open_block.len): all of the tail, or after a
     * spill only what came since. */
    uint64_t staged;
    uint64_t *stage_off, *stage_len, *stage_tag;
    size_t nstaged, stage_cap;
    int staged_ever;       /* staging pieces to clear when it is done */
    int recovered;         /* live when the state was opened (replay) */
    uint64_t walled;
    uint64_t mem_off;
    uint64_t *tail_off;
    size_t tail_cap;
    uint64_t durable_total; /* pushed + walled at the last COMMIT */
    sk_buf notes;          /* the sink's notes of its parts (grow_note) */
    size_t notes_rec;      /* of which in the WAL */
    int notes_replace;     /* the next NOTE frame restates them all */
    uint64_t announce_seg; /* segment of its latest SLICE frame */
    /* The pipeline's (pipeline/seal.c): when event time makes the slice
     * due (0: not yet known; INT64_MAX: never), and whether it opened
     * after its time bucket had been sealed (late records). */
    int64_t seal_at;
    int late;
    /* set when sealed */
    char *object_key;
    uint64_t object_bytes;
    uint32_t object_crc;
} sk_slice;

/* How streamed slices reach the sink. The pipeline sets these before any
 * append; without them (wants NULL) every slice lives in the WAL. */
typedef struct sk_grow_hooks {
    void *ud;
    /* Non-zero: the new DATA slice s streams. */
    int (*wants)(void *ud, const sk_slice *s);
    /* Append n object bytes to s's growing object (made on first use, or
     * reopened at s->durable_len after a restart). */
    int (*put)(void *ud, sk_slice *s, const void *p, size_t n);
    /* Make every put so far durable. */
    int (*sync)(void *ud);
    /* Optional: put each of the n slices' whole buffer (open_block), as
     * put() would, perhaps in parallel; the state then marks them put. */
    int (*put_all)(void *ud, sk_slice **v, size_t n);
    /* 0: a put is durable at the next sync() (the File sink). Else each
     * put is one part, durable when it returns, of at least this many
     * bytes but the last; put() appends the sink's note of it to
     * s->notes. */
    uint64_t part_bytes;
    /* Parted slices' staging pieces: read the len bytes of s's piece at
     * object offset off into buf (any thread that may use s's sink). */
    int (*fetch)(void *ud, const sk_slice *s, uint64_t off, uint64_t tag,
                 void *buf, size_t len);
    /* ... and store n bytes at off of s's object as a staging piece. */
    int (*stage)(void *ud, sk_slice *s, uint64_t off, uint64_t tag,
                 const void *p, size_t n);
    /* Optional: make s's first staging piece (at s->pushed, of at least
     * SKIPPR_COPY_MIN_BYTES) its next part inside the sink, without
     * reading it back; appends the sink's note to s->notes. */
    int (*copy)(void *ud, sk_slice *s);
    /* A commit writes a parted slice's tail as a staging piece instead of
     * TAIL frames when the WAL would grow past this (0: never). */
    uint64_t wal_budget;
} sk_grow_hooks;

typedef struct sk_state {
    char *dir;
    int lock_fd;
    char state_id[17];
    sk_wal *wal;
    sk_ledger *ledger;
    sk_map open_by_key; /* key (kind-prefixed) -> OPEN slice */
    sk_slice **live;    /* OPEN and SEALED slices */
    size_t nlive, live_cap;
    uint64_t next_slice_id;
    uint64_t open_block_bytes; /* record bytes held in open blocks */
    uint64_t open_block_cap;   /* memory allocated for open blocks */
    sk_bufpool pool;           /* open blocks' buffers come and go here;
                                * its limit (0 at open: no reuse) is the
                                * pipeline's memory_budget */
    uint64_t block_bytes;      /* a block is written out at this size */
    int readonly;
    int zstd_level;            /* > 0: blocks written as BLOCKZ frames */
    struct ZSTD_CCtx_s *zctx;  /* created on first use */
    sk_buf zbuf;               /* compressed block */
    sk_grow_hooks grow;
    uint64_t stage_tag;        /* the next staging piece's tag: random at
                                * open, then counting */
    int grow_unsynced;         /* puts since the last grow.sync() */
    /* Streamed slices whose SLICE frame was durable but never committed
     * (a crash): the pipeline removes their growing objects, then calls
     * sk_state_orphans_clear(). */
    sk_slice **orphans;
    size_t norphans;
    struct sk_remote *remote; /* the store's copy (remote.h); not owned */
} sk_state;

/* Whether a process holds the lock of the state folder dir (without taking
 * it). If so and pid is not NULL, the holder's pid as it wrote it (up to
 * cap - 1 bytes; "" if unreadable). */
int sk_state_in_use(const char *dir, char *pid, size_t cap);

/* Open the state of one pipeline, replaying its WAL. Unless readonly, takes
 * the lock first: if another process holds it, fails with SKIPPR_LOCKED and
 * a message naming the pid. Readonly opens neither lock nor repair (status).
 * With remote (skipprd_el_storage_mode: s3, its lease taken; not owned,
 * must outlive the state), the folder is first replaced by the store's
 * copy, or, when the store has none, stored there; from then on every
 * sync, run and mark goes there too.
 * Caller owns *out: sk_state_close(). */
int sk_state_open(const char *state_dir, const char *workspace,
                  const char *pipeline, int readonly, struct sk_remote *remote,
                  sk_state **out);
void sk_state_close(sk_state *st);
/* The state file name (in the folder: "listing_mark") was written, or
 * with removed taken away: the same in the remote, if any. */
int sk_state_file_changed(sk_state *st, const char *name, int removed);

/* The OPEN slice for key and kind, created if needed (its SLICE frame is
 * written with its first block). NULL on allocation failure. */
sk_slice *sk_state_slice(sk_state *st, const char *key, size_t klen,
                         uint64_t hash, uint8_t kind);
/* Append one record to an OPEN slice. */
int sk_state_append(sk_state *st, sk_slice *s, const void *rec, size_t len);
/* The same without the object CRC: the caller checksummed the records (each
 * followed by a newline) elsewhere and folds that in with
 * sk_state_fold_crc() after appending them, before any other append; xpow
 * is sk_crc32c_xpow() of those output bytes' count. */
int sk_state_append_raw(sk_state *st, sk_slice *s, const void *rec,
                        size_t len);
void sk_state_fold_crc(sk_slice *s, uint32_t crc, uint32_t xpow);
/* Write every open block as a BLOCK frame (not yet durable). release: also
 * give their buffers back (memory pressure); else they are kept for reuse. */
int sk_state_flush_blocks(sk_state *st, int release);
/* Group commit: flush blocks, COMMIT frame with dirty units, fsync. */
int sk_state_commit(sk_state *st);
/* durable 0: the same frames, but instead of waiting for fsync the disk
 * is only asked to start writing (sk_wal_writeback). Such a commit survives
 * a process crash (the page cache keeps it) but not a power loss, until the
 * next durable commit or sync: recovery then restarts at the last commit
 * that reached the disk, which is still exactly once, only later. Use it
 * for commits that nothing outside waits on; a source acknowledgement, a
 * seal or a stop needs a durable one. */
int sk_state_commit_as(sk_state *st, int durable);
/* Seal an OPEN slice: requires a commit since its last append (the caller
 * commits first). The object is the records, each with a newline, then
 * tail_len bytes of tail (an XML root's close tag; none: NULL, 0). Fixes
 * the object key, size and CRC and appends the SEAL
 * frame. The seal is durable only after the next sk_wal_sync(): sync once
 * after sealing a batch, and before writing any of it to the sink. */
int sk_state_seal(sk_state *st, sk_slice *s, const char *ext,
                  const void *tail, size_t tail_len);
/* The same for an object that is not the records and newlines (a
 * conversion): the caller measured its size and CRC32C. */
int sk_state_seal_as(sk_state *st, sk_slice *s, const char *ext,
                     uint64_t bytes, uint32_t crc);
/* The object key s gets when sealed: "{name}/apply-{state_id}-{id}{ext}".
 * Caller owns the string; NULL on allocation failure. */
char *sk_state_object_key(const sk_state *st, const sk_slice *s,
                          const char *ext);
/* Forget an OPEN streamed slice that holds no record (its growing object,
 * if any, already removed): a DONE frame, durable with the next sync. */
int sk_state_forget(sk_state *st, sk_slice *s);
/* Free the orphan list once their growing objects are gone. */
void sk_state_orphans_clear(sk_state *st);
/* Start a new WAL segment and restate every open streamed slice in it
 * (SLICE frame, then its length in the next commit), so that older
 * segments are not kept for them. */
int sk_state_rotate(sk_state *st);
/* Mark a SEALED slice DONE and forget it (a parted one's buffer, kept
 * for its finish, goes with it). */
int sk_state_done(sk_state *st, sk_slice *s);
/* Durable commit, then move finished units from memory to the ledger
 * file. */
int sk_state_compact_ledger(sk_state *st);
/* Compact the ledger and delete WAL segments no live slice needs. */
int sk_state_gc(sk_state *st);

/* Release the memory of parted slices whose buffered bytes are all in
 * TAIL frames (after a commit); they are read back for the next part. */
void sk_state_spill(sk_state *st);
/* Append a parted slice's bytes [from, upto) that are in staging pieces
 * and TAIL frames to out (pushed <= from <= upto <= pushed + staged +
 * walled), reading frames and pieces into scratch. Any thread, for a
 * slice that does not change meanwhile (as sk_state_foreach_record). */
int sk_state_read_tail(sk_state *st, const sk_slice *s, uint64_t from,
                       uint64_t upto, sk_buf *out, sk_buf *scratch);
/* The bytes of parted slice s in TAIL frames are now a staging piece (the
 * sink stored them, under tag, which st->stage_tag++ gave): a STAGE
 * frame, durable with the next commit; the TAIL frames are retired. */
int sk_state_staged(sk_state *st, sk_slice *s, uint64_t tag);
/* How many of s's buffered bytes a put hands over: all of them, or for a
 * parted slice its whole parts. */
uint64_t sk_state_put_len(const sk_state *st, const sk_slice *s);

/* Call fn for each record of a slice's durable blocks, in order. */
typedef int (*sk_record_fn)(void *ud, const uint8_t *rec, size_t len);
int sk_state_foreach_record(sk_state *st, const sk_slice *s, sk_buf *scratch,
                            sk_record_fn fn, void *ud);

#endif
