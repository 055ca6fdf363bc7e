/* Staging pieces and the finish of sealed growing objects. When the WAL
 * cannot hold the tails of objects growing by parts (S3), they move into
 * the sink's own storage as staging pieces (the state says which, and
 * when a spilled buffer must be read back); a sealed slice's object is
 * finished from its pieces (made
 * parts inside the sink where they are large enough) and its tail, then
 * made visible, and its pieces are cleared. See grow.c for the rest of
 * the growing objects' life.
 *
 * Thread: grow.c's (each slice's sink calls by the instance that owns
 * it).
 */
#include "pipeline/growobj.h"
#include "pipeline/staging.h"

#include <inttypes.h>
#include <string.h>

#include "base/fault.h"
#include "pipeline/retrynews.h"

typedef struct copy_arg {
    const sk_slice *s;
    const skippr_object_info *info;
    size_t k; /* the staging piece */
} copy_arg;

static int copy_once(engine *e, void *arg)
{
    const copy_arg *c = arg;
    const sk_slice *s = c->s;
    sk_stage_piece p = sk_state_piece(s, c->k);
    return pl_grow_ops(e)->stage_copy(pl_grow_owner(e, s)->ctx,
                                      pl_grow_handle(e, s), c->info, p.off,
                                      p.tag, p.len);
}

/* s's first n staging pieces become its next parts, inside the sink
 * (stage_copy), each retried as a write is; for an open slice, with the
 * sink's note of each. */
static int copy_pieces(engine *e, sk_slice *s, const skippr_object_info *info,
                       size_t n)
{
    int rc = SKIPPR_OK;
    for (size_t k = 0; k < n && !rc; k++) {
        sk_crashpoint("stage_copy");
        rc = pl_grow_retries(e, s, "copying a staging piece into", copy_once,
                             &(copy_arg){s, info, k});
        if (!rc && sk_slice_state_of(s) == SK_SLICE_OPEN)
            rc = pl_grow_note(e, s);
    }
    return rc;
}

typedef struct piece_arg {
    const sk_slice *s;
    const skippr_object_info *info;
    uint64_t off, tag;
    const void *src; /* storing; else reading into dst */
    void *dst;
    size_t len;
} piece_arg;

static int piece_once(engine *e, void *arg)
{
    const piece_arg *a = arg;
    void *ctx = pl_grow_owner(e, a->s)->ctx;
    if (!a->src)
        return pl_grow_ops(e)->stage_get(ctx, a->info, a->off, a->tag, a->dst,
                                         a->len);
    sk_crashpoint("stage_put");
    return pl_grow_ops(e)->stage_put(ctx, a->info, a->off, a->tag, a->src,
                                     a->len);
}

/* A staging piece of s at off: stored from src, or (src NULL) read back
 * into dst; retried as uploads are. */
static int piece_io(engine *e, const sk_slice *s, uint64_t off, uint64_t tag,
                    const void *src, void *dst, size_t len)
{
    int put = src != NULL;
    char sid[40];
    skippr_object_info info;
    char *key = pl_grow_open_info(e, s, sid, sizeof sid, &info);
    if (!key)
        return SKIPPR_NOMEM;
    sk_instance *sink = pl_grow_owner(e, s);
    int rc = pl_grow_retries(e, s,
                             put ? "storing a staging piece of"
                                 : "reading a staging piece of",
                             piece_once,
                             &(piece_arg){s, &info, off, tag, src, dst, len});
    if (rc)
        plugin_failed(sink, "%s: %s the staged bytes of %s at %" PRIu64
                      " failed: %s", sink->label, put ? "storing" : "reading",
                      key, off, skippr_status_str(rc));
    sk_free(key);
    return rc;
}

/* Append parted slice s's bytes [from, upto) to out: those in staging
 * pieces read from the sink (through scratch f), the rest from the WAL's
 * TAIL frames (sk_state_read_tail). */
