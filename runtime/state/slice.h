/* A slice and the live list (slice.c): made, found, freed; its blocks,
 * its open-block buffer through the state's pool, and its SLICE and DONE
 * frames. What writing (state.c, streamed.c) and recovery (replay.c) share. */
#ifndef SK_STATE_SLICE_H
#define SK_STATE_SLICE_H

#include <stddef.h>
#include <stdint.h>

#include "state/types.h"

/* A new slice of partition name[0..nlen) with tag (NULL: SK_FORM_LINES,
 * as for dead letters); NULL on allocation failure. Owned by the caller
 * until it is added to the live list (st_live_add), then by the state. */
sk_slice *st_slice_new(uint64_t id, const char *name, size_t nlen,
                       const sk_slice_tag *tag, uint8_t kind,
                       int64_t opened_at);
/* Give s its name and tag (copied; the old ones freed). */
int st_slice_name(sk_slice *s, const char *name, size_t nlen,
                  const sk_slice_tag *tag);
/* The open-slice map's key of name with tag, built in st->ident: *ident
 * (borrowed until the next call; NULL on allocation failure) and *len;
 * returns its hash. */
uint64_t st_ident(sk_state *st, const char *name, size_t nlen,
                  const sk_slice_tag *tag, const char **ident, size_t *len);
/* A key as version 1 of the SLICE frame wrote it (v1tag.c): the
 * partition, then for a tagged slice a NUL and the tag as text. Its
 * partition's length into *nlen and its tag into *t (whose root points
 * into key). 0, or -1 when the text is none of the forms written then. */
int st_v1_key(const char *key, size_t klen, size_t *nlen, sk_slice_tag *t);
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

#endif
