/* A parted slice's TAIL frames, staging pieces and the sink's notes of
 * its parts (tails.c). */
#ifndef SK_STATE_TAILS_H
#define SK_STATE_TAILS_H

#include <stddef.h>
#include <stdint.h>

#include "base/common.h"
#include "state/types.h"

/* Record a TAIL frame of s at pos holding object bytes from off; retire
 * tails before upto. */
int st_add_tail(sk_slice *s, sk_wal_pos pos, uint64_t off);
void st_drop_tails(sk_slice *s, uint64_t upto);
/* A staging piece of s at off, len bytes, stored under tag; retire those
 * before upto. */
int st_add_stage(sk_slice *s, uint64_t off, uint64_t len, uint64_t tag);
void st_drop_stages(sk_slice *s, uint64_t upto);

/* Keep the sink's note of the part it just added to open slice s's
 * object (the next commit records it); SKIPPR_RANGE past SK_NOTES_MAX. */
int sk_state_note(sk_slice *s, const char *note, size_t n);
/* Every streamed slice live now may have staging pieces the WAL does not
 * name (a piece is put before its STAGE frame): each lists its staging
 * folder when it is done. */
void sk_state_assume_pieces(sk_state *st);

/* s's staging pieces, in order of object offset from s->pushed. */
size_t sk_state_npieces(const sk_slice *s);
sk_stage_piece sk_state_piece(const sk_slice *s, size_t i);

/* Append a parted slice's bytes [from, upto) that are in TAIL frames to
 * out (pushed + staged <= from <= upto <= pushed + staged + walled; the
 * staging pieces before them are the sink's to read), reading frames into
 * scratch. Any thread, for a slice that does not change meanwhile (as
 * sk_state_foreach_record). */
int sk_state_read_tail(sk_state *st, const sk_slice *s, uint64_t from,
                       uint64_t upto, skippr_buf *out, skippr_buf *scratch);

#endif
