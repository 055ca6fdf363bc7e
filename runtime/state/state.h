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

#include "base/common.h"
#include "state/sliceview.h" /* reading a slice: sk_slice_id, ... */
#include "state/streamed.h" /* streamed slices: sk_state_spill, _read_tail, ... */
#include "state/types.h"

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

/* Mark a SEALED slice DONE and forget it (a parted one's buffer, kept
 * for its finish, goes with it). */
int sk_state_done(sk_state *st, sk_slice *s);
/* Durable commit, then move finished units from memory to the ledger
 * file. With streamed slices, commit first the caller's way (streamed.h). */
int sk_state_compact_ledger(sk_state *st);
/* Compact the ledger and delete WAL segments no live slice needs. */
int sk_state_gc(sk_state *st);

/* Call fn for each record of a slice's durable blocks, in order. */
typedef int (*sk_record_fn)(void *ud, const uint8_t *rec, size_t len);
int sk_state_foreach_record(sk_state *st, const sk_slice *s, skippr_buf *scratch,
                            sk_record_fn fn, void *ud);

/* Reading the state (view.c): the layers above read these and never
 * the struct. Pointers are views, valid while the state is open (a
 * slice: until it is done). */
const char *sk_state_dir(const sk_state *st);
const char *sk_state_id(const sk_state *st); /* 16 hex digits */
sk_ledger *sk_state_ledger(const sk_state *st);
sk_wal *sk_state_wal(const sk_state *st);
/* The OPEN and SEALED slices: n of them, the ith. */
size_t sk_state_nlive(const sk_state *st);
sk_slice *sk_state_slice_at(const sk_state *st, size_t i);
/* Streamed slices a crash left before their first commit (see
 * sk_state_orphans_clear). */
size_t sk_state_norphans(const sk_state *st);
sk_slice *sk_state_orphan_at(const sk_state *st, size_t i);
/* Non-zero once the state made a slice (it was used). */
int sk_state_made_slices(const sk_state *st);
/* Memory held by open blocks, allocated. */
uint64_t sk_state_block_memory(const sk_state *st);
/* Settings: WAL blocks compressed at zstd_level (0: plain); buffers kept
 * for reuse up to memory_budget bytes. */
void sk_state_tune(sk_state *st, int zstd_level, uint64_t memory_budget);
/* Give back the idle buffers kept for reuse. */
void sk_state_release_idle(sk_state *st);
/* Slices that grow in the sink: the settings (copied), and what they say. */
void sk_state_set_grow(sk_state *st, const sk_grow_config *g);
uint64_t sk_state_part_bytes(const sk_state *st); /* 0: not by parts */
int sk_state_stages(const sk_state *st);  /* tails go to staging pieces */
/* The tag of the next staging piece (each one new). */
uint64_t sk_state_next_stage_tag(sk_state *st);

#endif
