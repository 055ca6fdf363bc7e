/* Growing objects: data slices that stream into a sink with
 * SKIPPR_SINK_GROWS (the File sink; S3, by parts) while they are open, so
 * that each byte is written once, into the object itself, instead of into
 * the WAL and then again into the object. The state decides when bytes move
 * (state.c: push_block, record_streams); this file is how they reach the
 * sink: the hooks the state calls, recovery of growing objects a crash
 * left, and the finish of sealed ones (the rename).
 *
 * Owns: each streamed slice's sink handle (s->handle), from its first put
 * to its finish or the engine's teardown.
 * Thread: the pipeline thread, and while it waits, one thread per sink
 * instance (a flush's puts, a batch's finishes). Each slice belongs to
 * one instance, uploaders[id % upload_concurrency], which makes and uses
 * its handle: an instance is never called from two threads at once.
 */
#include "pipeline/engine.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "base/fault.h"

static const skippr_sink_ops *grow_ops(const engine *e)
{
    return e->up[0].sink->plugin->sink;
}

/* The instance that owns slice s's growing object. */
static sk_instance *owner(const engine *e, const sk_slice *s)
{
    return e->up[s->id % (uint64_t)e->nup].sink;
}

/* Non-zero when the sink grows objects in place and the engine may use
 * it for this pipeline's data slices. */
static int sink_grows(const engine *e)
{
    const skippr_sink_ops *ops = grow_ops(e);
    return SKIPPR_OPS_HAS(skippr_sink_ops, ops, grow_discard) &&
           (ops->flags & SKIPPR_SINK_GROWS) && ops->grow_open &&
           ops->grow_write && ops->grow_commit && ops->grow_close &&
           ops->grow_discard && !pl_sink_takes_records(e->up[0].sink);
}

/* Non-zero when the sink keeps staging pieces of objects growing by
 * parts. */
static int sink_stages(const engine *e)
{
    const skippr_sink_ops *ops = grow_ops(e);
    return (ops->flags & SKIPPR_SINK_STAGES) &&
           SKIPPR_OPS_HAS(skippr_sink_ops, ops, stage_clear) &&
           ops->stage_put && ops->stage_get && ops->stage_clear;
}

/* Non-zero when the sink also makes staging pieces parts itself. */
static int sink_copies(const engine *e)
{
    const skippr_sink_ops *ops = grow_ops(e);
    return sink_stages(e) && SKIPPR_OPS_HAS(skippr_sink_ops, ops, stage_copy) &&
           ops->stage_copy;
}

/* The sink's part size when it grows objects by parts (S3), else 0. */
static uint64_t sink_part_bytes(const engine *e)
{
    const skippr_sink_ops *ops = grow_ops(e);
    if (!(ops->flags & SKIPPR_SINK_PARTS) ||
        !SKIPPR_OPS_HAS(skippr_sink_ops, ops, grow_note) ||
        !ops->grow_part_bytes || !ops->grow_note)
        return 0;
    return ops->grow_part_bytes(e->up[0].sink->ctx);
}

