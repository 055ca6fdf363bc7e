/* Recovery's private parts: the replay's pending lists (frames that wait
 * for their COMMIT), shared by replay.c (what a COMMIT, SEAL or DONE
 * applies) and replaypend.c (each frame decoded into its pending list).
 * Nothing else includes it; replay.h is the contract. */
#ifndef SK_STATE_REPLAY_IMPL_H
#define SK_STATE_REPLAY_IMPL_H

#include <stddef.h>
#include <stdint.h>

#include "state/types.h"
#include "state/wal.h"

typedef struct pend_slice {
    uint64_t id;
    char *key; /* the partition */
    size_t klen;
    sk_slice_tag tag; /* its root in root */
    char *root;
    uint8_t kind;
    int64_t opened_at;
    uint64_t seg;
    int streamed;
    int staged;
} pend_slice;

typedef struct pend_stream {
    uint64_t id;
    uint64_t len, total, records;
    uint32_t crc;
} pend_stream;

typedef struct pend_block {
    uint64_t id;
    sk_wal_pos pos;
    uint64_t nrec, bytes;
    int tail;     /* a TAIL frame: bytes at object offset off */
    uint64_t off;
} pend_block;

typedef struct pend_stage {
    uint64_t id, off, len, tag;
} pend_stage;

typedef struct pend_note {
    uint64_t id;
    int replace;
    uint8_t *p;
    size_t n;
} pend_note;

typedef struct replay {
    sk_state *st;
    uint64_t seg;
    pend_slice *ps;
    size_t nps, ps_cap;
    pend_block *pb;
    size_t npb, pb_cap;
    pend_stream *pst;
    size_t npst, pst_cap;
    pend_note *pn;
    size_t npn, pn_cap;
    pend_stage *pg;
    size_t npg, pg_cap;
    sk_slice **orph; /* streamed slices announced, never committed */
    size_t norph, orph_cap;
    uint64_t max_id;
    size_t v1; /* SLICE_V1 frames read: an older state, upgraded */
} replay;

static inline int st_rd_str(const uint8_t **p, const uint8_t *end,
                            const uint8_t **s, size_t *n)
{
    if (end - *p < 4)
        return -1;
    uint32_t l = sk_get_u32(*p);
    if ((size_t)(end - *p - 4) < l)
        return -1;
    *s = *p + 4;
    *n = l;
    *p += 4 + l;
    return 0;
}

/* ---- replaypend.c: frames pending their COMMIT --------------------------- */

/* Forget every pending frame. */
void st_pend_clear(replay *r);
/* The pending frames will never count (no COMMIT followed them): their
 * streamed slices become orphans (r->orph), whose growing objects a crash
 * may have left in the sink. */
int st_pend_drop(replay *r);
/* One frame of its type (SLICE or SLICE_V1, STREAM, TAIL, NOTE, STAGE,
 * BLOCK or BLOCKZ) at pos, payload p[0..len), into its pending list.
 * SKIPPR_OK, SKIPPR_CORRUPT or SKIPPR_NOMEM. */
int st_pend_slice(replay *r, int type, sk_wal_pos pos, const uint8_t *p,
                  size_t len);
int st_pend_streams(replay *r, const uint8_t *p, size_t len);
int st_pend_tail(replay *r, sk_wal_pos pos, const uint8_t *p, size_t len);
int st_pend_note(replay *r, const uint8_t *p, size_t len);
int st_pend_stage(replay *r, const uint8_t *p, size_t len);
int st_pend_block(replay *r, int type, sk_wal_pos pos, const uint8_t *p,
                  size_t len);

#endif
