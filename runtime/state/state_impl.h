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
/* Give s's open-block buffer back; it must be empty (state.c). */
void st_release_block(sk_state *st, sk_slice *s);
/* Streamed slices (grow.c): append object bytes; put the buffer to the
 * sink; make new ones' SLICE frames durable; the STREAM frame of a
 * commit. */
int st_append_streamed(sk_state *st, sk_slice *s, const void *rec,
                       size_t len);
int st_push_block(sk_state *st, sk_slice *s);
void st_pushed(sk_state *st, sk_slice *s);
int st_push_all(sk_state *st);
int st_announce_streams(sk_state *st);
int st_record_streams(sk_state *st);
/* Replay st's WAL into its live slices (replay.c). */
int st_replay(sk_state *st);

#endif