int pl_grow_read(engine *e, const sk_slice *s, uint64_t from, uint64_t upto,
                 skippr_buf *out, skippr_buf *f)
{
    uint64_t at = sk_slice_pushed(s); /* where the next piece starts */
    int rc = from < at || from > upto ? SKIPPR_CORRUPT : SKIPPR_OK;
    for (size_t i = 0; i < sk_state_npieces(s) && at < upto && !rc; i++) {
        sk_stage_piece p = sk_state_piece(s, i);
        if (p.off != at || p.len > SK_WAL_MAX_PAYLOAD)
            rc = SKIPPR_CORRUPT;
        else if (at + p.len > from) {
            skippr_buf_reset(f);
            rc = skippr_buf_reserve(f, (size_t)p.len);
            if (!rc)
                rc = piece_io(e, s, at, p.tag, NULL, f->data, (size_t)p.len);
            uint64_t lo = SK_MAX(from, at), hi = SK_MIN(upto, at + p.len);
            if (!rc && lo < hi)
                rc = skippr_buf_append(out, f->data + (lo - at),
                                       (size_t)(hi - lo));
        }
        at += p.len;
    }
    if (rc == SKIPPR_CORRUPT)
        sk_error("WAL corrupt: the staging pieces of slice %" PRIu64 " do "
                 "not make up its bytes %" PRIu64 " to %" PRIu64,
                 sk_slice_id(s), from, upto);
    if (!rc && at < upto)
        rc = sk_state_read_tail(e->st, s, SK_MAX(from, at), upto, out, f);
    return rc;
}

/* Open slice s's first staging piece becomes a part of its growing
 * object, inside the sink. */
static int copy_first(engine *e, sk_slice *s)
{
    char sid[40];
    skippr_object_info info;
    char *key = pl_grow_open_info(e, s, sid, sizeof sid, &info);
    if (!key)
        return SKIPPR_NOMEM;
    int rc = pl_grow_handle(e, s) ? SKIPPR_OK
                                  : pl_grow_attach(e, s, sk_slice_pushed(s));
    if (!rc && (rc = copy_pieces(e, s, &info, 1)))
        pl_grow_write_failed(e, s, rc);
    sk_free(key);
    return rc;
}

int pl_grow_unspill(engine *e, sk_slice *s)
{
    sk_state *st = e->st;
    sk_stage_piece p;
    int rc = SKIPPR_OK;
    /* First the pieces the sink makes parts by itself: their bytes need
     * not be read back. */
    while (sk_state_spilled(st, s) && pl_sink_copies(e) &&
           sk_state_copy_next(s, &p)) {
        if ((rc = copy_first(e, s)))
            return rc;
        sk_state_copied(st, s);
    }
    if (!sk_state_spilled(st, s))
        return SKIPPR_OK;
    skippr_buf b, f;
    skippr_buf_init(&f, SK_WAL_MAX_PAYLOAD + 64);
    rc = sk_state_unspill_begin(st, s, &b);
    if (!rc)
        rc = pl_grow_read(e, s, sk_slice_pushed(s), sk_slice_buffer_at(s), &b,
                          &f);
    skippr_buf_free(&f);
    return sk_state_unspill_end(st, s, &b, rc);
}

/* Slice s's bytes after its staging pieces become a new one. */
static int stage_unstaged(engine *e, sk_slice *s, skippr_buf *t,
                          skippr_buf *f)
{
    sk_state *st = e->st;
    uint64_t from = sk_slice_pushed(s) + sk_slice_staged(s);
    skippr_buf_reset(t);
    int rc = sk_state_read_unstaged(st, s, t, f);
    uint64_t tag = sk_state_next_stage_tag(st);
    if (!rc)
        rc = piece_io(e, s, from, tag, t->data, NULL, t->len);
    return rc ? rc : sk_state_staged(st, s, tag);
}

/* Before a commit: the tails that would not fit the WAL's disk budget go
 * to staging pieces instead of TAIL frames. */
int pl_grow_stage_tails(engine *e)
{
    sk_slice **v = NULL;
    size_t n = 0;
    int rc = sk_state_tails_to_stage(e->st, &v, &n);
    skippr_buf t, f;
    skippr_buf_init(&t, SK_WAL_MAX_PAYLOAD - 64);
    skippr_buf_init(&f, SK_WAL_MAX_PAYLOAD + 64);
    for (size_t i = 0; i < n && !rc; i++)
        rc = stage_unstaged(e, v[i], &t, &f);
    skippr_buf_free(&t);
    skippr_buf_free(&f);
    sk_free(v);
    return rc;
}

/* Over the disk budget: every open parted slice's bytes in TAIL frames
 * become a staging piece in the sink, so that the WAL segments holding
 * them can go (the caller commits, rotates and collects). *n: how many. */
