/* One growing object in the sink, as grow.c (puts) and staging.c (staging
 * pieces, finishing) both reach it: what the sink can do, the object's
 * info, opening it, writing parts with their notes, retries with the
 * owning uploader's backoff, and the error line of a put that failed.
 *
 * Thread: the caller's; a slice's calls are made by the instance that
 * owns it (pl_grow_owner), one thread at a time.
 */
#include "pipeline/growobj.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "base/fault.h"
#include "pipeline/retrynews.h"

const skippr_sink_ops *pl_grow_ops(const engine *e)
{
    return e->up[0].sink->plugin->sink;
}

uploader *pl_grow_owner_up(const engine *e, uint64_t id)
{
    return &e->up[id % (uint64_t)e->nup];
}

/* The instance that owns slice s's growing object. */
sk_instance *pl_grow_owner(const engine *e, const sk_slice *s)
{
    return pl_grow_owner_up(e, sk_slice_id(s))->sink;
}

/* Non-zero when the sink grows objects in place and the engine may use
 * it for this pipeline's data slices. */
int pl_sink_grows(const engine *e)
{
    const skippr_sink_ops *ops = pl_grow_ops(e);
    return SKIPPR_OPS_HAS(skippr_sink_ops, ops, grow_discard) &&
           (ops->flags & SKIPPR_SINK_GROWS) && ops->grow_open &&
           ops->grow_write && ops->grow_commit && ops->grow_close &&
           ops->grow_discard && !pl_sink_takes_records(e->up[0].sink);
}

/* Non-zero when the sink keeps staging pieces of objects growing by
 * parts. */
int pl_sink_stages(const engine *e)
{
    const skippr_sink_ops *ops = pl_grow_ops(e);
    return (ops->flags & SKIPPR_SINK_STAGES) &&
           SKIPPR_OPS_HAS(skippr_sink_ops, ops, stage_clear) &&
           ops->stage_put && ops->stage_get && ops->stage_clear;
}

/* Non-zero when the sink also makes staging pieces parts itself. */
int pl_sink_copies(const engine *e)
{
    const skippr_sink_ops *ops = pl_grow_ops(e);
    return pl_sink_stages(e) &&
           SKIPPR_OPS_HAS(skippr_sink_ops, ops, stage_copy) && ops->stage_copy;
}

/* The sink's part size when it grows objects by parts (S3), else 0. */
uint64_t pl_sink_part_bytes(const engine *e)
{
    const skippr_sink_ops *ops = pl_grow_ops(e);
    if (!(ops->flags & SKIPPR_SINK_PARTS) ||
        !SKIPPR_OPS_HAS(skippr_sink_ops, ops, grow_note) ||
        !ops->grow_part_bytes || !ops->grow_note)
        return 0;
    return ops->grow_part_bytes(e->up[0].sink->ctx);
}

/* The object info of streamed slice s, for key (its object key). */
void pl_grow_info(engine *e, const sk_slice *s, const char *key,
                  char *slice_id, size_t cap, skippr_object_info *info)
{
    snprintf(slice_id, cap, "%s-%010" PRIu64, sk_state_id(e->st),
             sk_slice_id(s));
    *info = (skippr_object_info){
        .key = key,
        .slice_id = slice_id,
        .size = sk_slice_object_key(s) ? sk_slice_object_bytes(s) : 0,
        .crc32c = sk_slice_object_key(s) ? sk_slice_object_crc(s) : 0,
        .content_type = pl_slice_is_multiline(s) ? "application/json"
                                                 : "application/x-ndjson",
        .partition = sk_slice_key(s),
        .records = sk_slice_records(s)};
}

/* The info of an open slice's growing object, under the key it will get
 * when sealed. Caller owns the returned key (info->key points to it);
 * NULL on allocation failure. */
char *pl_grow_open_info(engine *e, const sk_slice *s, char *sid, size_t cap,
                        skippr_object_info *info)
{
    char *key = sk_state_object_key(e->st, s, pl_slice_ext(e, s));
    if (key)
        pl_grow_info(e, s, key, sid, cap, info);
    return key;
}

/* Open s's growing object: new, or reopened at its durable length. */
int pl_grow_attach(engine *e, sk_slice *s, uint64_t length)
{
    char sid[40];
    skippr_object_info info;
    char *key = pl_grow_open_info(e, s, sid, sizeof sid, &info);
    if (!key)
        return SKIPPR_NOMEM;
    sk_instance *sink = pl_grow_owner(e, s);
    void *h = NULL;
    size_t nn;
    const char *notes = sk_slice_notes(s, &nn);
    int rc = pl_grow_ops(e)->grow_open(
        sink->ctx, &info, length, length ? notes : NULL, length ? nn : 0, &h);
    if (rc == SKIPPR_NOENT && length > 0)
        sk_error("%s: the growing object of %s lost bytes that were made "
                 "durable (%" PRIu64 "); it was changed outside skippr",
                 sink->label, key, length);
    else if (rc)
        plugin_failed(sink, "%s: opening %s to grow failed: %s", sink->label,
                      key, skippr_status_str(rc));
    sk_free(key);
    if (!rc && (rc = pl_handle_keep(e->handles, sk_slice_id(s), h)))
        pl_grow_ops(e)->grow_close(sink->ctx, h);
    return rc;
}

