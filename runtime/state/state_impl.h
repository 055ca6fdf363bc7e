/* The state's struct: private to runtime/state/ (and its unit tests).
 * The layers above use state.h's functions (view.c for reading). */
#ifndef SK_STATE_IMPL_H
#define SK_STATE_IMPL_H

#include "state/types.h"

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