int pl_grow_stage(engine *e, size_t *n)
{
    sk_state *st = e->st;
    *n = 0;
    if (!sk_state_stages(st))
        return SKIPPR_OK;
    skippr_buf t, f;
    skippr_buf_init(&t, SK_WAL_MAX_PAYLOAD - 64);
    skippr_buf_init(&f, SK_WAL_MAX_PAYLOAD + 64);
    int rc = SKIPPR_OK;
    for (size_t i = 0; i < sk_state_nlive(st) && !rc; i++) {
        sk_slice *s = sk_state_slice_at(st, i);
        if (sk_slice_state_of(s) != SK_SLICE_OPEN || !sk_slice_streamed(s) ||
            !sk_slice_walled(s))
            continue;
        if ((rc = stage_unstaged(e, s, &t, &f)) == SKIPPR_OK)
            (*n)++;
    }
    skippr_buf_free(&t);
    skippr_buf_free(&f);
    return rc;
}

/* How many of sealed slice s's first staging pieces the sink makes parts
 * by itself (stage_copy): those from its durable length on, each of at
 * least SKIPPR_COPY_MIN_BYTES (a smaller one, and every one after it, is
 * read back into the last part). Their bytes in *bytes. */
static size_t copyable(const engine *e, const sk_slice *s, uint64_t *bytes)
{
    uint64_t at = sk_slice_pushed(s);
    size_t k = 0;
    for (; pl_sink_copies(e) && k < sk_state_npieces(s); k++) {
        sk_stage_piece p = sk_state_piece(s, k);
        if (p.off != at || p.len < SKIPPR_COPY_MIN_BYTES)
            break;
        at += p.len;
    }
    *bytes = at - sk_slice_pushed(s);
    return k;
}

/* One attempt at finishing parted slice s: after a failure or a crash
 * its upload may be complete already (the sink is asked first); else its
 * first ncopy staging pieces become parts in the sink, the tail t the
 * last part, and the upload completes. */
typedef struct finish_arg {
    sk_slice *s;
    size_t ncopy;      /* staging pieces the sink copies */
    const uint8_t *tp; /* then the tail */
    size_t tn;
    const skippr_object_info *info;
    int tries; /* attempts made */
} finish_arg;

static int finish_parted_once(engine *e, void *arg)
{
    finish_arg *f = arg;
    sk_slice *s = f->s;
    const skippr_object_info *info = f->info;
    sk_instance *sink = pl_grow_owner(e, s);
    const skippr_sink_ops *ops = pl_grow_ops(e);
    int rc, first = f->tries++ == 0;
    /* Only a retry can find it complete (finish_parted asked for a slice
     * from before a crash already). */
    int open = pl_grow_handle(e, s) != NULL;
    if (!open && first) {
        if ((rc = pl_grow_attach(e, s, sk_slice_pushed(s))))
            return rc;
    } else if (!open) {
        rc = ops->object_check ? ops->object_check(sink->ctx, info)
                               : SKIPPR_NOENT;
        if (rc == SKIPPR_OK) {
            sk_info("object %s already complete (slice %s)",
                    sk_slice_object_key(s), info->slice_id);
            return SKIPPR_OK;
        }
        if (rc != SKIPPR_NOENT && rc != SKIPPR_CHANGED)
            return rc;
        if ((rc = pl_grow_attach(e, s, sk_slice_pushed(s))))
            return rc;
    }
    rc = copy_pieces(e, s, info, f->ncopy);
    if (!rc && f->tn)
        rc = pl_grow_write(e, s, f->tp, f->tn);
    if (rc) {
        pl_grow_close(e, s);
        return rc;
    }
    sk_crashpoint("grow_commit");
    return pl_grow_commit(e, s, info);
}

typedef struct clear_arg {
    const sk_slice *s;
    const skippr_object_info *info;
} clear_arg;

static int clear_once(engine *e, void *arg)
{
    const clear_arg *c = arg;
    return pl_grow_ops(e)->stage_clear(pl_grow_owner(e, c->s)->ctx, c->info);
}

/* A complete object's staging pieces go (before DONE: a crash in between
 * clears them again). */
static int clear_pieces(engine *e, sk_slice *s, const skippr_object_info *info)
{
    if (!sk_slice_staged_ever(s))
        return SKIPPR_OK;
    return pl_grow_retries(e, s, "clearing the staging pieces of", clear_once,
                           &(clear_arg){s, info});
}

/* Finish sealed parted slice s (S3): its tail (in memory, or read back
 * from its staging pieces and TAIL frames) becomes the last part;
 * retried as uploads are. */
