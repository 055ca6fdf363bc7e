/* Private to state/ (state.c, replay.c): the slice and live-list helpers
 * that writing and recovery share. state.h is the contract.
 */
#ifndef SK_STATE_IMPL_H
#define SK_STATE_IMPL_H

#include "state/state.h"

/* A new slice; NULL on allocation failure. Owned by the caller until it is
 * added to the live list (st_live_add), then by the state. */
sk_slice *st_slice_new(uint64_t id, const char *key, size_t klen,
                       uint8_t kind, int64_t opened_at);
void st_slice_free(sk_slice *s);
int st_live_add(sk_state *st, sk_slice *s);
void st_live_remove(sk_state *st, sk_slice *s);
sk_slice *st_live_find(const sk_state *st, uint64_t id);
int st_add_block(sk_slice *s, sk_wal_pos pos);
/* Write s's SLICE frame; a DONE frame for slice id (state.c). */
int st_announce(sk_state *st, sk_slice *s);
int st_write_done(sk_state *st, uint64_t id);
/* Give s's open-block buffer back; it must be empty. Grow it to at least
 * cap bytes, keeping its bytes. Both through st->pool, keeping
 * open_block_cap (state.c). */
void st_release_block(sk_state *st, sk_slice *s);
int st_block_reserve(sk_state *st, sk_slice *s, size_t cap);
/* Streamed slices (grow.c): append object bytes; put the buffer to the
 * sink; make new ones' SLICE frames durable; the STREAM frame of a
 * commit. */
int st_append_streamed(sk_state *st, sk_slice *s, const void *rec,
                       size_t len);
int st_push_block(sk_state *st, sk_slice *s, int keep);
void st_pushed(sk_state *st, sk_slice *s, int keep);
int st_push_all(sk_state *st);
int st_announce_streams(sk_state *st);
int st_record_streams(sk_state *st);
/* Parted slices (grow.c): whether s is one; record a TAIL frame at pos
 * holding object bytes from off; retire tails before upto. */
#define SK_STREAM_ENTRY 36 /* n, sink bytes, all bytes, records, crc */
#define SK_NOTES_MAX (4u << 20) /* grow notes of one slice */
int st_parted(const sk_state *st, const sk_slice *s);
int st_add_tail(sk_slice *s, sk_wal_pos pos, uint64_t off);
void st_drop_tails(sk_slice *s, uint64_t upto);
/* A staging piece of s at off; retire those before upto (grow.c). */
int st_add_stage(sk_slice *s, uint64_t off, uint64_t len, uint64_t tag);
void st_drop_stages(sk_slice *s, uint64_t upto);
/* Replay st's WAL into its live slices (replay.c). */
int st_replay(sk_state *st);

#endif