/* The object info of streamed slice s, for key (its object key). */
static void grow_info(engine *e, const sk_slice *s, const char *key,
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
static char *open_info(engine *e, const sk_slice *s, char *sid, size_t cap,
                       skippr_object_info *info)
{
    char *key = sk_state_object_key(e->st, s, pl_slice_ext(e, s));
    if (key)
        grow_info(e, s, key, sid, cap, info);
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
static int grow_attach(engine *e, sk_slice *s, uint64_t length)
{
    char sid[40];
    skippr_object_info info;
    char *key = open_info(e, s, sid, sizeof sid, &info);
    if (!key)
        return SKIPPR_NOMEM;
    sk_instance *sink = owner(e, s);
    int rc = grow_ops(e)->grow_open(sink->ctx, &info, length,
                                    length ? (const char *)s->notes.data
                                           : NULL,
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

/* One attempt at an operation on a slice's object in the sink, with what
 * it needs (the slice among it) in arg. */
typedef int (*attempt_fn)(engine *e, void *arg);

/* fn, tried again after each SKIPPR_RETRY, up to MAX_ATTEMPTS in all, with
 * the backoff of the uploader that owns s; each retry is logged as "<what>
 * slice <id> failed". SKIPPR_STOPPED when a stop is asked for between
 * attempts. Every operation here may be redone: the File sink appends at
 * its own length, a part is uploaded again under its number, a staging
 * piece is stored again under its name, and a finish looks first whether
 * an earlier attempt got through. */
static int with_retries(engine *e, const sk_slice *s, const char *what,
                        attempt_fn fn, void *arg)
{
    int rc = SKIPPR_RETRY;
    for (int a = 0; a < MAX_ATTEMPTS && rc == SKIPPR_RETRY; a++) {
        if (a) {
            if (sk_stop_requested)
                return SKIPPR_STOPPED;
            sk_warn("%s: %s slice %" PRIu64 " failed (attempt %d of %d); "
                    "retrying", owner(e, s)->label, what, s->id, a,
                    MAX_ATTEMPTS);
            skippr_backoff_sleep(&owner_up(e, s)->backoff, a);
        }
        rc = fn(e, arg);
    }
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
    return grow_ops(e)->grow_write(owner(e, b->s)->ctx, b->s->handle, b->p,
                                   b->n);
}

/* The sink's note of the part it just added to open slice s's object,
 * kept for the next commit to record. */
static int take_note(engine *e, sk_slice *s)
{
    char note[2048];
    size_t nl = 0;
    int rc = grow_ops(e)->grow_note(owner(e, s)->ctx, s->handle, note,
                                    sizeof note, &nl);
    if (!rc && nl > sizeof note)
        rc = SKIPPR_RANGE;
    return rc ? rc : sk_buf_append(&s->notes, note, nl);
}

/* Write n bytes to s's growing object: for a sink that grows by parts,
 * one part per part_bytes (the state hands over whole parts but for the
 * last write, which may end with a shorter one), and for an open slice
 * the sink's note of each part, which the next commit records. */
static int write_parts(engine *e, sk_slice *s, const uint8_t *p, size_t n)
{
    uint64_t pb = e->st->grow.part_bytes;
    int rc = SKIPPR_OK;
    for (size_t off = 0; off < n && !rc;) {
        size_t k = pb && n - off > pb ? (size_t)pb : n - off;
        sk_crashpoint("grow_write");
        rc = with_retries(e, s, "appending to", write_once,
                          &(bytes_arg){s, p + off, k});
        off += k;
        if (rc || !pb || s->state != SK_SLICE_OPEN)
            continue;
        /* uploaded, not yet recorded */
        sk_crashpoint("part_put");
        rc = take_note(e, s);
    }
    return rc;
}

typedef struct copy_arg {
    const sk_slice *s;
    const skippr_object_info *info;
    size_t k; /* the staging piece */
} copy_arg;

static int copy_once(engine *e, void *arg)
{
    const copy_arg *c = arg;
    const sk_slice *s = c->s;
    return grow_ops(e)->stage_copy(owner(e, s)->ctx, s->handle, c->info,
                                   s->stage_off[c->k], s->stage_tag[c->k],
                                   s->stage_len[c->k]);
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
        rc = with_retries(e, s, "copying a staging piece into", copy_once,
                          &(copy_arg){s, info, k});
        if (!rc && s->state == SK_SLICE_OPEN)
            rc = take_note(e, s);
    }
    return rc;
}

/* The error line of a put that failed: the object, and whether it gave
 * up after retries. */
static void write_failed(engine *e, const sk_slice *s, int rc)
{
    char *key = sk_state_object_key(e->st, s, pl_slice_ext(e, s));
    sk_instance *sink = owner(e, s);
    const char *what = e->st->grow.part_bytes ? "uploading a part of"
                                              : "appending to";
    e->sink_failed = 1;
    if (rc == SKIPPR_RETRY)
        plugin_failed(sink, "%s: %s %s failed %d times; giving up",
                      sink->label, what, key ? key : "an object",
                      MAX_ATTEMPTS);
    else
        plugin_failed(sink, "%s: %s %s failed: %s", sink->label, what,
                      key ? key : "an object", skippr_status_str(rc));
    sk_free(key);
}

static int put(void *ud, sk_slice *s, const void *p, size_t n)
{
    engine *e = ud;
    int rc;
    if (!s->handle && (rc = grow_attach(e, s, s->pushed)))
        return rc;
    rc = write_parts(e, s, p, n);
    if (rc)
        write_failed(e, s, rc);
    return rc;
}

/* Every instance's sync(): those that appended nothing since return at
 * once (the File sink's one syncfs covers the file system). */
static int sync_sink(void *ud)
{
    engine *e = ud;
    const skippr_sink_ops *ops = grow_ops(e);
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
    void *ctx = owner(e, a->s)->ctx;
    if (!a->src)
        return grow_ops(e)->stage_get(ctx, a->info, a->off, a->tag, a->dst,
                                      a->len);
    sk_crashpoint("stage_put");
    return grow_ops(e)->stage_put(ctx, a->info, a->off, a->tag, a->src,
                                  a->len);
}

/* A staging piece of s at off: stored from src, or (src NULL) read back
 * into dst; retried as uploads are. */
static int piece_io(engine *e, const sk_slice *s, uint64_t off,
                    uint64_t tag, const void *src, void *dst, size_t len)
{
    int put = src != NULL;
    char sid[40];
    skippr_object_info info;
    char *key = open_info(e, s, sid, sizeof sid, &info);
    if (!key)
        return SKIPPR_NOMEM;
    sk_instance *sink = owner(e, s);
    int rc = with_retries(e, s, put ? "storing a staging piece of"
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

/* sk_grow_hooks.fetch */
static int fetch(void *ud, const sk_slice *s, uint64_t off, uint64_t tag,
                 void *buf, size_t len)
{
    return piece_io(ud, s, off, tag, NULL, buf, len);
}

/* sk_grow_hooks.stage */
static int stage(void *ud, sk_slice *s, uint64_t off, uint64_t tag,
                 const void *p, size_t n)
{
    return piece_io(ud, s, off, tag, p, NULL, n);
}

/* Over the disk budget: every open parted slice's bytes in TAIL frames
 * become a staging piece in the sink, so that the WAL segments holding
 * them can go (the caller commits, rotates and collects). *n: how many. */
int pl_grow_stage(engine *e, size_t *n)
{
    sk_state *st = e->st;
    *n = 0;
    if (!st->grow.stage)
        return SKIPPR_OK;
    sk_buf t, f;
    sk_buf_init(&t, SK_WAL_MAX_PAYLOAD - 64);
    sk_buf_init(&f, SK_WAL_MAX_PAYLOAD + 64);
    int rc = SKIPPR_OK;
    for (size_t i = 0; i < st->nlive && !rc; i++) {
        sk_slice *s = st->live[i];
        if (s->state != SK_SLICE_OPEN || !s->streamed || !s->walled)
            continue;
        uint64_t from = s->pushed + s->staged;
        sk_buf_reset(&t);
        rc = sk_state_read_tail(st, s, from, from + s->walled, &t, &f);
        uint64_t tag = st->stage_tag++;
        if (!rc)
            rc = stage(e, s, from, tag, t.data, t.len);
        if (!rc && (rc = sk_state_staged(st, s, tag)) == SKIPPR_OK)
            (*n)++;
    }
    sk_buf_free(&t);
    sk_buf_free(&f);
    return rc;
}

static int put_all(void *ud, sk_slice **v, size_t n)
{
    return pl_grow_parallel(ud, v, n, NULL);
}

/* sk_grow_hooks.copy: open slice s's first staging piece becomes a part
 * of its growing object. */
static int copy(void *ud, sk_slice *s)
{
    engine *e = ud;
    char sid[40];
    skippr_object_info info;
    char *key = open_info(e, s, sid, sizeof sid, &info);
    if (!key)
        return SKIPPR_NOMEM;
    int rc = s->handle ? SKIPPR_OK : grow_attach(e, s, s->pushed);
    if (!rc && (rc = copy_pieces(e, s, &info, 1)))
        write_failed(e, s, rc);
    sk_free(key);
    return rc;
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
    char *key = open_info(e, s, sid, sizeof sid, &info);
    if (!key)
        return SKIPPR_NOMEM;
    sk_instance *sink = owner(e, s);
    int rc = grow_ops(e)->grow_discard(sink->ctx, &info);
    /* Its first commit may have staged a tail whose STAGE frame the
     * crash lost (see pl_grow_init): its pieces go too. */
    if (!rc && sink_stages(e))
        rc = grow_ops(e)->stage_clear(sink->ctx, &info);
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
        st->grow.fetch = fetch;
        st->grow.stage = stage;
        if (sink_copies(e))
            st->grow.copy = copy;
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

/* How many of sealed slice s's first staging pieces the sink makes parts
 * by itself (stage_copy): those from its durable length on, each of at
 * least SKIPPR_COPY_MIN_BYTES (a smaller one, and every one after it, is
 * read back into the last part). Their bytes in *bytes. */
static size_t copyable(const engine *e, const sk_slice *s, uint64_t *bytes)
{
    uint64_t at = s->pushed;
    size_t k = 0;
    while (sink_copies(e) && k < s->nstaged && s->stage_off[k] == at &&
           s->stage_len[k] >= SKIPPR_COPY_MIN_BYTES)
        at += s->stage_len[k++];
    *bytes = at - s->pushed;
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
    sk_instance *sink = owner(e, s);
    const skippr_sink_ops *ops = grow_ops(e);
    int rc, first = f->tries++ == 0;
    /* Only a retry can find it complete (finish_parted asked for a slice
     * from before a crash already). */
    if (!s->handle && first) {
        if ((rc = grow_attach(e, s, s->pushed)))
            return rc;
    } else if (!s->handle) {
        rc = ops->object_check ? ops->object_check(sink->ctx, info)
                               : SKIPPR_NOENT;
        if (rc == SKIPPR_OK) {
            sk_info("object %s already complete (slice %s)", s->object_key,
                    info->slice_id);
            return SKIPPR_OK;
        }
        if (rc != SKIPPR_NOENT && rc != SKIPPR_CHANGED)
            return rc;
        if ((rc = grow_attach(e, s, s->pushed)))
            return rc;
    }
    rc = copy_pieces(e, s, info, f->ncopy);
    if (!rc && f->tn)
        rc = write_parts(e, s, f->tp, f->tn);
    if (rc) {
        ops->grow_close(sink->ctx, s->handle);
        s->handle = NULL;
        return rc;
    }
    sk_crashpoint("grow_commit");
    rc = ops->grow_commit(sink->ctx, s->handle, info);
    s->handle = NULL;
    return rc;
}

typedef struct clear_arg {
    const sk_slice *s;
    const skippr_object_info *info;
} clear_arg;

static int clear_once(engine *e, void *arg)
{
    const clear_arg *c = arg;
    return grow_ops(e)->stage_clear(owner(e, c->s)->ctx, c->info);
}

/* A complete object's staging pieces go (before DONE: a crash in between
 * clears them again). */
static int clear_pieces(engine *e, sk_slice *s,
                        const skippr_object_info *info)
{
    if (!s->staged_ever)
        return SKIPPR_OK;
    return with_retries(e, s, "clearing the staging pieces of", clear_once,
                        &(clear_arg){s, info});
}

/* Finish sealed parted slice s (S3): its tail (in memory, or read back
 * from its staging pieces and TAIL frames) becomes the last part;
 * retried as uploads are. */
static int finish_parted(engine *e, sk_slice *s)
{
    sk_instance *sink = owner(e, s);
    char sid[40];
    skippr_object_info info;
    grow_info(e, s, s->object_key, sid, sizeof sid, &info);
    int rc = SKIPPR_OK;
    if (s->recovered && !s->handle && grow_ops(e)->object_check) {
        /* A crash after the Complete: then its tail may be gone (its
         * staging pieces deleted), and nothing is written again. */
        rc = grow_ops(e)->object_check(sink->ctx, &info);
        if (rc == SKIPPR_OK) {
            sk_info("object %s already complete (slice %s)", s->object_key,
                    sid);
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
    sk_buf t, f;
    sk_buf_init(&t, SK_WAL_MAX_PAYLOAD - 64);
    sk_buf_init(&f, SK_WAL_MAX_PAYLOAD + 64);
    const uint8_t *tp = NULL;
    size_t tn = 0;
    if (s->mem_off == s->pushed &&
        s->pushed + s->open_block.len == s->object_bytes) {
        if (lead < s->open_block.len) {
            tp = s->open_block.data + lead;
            tn = s->open_block.len - (size_t)lead;
        }
    } else {
        rc = sk_state_read_tail(e->st, s, s->pushed + lead,
                                s->pushed + s->staged + s->walled, &t, &f);
        if (!rc && s->pushed + lead + t.len != s->object_bytes)
            rc = SKIPPR_CORRUPT;
        tp = t.data;
        tn = t.len;
    }
    sk_buf_free(&f);
    if (rc) {
        sk_error("slice %s: its tail in the WAL does not make up its "
                 "object (%s)", sid, skippr_status_str(rc));
        sk_buf_free(&t);
        return rc;
    }
    rc = with_retries(e, s, "finishing", finish_parted_once,
                      &(finish_arg){s, ncopy, tp, tn, &info, 0});
    sk_buf_free(&t);
    if (!rc)
        rc = clear_pieces(e, s, &info);
    if (rc)
        e->sink_failed = 1;
    if (rc == SKIPPR_RETRY)
        plugin_failed(sink, "%s: finishing %s failed %d times; giving up",
                      sink->label, s->object_key, MAX_ATTEMPTS);
    else if (rc)
        plugin_failed(sink, "%s: finishing %s failed: %s", sink->label,
                      s->object_key, skippr_status_str(rc));
    return rc;
}

/* Finish sealed streamed slice s: its object becomes visible under its
 * key (durable with the sink's next sync()). After a crash its growing
 * object may already have been renamed: then the object itself is
 * checked. */
int pl_grow_finish(engine *e, sk_slice *s)
{
    sk_instance *sink = owner(e, s);
    const skippr_sink_ops *ops = grow_ops(e);
    int rc = SKIPPR_OK;
    if (e->st->grow.part_bytes)
        return finish_parted(e, s);
    if (!s->handle) {
        rc = grow_attach(e, s, s->object_bytes);
        if (rc == SKIPPR_NOENT && ops->object_check) {
            char sid[40];
            skippr_object_info info;
            grow_info(e, s, s->object_key, sid, sizeof sid, &info);
            rc = ops->object_check(sink->ctx, &info);
            if (rc == SKIPPR_OK) {
                sk_info("object %s already complete (slice %s)",
                        s->object_key, sid);
                return SKIPPR_OK;
            }
            sk_error("%s: slice %s was sealed but neither its growing "
                     "object nor %s is there whole (%s)", sink->label, sid,
                     s->object_key, skippr_status_str(rc));
            return SKIPPR_CORRUPT;
        }
        if (rc)
            return rc;
    }
    char sid[40];
    skippr_object_info info;
    grow_info(e, s, s->object_key, sid, sizeof sid, &info);
    sk_crashpoint("grow_commit");
    rc = ops->grow_commit(sink->ctx, s->handle, &info);
    s->handle = NULL;
    if (rc)
        plugin_failed(sink, "%s: finishing %s failed: %s", sink->label,
                      s->object_key, skippr_status_str(rc));
    return rc;
}

/* An open streamed slice without records (its records went elsewhere
 * after a restart): its growing object goes, and so does the slice. */
int pl_grow_forget(engine *e, sk_slice *s)
{
    if (s->handle) {
        grow_ops(e)->grow_close(owner(e, s)->ctx, s->handle);
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
            grow_ops(e)->grow_close(owner(e, s)->ctx, s->handle);
            s->handle = NULL;
        }
    }
}