static int finish_parted(engine *e, sk_slice *s)
{
    sk_instance *sink = pl_grow_owner(e, s);
    char sid[40];
    skippr_object_info info;
    pl_grow_info(e, s, sk_slice_object_key(s), sid, sizeof sid, &info);
    int rc = SKIPPR_OK;
    if (sk_slice_recovered(s) && !pl_grow_handle(e, s) &&
        pl_grow_ops(e)->object_check) {
        /* A crash after the Complete: then its tail may be gone (its
         * staging pieces deleted), and nothing is written again. */
        rc = pl_grow_ops(e)->object_check(sink->ctx, &info);
        if (rc == SKIPPR_OK) {
            sk_info("object %s already complete (slice %s)",
                    sk_slice_object_key(s), sid);
            return clear_pieces(e, s, &info);
        }
        if (rc != SKIPPR_NOENT && rc != SKIPPR_CHANGED)
            return rc;
    }
    /* The tail after the pieces the sink copies: still in memory when
     * the slice was sealed in this run (its buffer is kept for this),
     * else read back. */
    uint64_t lead;
    size_t ncopy = copyable(e, s, &lead);
    skippr_buf t, f;
    skippr_buf_init(&t, SK_WAL_MAX_PAYLOAD - 64);
    skippr_buf_init(&f, SK_WAL_MAX_PAYLOAD + 64);
    const uint8_t *tp = NULL;
    size_t tn = 0;
    size_t held;
    const uint8_t *mem = sk_slice_buffer(s, &held);
    uint64_t pushed = sk_slice_pushed(s);
    if (sk_slice_buffer_at(s) == pushed &&
        pushed + held == sk_slice_object_bytes(s)) {
        if (lead < held) {
            tp = mem + lead;
            tn = held - (size_t)lead;
        }
    } else {
        rc = pl_grow_read(e, s, sk_slice_pushed(s) + lead,
                          sk_slice_pushed(s) + sk_slice_staged(s) +
                              sk_slice_walled(s),
                          &t, &f);
        if (!rc &&
            sk_slice_pushed(s) + lead + t.len != sk_slice_object_bytes(s))
            rc = SKIPPR_CORRUPT;
        tp = t.data;
        tn = t.len;
    }
    skippr_buf_free(&f);
    if (rc) {
        sk_error("slice %s: its tail in the WAL does not make up its "
                 "object (%s)",
                 sid, skippr_status_str(rc));
        skippr_buf_free(&t);
        return rc;
    }
    rc = pl_grow_retries(e, s, "finishing", finish_parted_once,
                         &(finish_arg){s, ncopy, tp, tn, &info, 0});
    skippr_buf_free(&t);
    if (!rc)
        rc = clear_pieces(e, s, &info);
    if (rc == SKIPPR_RETRY)
        pl_sink_gave_up(e->retry, sink,
                        "%s: finishing %s failed %d times; giving up",
                        sink->label, sk_slice_object_key(s), MAX_ATTEMPTS);
    else if (rc)
        pl_sink_gave_up(e->retry, sink, "%s: finishing %s failed: %s",
                        sink->label, sk_slice_object_key(s),
                        skippr_status_str(rc));
    return rc;
}

/* Finish sealed streamed slice s: its object becomes visible under its
 * key (durable with the sink's next sync()). After a crash its growing
 * object may already have been renamed: then the object itself is
 * checked. */
int pl_grow_finish(engine *e, sk_slice *s)
{
    sk_instance *sink = pl_grow_owner(e, s);
    const skippr_sink_ops *ops = pl_grow_ops(e);
    int rc = SKIPPR_OK;
    if (sk_state_part_bytes(e->st))
        return finish_parted(e, s);
    if (!pl_grow_handle(e, s)) {
        rc = pl_grow_attach(e, s, sk_slice_object_bytes(s));
        if (rc == SKIPPR_NOENT && ops->object_check) {
            char sid[40];
            skippr_object_info info;
            pl_grow_info(e, s, sk_slice_object_key(s), sid, sizeof sid, &info);
            rc = ops->object_check(sink->ctx, &info);
            if (rc == SKIPPR_OK) {
                sk_info("object %s already complete (slice %s)",
                        sk_slice_object_key(s), sid);
                return SKIPPR_OK;
            }
            sk_error("%s: slice %s was sealed but neither its growing "
                     "object nor %s is there whole (%s)",
                     sink->label, sid, sk_slice_object_key(s),
                     skippr_status_str(rc));
            return SKIPPR_CORRUPT;
        }
        if (rc)
            return rc;
    }
    char sid[40];
    skippr_object_info info;
    pl_grow_info(e, s, sk_slice_object_key(s), sid, sizeof sid, &info);
    sk_crashpoint("grow_commit");
    rc = pl_grow_commit(e, s, &info);
    if (rc)
        plugin_failed(sink, "%s: finishing %s failed: %s", sink->label,
                      sk_slice_object_key(s), skippr_status_str(rc));
    return rc;
}
