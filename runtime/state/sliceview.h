/* Reading a slice (sliceview.c): the layers above read a slice through
 * these and never its struct, which is the state layer's (state_impl.h).
 * Pointers are views, valid while the slice lives (until it is done or
 * forgotten) and, for its buffer and notes, until its next append or put.
 * Thread: any that may read the slice (as sk_state_foreach_record).
 */
#ifndef SK_STATE_SLICEVIEW_H
#define SK_STATE_SLICEVIEW_H

#include <stddef.h>
#include <stdint.h>

#include "state/types.h"

/* Its identity: id, partition key (NUL-ended; *len bytes of it), tag
 * (form, header, XML root), kind (SK_SLICE_DATA or _DEAD), and when it
 * was opened (unix seconds). */
uint64_t sk_slice_id(const sk_slice *s);
const char *sk_slice_key(const sk_slice *s);
size_t sk_slice_key_len(const sk_slice *s);
const sk_slice_tag *sk_slice_tag_of(const sk_slice *s);
uint8_t sk_slice_kind_of(const sk_slice *s);
int64_t sk_slice_opened_at(const sk_slice *s);

/* Where it is (open, sealed, done); records appended (a dead-letter pair
 * counts once) and their bytes; whether it was live when the state was
 * opened (replay). */
sk_slice_state sk_slice_state_of(const sk_slice *s);
uint64_t sk_slice_records(const sk_slice *s);
uint64_t sk_slice_bytes(const sk_slice *s);
int sk_slice_recovered(const sk_slice *s);

/* Once sealed: its object's key (NULL before), bytes and CRC32C. */
const char *sk_slice_object_key(const sk_slice *s);
uint64_t sk_slice_object_bytes(const sk_slice *s);
uint32_t sk_slice_object_crc(const sk_slice *s);

/* A streamed slice (its object grows in the sink): whether it is one; of
 * its object's bytes, those in the sink's object or parts (pushed), then
 * those in staging pieces (staged), then those in TAIL frames (walled);
 * whether it may have staging pieces to clear; the bytes its buffer holds
 * (*len of them), from object offset sk_slice_buffer_at; the sink's notes
 * of its parts (*len bytes). */
int sk_slice_streamed(const sk_slice *s);
uint64_t sk_slice_pushed(const sk_slice *s);
uint64_t sk_slice_staged(const sk_slice *s);
uint64_t sk_slice_walled(const sk_slice *s);
int sk_slice_staged_ever(const sk_slice *s);
const uint8_t *sk_slice_buffer(const sk_slice *s, size_t *len);
uint64_t sk_slice_buffer_at(const sk_slice *s);
const char *sk_slice_notes(const sk_slice *s, size_t *len);

#endif
