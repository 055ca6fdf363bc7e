/* Reading a slice: see sliceview.h. Owns: nothing (views into a slice). */
#include "state/sliceview.h"
#include "state/state_impl.h"

uint64_t sk_slice_id(const sk_slice *s)
{
    return s->id;
}

const char *sk_slice_key(const sk_slice *s)
{
    return s->key;
}

size_t sk_slice_key_len(const sk_slice *s)
{
    return s->key_len;
}

const sk_slice_tag *sk_slice_tag_of(const sk_slice *s)
{
    return &s->tag;
}

uint8_t sk_slice_kind_of(const sk_slice *s)
{
    return s->kind;
}

int64_t sk_slice_opened_at(const sk_slice *s)
{
    return s->opened_at;
}

sk_slice_state sk_slice_state_of(const sk_slice *s)
{
    return s->state;
}

uint64_t sk_slice_records(const sk_slice *s)
{
    return s->records;
}

uint64_t sk_slice_bytes(const sk_slice *s)
{
    return s->bytes;
}

int sk_slice_recovered(const sk_slice *s)
{
    return s->recovered;
}

const char *sk_slice_object_key(const sk_slice *s)
{
    return s->object_key;
}

uint64_t sk_slice_object_bytes(const sk_slice *s)
{
    return s->object_bytes;
}

uint32_t sk_slice_object_crc(const sk_slice *s)
{
    return s->object_crc;
}

int sk_slice_streamed(const sk_slice *s)
{
    return s->streamed;
}

uint64_t sk_slice_pushed(const sk_slice *s)
{
    return s->pushed;
}

uint64_t sk_slice_staged(const sk_slice *s)
{
    return s->staged;
}

uint64_t sk_slice_walled(const sk_slice *s)
{
    return s->walled;
}

int sk_slice_staged_ever(const sk_slice *s)
{
    return s->staged_ever;
}

const uint8_t *sk_slice_buffer(const sk_slice *s, size_t *len)
{
    *len = s->open_block.len;
    return s->open_block.data;
}

uint64_t sk_slice_buffer_at(const sk_slice *s)
{
    return s->mem_off;
}

const char *sk_slice_notes(const sk_slice *s, size_t *len)
{
    *len = s->notes.len;
    return (const char *)s->notes.data;
}
