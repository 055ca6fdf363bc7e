/* Growing objects: data slices that stream into a sink with
 * SKIPPR_SINK_GROWS (the File sink; S3, by parts) while they are open, so
 * that each byte is written once, into the object itself, instead of into
 * the WAL and then again into the object. The state decides when bytes move
 * (state.c: push_block, record_streams); this file is how they reach the
 * sink: the hooks the state calls and recovery of growing objects a crash
 * left. Staging pieces and the finish of sealed ones (the rename, the
 * multipart Complete) are in stage.c; what both use is in grow.h.
 *
 * Owns: each streamed slice's sink handle (s->handle), from its first put
 * to its finish or the engine's teardown.
 * Thread: the pipeline thread, and while it waits, one thread per sink
 * instance (a flush's puts, a batch's finishes). Each slice belongs to
 * one instance, uploaders[id % upload_concurrency], which makes and uses
 * its handle: an instance is never called from two threads at once.
 */
#include "pipeline/grow.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "base/fault.h"

const skippr_sink_ops *pl_grow_ops(const engine *e)
{
    return e->up[0].sink->plugin->sink;
}

/* The instance that owns slice s's growing object. */
sk_instance *pl_grow_owner(const engine *e, const sk_slice *s)
{
    return e->up[s->id % (uint64_t)e->nup].sink;
}

/* Non-zero when the sink grows objects in place and the engine may use
 * it for this pipeline's data slices. */
static int sink_grows(const engine *e)
{
    const skippr_sink_ops *ops = pl_grow_ops(e);
    return SKIPPR_OPS_HAS(skippr_sink_ops, ops, grow_discard) &&
           (ops->flags & SKIPPR_SINK_GROWS) && ops->grow_open &&
           ops->grow_write && ops->grow_commit && ops->grow_close &&
           ops->grow_discard && !pl_sink_takes_records(e->up[0].sink);
}

/* Non-zero when the sink keeps staging pieces of objects growing by
 * parts. */
static int sink_stages(const engine *e)
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
    return sink_stages(e) &&
           SKIPPR_OPS_HAS(skippr_sink_ops, ops, stage_copy) && ops->stage_copy;
}

/* The sink's part size when it grows objects by parts (S3), else 0. */
static uint64_t sink_part_bytes(const engine *e)
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
    snprintf(slice_id, cap, "%s-%010" PRIu64, e->st->state_id, s->id);
    *info = (skippr_object_info){.key = key,
                                 .slice_id = slice_id,
                                 .size = s->object_key ? s->object_bytes : 0,
                                 .crc32c = s->object_key ? s->object_crc : 0,
                                 .content_type =
                                     pl_slice_is_multiline(s)
                                         ? "application/json"
                                         : "application/x-ndjson",
                                 .partition = s->key,
                                 .records = s->records};
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

/* Listed sources only (pl_grow_init installs no hooks for a streaming
 * source): its acknowledgements ask for a durable commit every few
 * hundred milliseconds, and with growing objects each would be a sync of
 * the whole output file system (an MQTT broker at its defaults then drops
 * messages while skippr waits); the WAL makes each one small fsync. */
static int wants(void *ud, const sk_slice *s)
{
    engine *e = ud;
    char tail[300];
    return pl_slice_conv(e, s) == SK_CONV_NONE &&
           pl_xml_trailer(s, tail, sizeof tail) == 0;
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
    int rc = pl_grow_ops(e)->grow_open(
        sink->ctx, &info, length, length ? (const char *)s->notes.data : NULL,
        length ? s->notes.len : 0, &s->handle);
    if (rc == SKIPPR_NOENT && length > 0)
        sk_error("%s: the growing object of %s lost bytes that were made "
                 "durable (%" PRIu64 "); it was changed outside skippr",
                 sink->label, key, length);
    else if (rc)
        plugin_failed(sink, "%s: opening %s to grow failed: %s", sink->label,
                      key, skippr_status_str(rc));
    sk_free(key);
    if (rc)
        s->handle = NULL;
    return rc;
}

/* The uploader whose instance owns slice s (its backoff is that
 * thread's). */
static uploader *owner_up(const engine *e, const sk_slice *s)
{
    return &e->up[s->id % (uint64_t)e->nup];
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
            if (sk_stop_requested || pl_sink_failing(e)) {
                /* (another slice gave up: the run ends) */
                rc = sk_stop_requested ? SKIPPR_STOPPED : SKIPPR_FATAL;
                break;
            }
            pl_retry_say(e, a, "%s: %s slice %" PRIu64 " failed (attempt %d "
                         "of %d); retrying", pl_grow_owner(e, s)->label, what,
                         s->id, a, MAX_ATTEMPTS);
            skippr_backoff_sleep(&owner_up(e, s)->backoff, a);
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
                                      b->s->handle, b->p, b->n);
}