void *pl_grow_handle(const engine *e, const sk_slice *s)
{
    return e->handles ? pl_handle_get(e->handles, sk_slice_id(s)) : NULL;
}

void pl_grow_close(engine *e, const sk_slice *s)
{
    void *h = e->handles ? pl_handle_take(e->handles, sk_slice_id(s)) : NULL;
    if (h)
        pl_grow_ops(e)->grow_close(pl_grow_owner(e, s)->ctx, h);
}

int pl_grow_commit(engine *e, const sk_slice *s,
                   const skippr_object_info *info)
{
    void *h = e->handles ? pl_handle_take(e->handles, sk_slice_id(s)) : NULL;
    if (!h)
        return SKIPPR_INVAL;
    return pl_grow_ops(e)->grow_commit(pl_grow_owner(e, s)->ctx, h, info);
}

/* fn, tried again after each SKIPPR_RETRY, up to MAX_ATTEMPTS in all, with
 * the backoff of the uploader that owns s; each retry is logged as "<what>
 * slice <id> failed". SKIPPR_STOPPED when a stop is asked for between
 * attempts. Every operation here may be redone: the File sink appends at
 * its own length, a part is uploaded again under its number, a staging
 * piece is stored again under its name, and a finish looks first whether
 * an earlier attempt got through. */
int pl_grow_retries(engine *e, const sk_slice *s, const char *what,
                    attempt_fn fn, void *arg)
{
    /* Inside another's attempt (finishing appends), one try: the outer
     * loop retries, or attempts would multiply. */
    static _Thread_local int depth;
    if (depth)
        return fn(e, arg);
    depth++;
    int rc = SKIPPR_RETRY;
    for (int a = 0; a < MAX_ATTEMPTS && rc == SKIPPR_RETRY; a++) {
        if (a) {
            if (sk_stop_requested || pl_sink_failing(e->retry)) {
                /* (another slice gave up: the run ends) */
                rc = sk_stop_requested ? SKIPPR_STOPPED : SKIPPR_FATAL;
                break;
            }
            pl_retry_say(e->retry, a,
                         "%s: %s slice %" PRIu64 " failed (attempt %d of "
                         "%d); retrying",
                         pl_grow_owner(e, s)->label, what, sk_slice_id(s), a,
                         MAX_ATTEMPTS);
            skippr_backoff_sleep(
                &pl_grow_owner_up(e, sk_slice_id(s))->backoff, a);
        }
        rc = fn(e, arg);
    }
    depth--;
    return rc;
}

typedef struct bytes_arg {
    const sk_slice *s;
    const void *p;
    size_t n;
} bytes_arg;

static int write_once(engine *e, void *arg)
{
    const bytes_arg *b = arg;
    return pl_grow_ops(e)->grow_write(pl_grow_owner(e, b->s)->ctx,
                                      pl_grow_handle(e, b->s), b->p, b->n);
}

/* The sink's note of the part it just added to open slice s's object,
 * kept for the next commit to record. */
int pl_grow_note(engine *e, sk_slice *s)
{
    char note[2048];
    size_t nl = 0;
    int rc = pl_grow_ops(e)->grow_note(pl_grow_owner(e, s)->ctx,
                                       pl_grow_handle(e, s), note,
                                       sizeof note, &nl);
    if (!rc && nl > sizeof note)
        rc = SKIPPR_RANGE;
    return rc ? rc : sk_state_note(s, note, nl);
}

/* Write n bytes to s's growing object: for a sink that grows by parts,
 * one part per part_bytes (the state hands over whole parts but for the
 * last write, which may end with a shorter one), and for an open slice
 * the sink's note of each part, which the next commit records. */
int pl_grow_write(engine *e, sk_slice *s, const uint8_t *p, size_t n)
{
    uint64_t pb = sk_state_part_bytes(e->st);
    int rc = SKIPPR_OK;
    for (size_t off = 0; off < n && !rc;) {
        size_t k = pb && n - off > pb ? (size_t)pb : n - off;
        sk_crashpoint("grow_write");
        rc = pl_grow_retries(e, s, "appending to", write_once,
                             &(bytes_arg){s, p + off, k});
        off += k;
        if (rc || !pb || sk_slice_state_of(s) != SK_SLICE_OPEN)
            continue;
        /* uploaded, not yet recorded */
        sk_crashpoint("part_put");
        rc = pl_grow_note(e, s);
    }
    return rc;
}

/* The error line of a put that failed: the object, and whether it gave
 * up after retries. */
void pl_grow_write_failed(engine *e, const sk_slice *s, int rc)
{
    char *key = sk_state_object_key(e->st, s, pl_slice_ext(e, s));
    sk_instance *sink = pl_grow_owner(e, s);
    const char *what = sk_state_part_bytes(e->st) ? "uploading a part of"
                                              : "appending to";
    if (rc == SKIPPR_RETRY)
        pl_sink_gave_up(e->retry, sink,
                        "%s: %s %s failed %d times; giving up", sink->label,
                        what, key ? key : "an object", MAX_ATTEMPTS);
    else
        pl_sink_gave_up(e->retry, sink, "%s: %s %s failed: %s", sink->label,
                        what, key ? key : "an object",
                        skippr_status_str(rc));
    sk_free(key);
}
