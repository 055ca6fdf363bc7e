/* The state's struct: private to runtime/state/ (and its unit tests).
 * The layers above use state.h's functions (view.c for reading). */
#ifndef SK_STATE_IMPL_H
#define SK_STATE_IMPL_H

#include "state/types.h"

struct sk_slice {
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
};

struct sk_state {
    char *dir;
    int lock_fd;
    char state_id[17];
    sk_wal *wal;
    sk_ledger *ledger;
    sk_map open_by_key; /* key (kind-prefixed) -> OPEN slice */
    sk_slice **live;    /* OPEN and SEALED slices */
    size_t nlive, live_cap;
    uint64_t next_slice_id;
    uint64_t open_block_bytes; /* record bytes held in open blocks */
    uint64_t open_block_cap;   /* memory allocated for open blocks */
    sk_bufpool pool;           /* open blocks' buffers come and go here;
                                * its limit (0 at open: no reuse) is the
                                * pipeline's memory_budget */
    uint64_t block_bytes;      /* a block is written out at this size */
    int readonly;
    int zstd_level;            /* > 0: blocks written as BLOCKZ frames */
    struct ZSTD_CCtx_s *zctx;  /* created on first use */
    skippr_buf zbuf;               /* compressed block */
    skippr_buf ident;              /* a tagged slice's map key, to look up */
    sk_grow_config grow;
    uint64_t stage_tag;        /* the next staging piece's tag: random at
                                * open, then counting */
    int grow_unsynced;         /* puts since the caller last synced the
                                * sink (sk_state_sink_synced) */
    /* Streamed slices whose SLICE frame was durable but never committed
     * (a crash): the pipeline removes their growing objects, then calls
     * sk_state_orphans_clear(). */
    sk_slice **orphans;
    size_t norphans;
    struct sk_remote *remote; /* the store's copy (remote.h); not owned */
};

#endif