/* The sink's note of the part it just added to open slice s's object,
 * kept for the next commit to record. */
int pl_grow_note(engine *e, sk_slice *s)
{
    char note[2048];
    size_t nl = 0;
    int rc = pl_grow_ops(e)->grow_note(pl_grow_owner(e, s)->ctx, s->handle,
                                       note, sizeof note, &nl);
    if (!rc && nl > sizeof note)
        rc = SKIPPR_RANGE;
    return rc ? rc : sk_buf_append(&s->notes, note, nl);
}

/* Write n bytes to s's growing object: for a sink that grows by parts,
 * one part per part_bytes (the state hands over whole parts but for the
 * last write, which may end with a shorter one), and for an open slice
 * the sink's note of each part, which the next commit records. */
int pl_grow_write(engine *e, sk_slice *s, const uint8_t *p, size_t n)
{
    uint64_t pb = e->st->grow.part_bytes;
    int rc = SKIPPR_OK;
    for (size_t off = 0; off < n && !rc;) {
        size_t k = pb && n - off > pb ? (size_t)pb : n - off;
        sk_crashpoint("grow_write");
        rc = pl_grow_retries(e, s, "appending to", write_once,
                             &(bytes_arg){s, p + off, k});
        off += k;
        if (rc || !pb || s->state != SK_SLICE_OPEN)
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
    const char *what = e->st->grow.part_bytes ? "uploading a part of"
                                              : "appending to";
    if (rc == SKIPPR_RETRY)
        pl_sink_gave_up(e, sink, "%s: %s %s failed %d times; giving up",
                        sink->label, what, key ? key : "an object",
                        MAX_ATTEMPTS);
    else
        pl_sink_gave_up(e, sink, "%s: %s %s failed: %s", sink->label, what,
                        key ? key : "an object", skippr_status_str(rc));
    sk_free(key);
}

static int put(void *ud, sk_slice *s, const void *p, size_t n)
{
    engine *e = ud;
    int rc;
    if (!s->handle && (rc = pl_grow_attach(e, s, s->pushed)))
        return rc;
    rc = pl_grow_write(e, s, p, n);
    if (rc)
        pl_grow_write_failed(e, s, rc);
    return rc;
}

/* Every instance's sync(): those that appended nothing since return at
 * once (the File sink's one syncfs covers the file system). */
static int sync_sink(void *ud)
{
    engine *e = ud;
    const skippr_sink_ops *ops = pl_grow_ops(e);
    if (!ops->sync)
        return SKIPPR_OK;
    for (int k = 0; k < e->nup; k++) {
        int rc = ops->sync(e->up[k].sink->ctx);
        if (rc) {
            plugin_failed(e->up[k].sink, "%s: making appended bytes "
                          "durable failed: %s", e->up[k].sink->label,
                          skippr_status_str(rc));
            return rc;
        }
    }
    return SKIPPR_OK;
}

/* Work for one instance's thread: the slices of v it owns. */
typedef struct grow_job {
    engine *e;
    sk_slice **v;
    size_t n;
    int k;         /* the instance */
    int *rcs;      /* NULL: put each buffer; else finish each sealed
                    * slice, its status in rcs[i] */
    int rc;
    pthread_t th;
} grow_job;

static void *grow_job_run(void *arg)
{
    grow_job *j = arg;
    for (size_t i = 0; i < j->n && !j->rc; i++) {
        sk_slice *s = j->v[i];
        if (s->id % (uint64_t)j->e->nup != (uint64_t)j->k ||
            (j->rcs && !s->streamed))
            continue;
        if (j->rcs) {
            j->rc = j->rcs[i] = pl_grow_finish(j->e, s);
        } else {
            j->rc = put(j->e, s, s->open_block.data,
                        (size_t)sk_state_put_len(j->e->st, s));
        }
    }
    return NULL;
}

/* Put the buffers of the n slices of v (rcs NULL), or finish them (each
 * one's status in rcs[i], which the caller set to a positive "not tried"),
 * on one thread per instance (this thread is instance 0's), and wait.
 * After a failure an instance starts no more. Returns the first failure. */
int pl_grow_parallel(engine *e, sk_slice **v, size_t n, int *rcs)
{
    grow_job jobs[MAX_UPLOADERS];
    int nj = e->nup < MAX_UPLOADERS ? e->nup : MAX_UPLOADERS;
    int started = 1;
    for (int k = 0; k < nj; k++)
        jobs[k] = (grow_job){.e = e, .v = v, .n = n, .k = k, .rcs = rcs};
    /* a thread that cannot be started: its instance's work runs here */
    for (int k = 1; k < nj; k++) {
        if (pthread_create(&jobs[k].th, NULL, grow_job_run, &jobs[k]))
            break;
        started++;
    }
    grow_job_run(&jobs[0]);
    for (int k = started; k < nj; k++)
        grow_job_run(&jobs[k]);
    int rc = jobs[0].rc;
    for (int k = 1; k < nj; k++) {
        if (k < started)
            pthread_join(jobs[k].th, NULL);
        if (!rc)
            rc = jobs[k].rc;
    }
    return rc;
}

static int put_all(void *ud, sk_slice **v, size_t n)
{
    return pl_grow_parallel(ud, v, n, NULL);
}

int pl_grow_sync(engine *e)
{
    return sync_sink(e);
}

/* Remove s's growing object, if any (its owner instance's call). */
static int discard(engine *e, const sk_slice *s)
{
    char sid[40];
    skippr_object_info info;
    char *key = pl_grow_open_info(e, s, sid, sizeof sid, &info);
    if (!key)
        return SKIPPR_NOMEM;
    sk_instance *sink = pl_grow_owner(e, s);
    int rc = pl_grow_ops(e)->grow_discard(sink->ctx, &info);
    /* Its first commit may have staged a tail whose STAGE frame the
     * crash lost (see pl_grow_init): its pieces go too. */
    if (!rc && sink_stages(e))
        rc = pl_grow_ops(e)->stage_clear(sink->ctx, &info);
    if (rc)
        plugin_failed(sink, "%s: removing the unfinished %s failed: %s",
                      sink->label, key, skippr_status_str(rc));
    sk_free(key);
    return rc;
}

/* Remove what a crash left of slices that never reached a commit. */
static int discard_orphans(engine *e)
{
    sk_state *st = e->st;
    for (size_t i = 0; i < st->norphans; i++) {
        int rc = discard(e, st->orphans[i]);
        if (rc)
            return rc;
    }
    if (st->norphans)
        sk_info("recovery: removed %zu unfinished object%s of slices that "
                "never reached a commit", st->norphans,
                st->norphans == 1 ? "" : "s");
    sk_state_orphans_clear(st);
    return SKIPPR_OK;
}

int pl_grow_init(engine *e)
{
    sk_state *st = e->st;
    int streamed = 0;
    for (size_t i = 0; i < st->nlive; i++)
        streamed |= st->live[i]->streamed;
    /* Streaming sources keep the WAL path (see wants()), and with it
     * their lazy commits: no hooks at all. */
    if (!sink_grows(e) || e->streaming) {
        if (streamed || st->norphans) {
            sk_error("%s: the state holds objects growing in a sink that "
                     "grows objects in place, and this sink does not; run "
                     "the pipeline with its earlier sink to finish them",
                     e->sink->label);
            return SKIPPR_INVAL;
        }
        return SKIPPR_OK;
    }
    st->grow = (sk_grow_hooks){.ud = e, .wants = wants, .put = put,
                               .sync = sync_sink, .put_all = put_all,
                               .part_bytes = sink_part_bytes(e)};
    if (st->grow.part_bytes && sink_stages(e)) {
        st->grow.fetch = pl_grow_fetch;
        st->grow.stage = pl_grow_store;
        if (pl_sink_copies(e))
            st->grow.copy = pl_grow_copy;
        st->grow.wal_budget = (uint64_t)e->cfg->wal_disk_budget;
        /* A piece is put before its STAGE frame is written: a crash in
         * between leaves a piece that the WAL does not name. So every
         * slice a run inherits lists its staging folder when it is done
         * (one listing each), not only those with recorded pieces. */
        for (size_t i = 0; i < st->nlive; i++)
            if (st->live[i]->streamed)
                st->live[i]->staged_ever = 1;
    }
    for (size_t i = 0; i < st->nlive && !st->grow.part_bytes; i++)
        if (st->live[i]->walled || st->live[i]->notes.len ||
            st->live[i]->staged_ever) {
            sk_error("%s: the state holds objects growing by parts (S3), "
                     "and this sink does not grow them so; run the "
                     "pipeline with its earlier sink to finish them",
                     e->sink->label);
            return SKIPPR_INVAL;
        }
    return discard_orphans(e);
}

/* An open streamed slice without records (its records went elsewhere
 * after a restart): its growing object goes, and so does the slice. */
int pl_grow_forget(engine *e, sk_slice *s)
{
    if (s->handle) {
        pl_grow_ops(e)->grow_close(pl_grow_owner(e, s)->ctx, s->handle);
        s->handle = NULL;
    }
    int rc = discard(e, s);
    return rc ? rc : sk_state_forget(e->st, s);
}

/* Teardown: let go of every handle; the objects stay for the next run. */
void pl_grow_release(engine *e)
{
    if (!e->st || !e->up)
        return;
    for (size_t i = 0; i < e->st->nlive; i++) {
        sk_slice *s = e->st->live[i];
        if (s->handle) {
            pl_grow_ops(e)->grow_close(pl_grow_owner(e, s)->ctx, s->handle);
            s->handle = NULL;
        }
    }
}
