/* Streamed slices (streamed.c): slices whose object grows in the sink while
 * they are open; parted ones (S3 multipart) with TAIL frames and staging
 * pieces. state.c calls the st_ functions; the pipeline the sk_state_
 * ones (through state.h). */
#ifndef SK_STATE_STREAMED_H
#define SK_STATE_STREAMED_H

#include <stddef.h>
#include <stdint.h>

#include "base/common.h"
#include "state/tails.h"
#include "state/types.h"

/* Streamed slices (streamed.c): append object bytes; put the buffer to the
 * sink; make new ones' SLICE frames durable; the STREAM frame of a
 * commit. */
int st_append_streamed(sk_state *st, sk_slice *s, const void *rec,
                       size_t len);
void st_pushed(sk_state *st, sk_slice *s, int keep);
int st_announce_streams(sk_state *st);
int st_record_streams(sk_state *st);
/* Parted slices (streamed.c): whether s is one. */
int st_parted(const sk_state *st, const sk_slice *s);

/* The OPEN slice of partition name[0..nlen), tag (NULL: SK_FORM_LINES)
 * and kind, created if needed (its SLICE frame is written with its first
 * block). hash: sk_hash_fast of the name (a tagged slice's is the
 * state's). NULL on allocation failure. */
sk_slice *sk_state_slice(sk_state *st, const char *name, size_t nlen,
                         uint64_t hash, const sk_slice_tag *tag,
                         uint8_t kind);
/* Append one record to an OPEN slice: SKIPPR_OK, a failure, or for a
 * streamed slice whose buffer is full one of these. The caller then puts
 * the buffer (sk_state_put_len() bytes of s->open_block, after
 * sk_state_spilled / sk_state_unspill_*) and calls sk_state_pushed_one. */
enum {
    SK_STATE_PUT_FIRST = 1, /* not appended: put, then append again */
    SK_STATE_PUT_NOW = 2    /* appended; put now */
};
int sk_state_append(sk_state *st, sk_slice *s, const void *rec, size_t len);
/* The same without the object CRC: the caller checksummed the records (each
 * followed by a newline) elsewhere and folds that in with
 * sk_state_fold_crc() after appending them, before any other append; xpow
 * is sk_crc32c_xpow() of those output bytes' count. */
int sk_state_append_raw(sk_state *st, sk_slice *s, const void *rec,
                        size_t len);
void sk_state_fold_crc(sk_slice *s, uint32_t crc, uint32_t xpow);
/* A flush of streamed slices is the caller's, in this order (the pipeline's
 * pl_commit; docs/EXACTLY_ONCE.md):
 *   sk_state_announce       new streamed slices' SLICE frames, one fsync
 *   sk_state_due_puts       the slices whose buffers go to the sink now;
 *                           *v is the caller's (sk_free); spilled ones
 *                           the caller makes whole (below)
 *   (the caller puts sk_state_put_len() bytes of each s->open_block, any
 *   slice from one thread at a time)
 *   sk_state_pushed         they are in the sink (only after all went)
 *   sk_state_flush_blocks   the rest: BLOCK frames
 *   sk_state_sink_unsynced  non-zero: the sink holds puts not yet synced;
 *   (the caller syncs the sink)
 *   sk_state_sink_synced
 *   sk_state_tails_to_stage tails over the disk budget, which the caller
 *                           stages (below)
 *   sk_state_commit         records what the sink holds, then COMMIT
 * A commit whose puts were not synced fails (SKIPPR_INVAL). */
int sk_state_announce(sk_state *st);
int sk_state_due_puts(sk_state *st, sk_slice ***v, size_t *n);
void sk_state_pushed(sk_state *st, sk_slice *const *v, size_t n);
/* One slice's put that an append asked for went to the sink. */
void sk_state_pushed_one(sk_state *st, sk_slice *s);
int sk_state_sink_unsynced(const sk_state *st);
void sk_state_sink_synced(sk_state *st);
/* Write every open block as a BLOCK frame (not yet durable). release: also
 * give their buffers back (memory pressure); else they are kept for reuse. */
int sk_state_flush_blocks(sk_state *st, int release);
/* Group commit: flush blocks, COMMIT frame with dirty units, fsync. With
 * streamed slices, after the caller's puts and sync (above). */
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

/* Release the memory of parted slices whose buffered bytes are all in
 * TAIL frames (after a commit); they are read back for the next part. */
void sk_state_spill(sk_state *st);

/* A spilled parted slice (its buffer no longer starts at s->pushed) is
 * made whole before a put by the caller: while its first staging piece
 * can become a part inside the sink (sk_state_copy_next: 1 and *p), the
 * sink makes it one and sk_state_copied says so; if it is still spilled,
 * sk_state_unspill_begin gives an empty buffer b, the caller appends the
 * bytes [s->pushed, s->mem_off) (staging pieces from the sink, then
 * sk_state_read_tail), and sk_state_unspill_end(rc: the caller's status)
 * makes b the slice's buffer, or gives it back. */
int sk_state_spilled(const sk_state *st, const sk_slice *s);
int sk_state_copy_next(const sk_slice *s, sk_stage_piece *p);
void sk_state_copied(sk_state *st, sk_slice *s);
int sk_state_unspill_begin(sk_state *st, const sk_slice *s, skippr_buf *b);
int sk_state_unspill_end(sk_state *st, sk_slice *s, skippr_buf *b, int rc);

/* Staging pieces. Before a commit, the parted slices whose new tail would
 * not fit the WAL's disk budget (*v is the caller's, sk_free); their bytes
 * after their pieces, read into out (sk_state_read_unstaged), go to the
 * sink as a staging piece under a tag from sk_state_next_stage_tag, and
 * sk_state_staged records it: a STAGE frame, durable with the next
 * commit; their TAIL frames are retired. */
int sk_state_tails_to_stage(sk_state *st, sk_slice ***v, size_t *n);
int sk_state_read_unstaged(sk_state *st, const sk_slice *s, skippr_buf *out,
                           skippr_buf *scratch);
int sk_state_staged(sk_state *st, sk_slice *s, uint64_t tag);

/* How many of s's buffered bytes a put hands over: all of them, or for a
 * parted slice its whole parts. */
uint64_t sk_state_put_len(const sk_state *st, const sk_slice *s);

#endif
