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

typedef struct sk_slice {
    uint64_t id;
    char *key; /* partition: "ns/p_x=v/p_year=2021/..." or "_errors", the
                * object's name; NUL-ended. The same allocation goes on
                * with the open-slice map's key (slice.c), which the tag's
                * root points into. */
    size_t key_len;
    sk_slice_tag tag;
    size_t ident_len; /* the map's key: key[0..ident_len) */
    uint64_t key_hash; /* of the map's key */
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
    skippr_buf open_block;  /* [u32 len][bytes]... not yet in the WAL */
    uint32_t open_nrec;
    uint32_t out_crc;   /* CRC32C of the object so far (DATA slices) */
    int crc_known;      /* out_crc covers every record (not after replay) */
    /* Streamed slices (sk_grow_config): the object grows in the sink as
     * records come, so the WAL holds none of its bytes; open_block then
     * holds object bytes (each record and its newline) not yet put. */
    int streamed;
    int durable_announced; /* its SLICE frame is durable: the sink may hold
                            * a growing object for it */
    int restate;           /* its length goes into the next STREAM frame
                            * even when unchanged (a new segment) */
    uint64_t pushed;       /* object bytes handed to the sink */
    uint64_t durable_len;  /* object bytes a COMMIT recorded as durable */
    /* Parted slices (sk_grow_config.part_bytes > 0: S3 multipart): the
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
    skippr_buf notes;          /* the sink's notes of its parts (grow_note) */
    size_t notes_rec;      /* of which in the WAL */
    int notes_replace;     /* the next NOTE frame restates them all */
    uint64_t announce_seg; /* segment of its latest SLICE frame */
    /* set when sealed */
    char *object_key;
    uint64_t object_bytes;
    uint32_t object_crc;
} sk_slice;

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
