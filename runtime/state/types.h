/* The state's structs: a slice (its blocks, tails, staging pieces, growing
 * object), the settings by which slices grow in a sink, and the state
 * itself. Types only; state.h says what each field means to the protocol,
 * slice.c, streamed.c, replay.c and state.c fill them. */
#ifndef SK_STATE_TYPES_H
#define SK_STATE_TYPES_H

#include <stddef.h>
#include <stdint.h>

#include "base/bufpool.h"
#include "base/common.h"
#include "base/map.h"
#include "state/ledger.h"
#include "state/wal.h"

/* A STREAM frame's entry: n, sink bytes, all bytes, records, crc. */
#define SK_STREAM_ENTRY 36
#define SK_NOTES_MAX (4u << 20) /* grow notes of one slice */

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

/* What a data slice's records are. Slices of one partition in another
 * form, or under another CSV header or XML root, are other slices with
 * objects of their own. The values are written in the WAL (wal.c). */
typedef enum sk_slice_form {
    SK_FORM_LINES = 0,     /* JSON records, one a line: most slices */
    SK_FORM_MULTILINE = 1, /* JSON records that span lines (.json) */
    SK_FORM_CSV = 2,       /* rows under one CSV header */
    SK_FORM_XML = 3        /* elements under one XML root */
} sk_slice_form;
#define SK_SLICE_ROOT_MAX 255 /* an XML root's name, in bytes */

/* A data slice's identity besides its partition. */
typedef struct sk_slice_tag {
    sk_slice_form form;
    uint64_t header_id; /* CSV: the header row's id; XML: the prolog's */
    const char *root;   /* XML: the root element's name (not NUL-ended;
                         * in a slice, bytes the slice owns) */
    size_t root_len;
} sk_slice_tag;

/* A slice (state.h): its fields are the state layer's (state_impl.h);
 * the layers above read it through state.h's sk_slice_* functions. */
typedef struct sk_slice sk_slice;

/* How slices grow in the sink (sk_state_set_grow): settings the pipeline
 * gives before any append. The state never calls the sink: it says when
 * bytes are due (streamed.h) and the pipeline moves them. */
typedef struct sk_grow_config {
    /* The forms (bit 1u << SK_FORM_*) whose new DATA slices stream; 0:
     * none, every slice lives in the WAL. A slice whose tag names an XML
     * root never streams: its object ends with the root's close tag,
     * which only sealing writes. */
    uint32_t stream_forms;
    /* 0: a put is durable at the caller's next sync of the sink (the
     * File sink; streamed.h, sk_state_sink_synced). Else each put is one
     * part, durable when it returns, of at least this many bytes but the
     * last; the caller appends the sink's note of it to s->notes. */
    uint64_t part_bytes;
    /* Parted slices' tails may be kept as staging pieces in the sink. */
    int stages;
    /* With stages: a commit's tails go to staging pieces instead of TAIL
     * frames when the WAL would grow past half of this (0: never). */
    uint64_t wal_budget;
} sk_grow_config;

/* One staging piece of a parted slice: object bytes [off, off + len),
 * stored in the sink under tag. */
typedef struct sk_stage_piece {
    uint64_t off, len, tag;
} sk_stage_piece;

/* The state (state.h): its fields are the state layer's (state_impl.h);
 * the layers above read it through state.h's functions. */
typedef struct sk_state sk_state;

#endif
