/* Growing objects: data slices that stream into a sink with
 * SKIPPR_SINK_GROWS (the File sink; S3, by parts) while they are open, so
 * that each byte is written once, into the object itself, instead of into
 * the WAL and then again into the object. The state decides when bytes move
 * (state/grow.h); this file is how they reach the sink: a flush's puts in
 * parallel and the sink's sync (which seal.c's pl_commit calls between the
 * state's steps), the put a full buffer asks for as records are appended,
 * and recovery of growing objects a crash left. Staging pieces and the
 * finish of sealed ones (the rename, the multipart Complete) are in
 * staging.c; one object's sink calls, which both make, in growobj.c.
 *
 * Owns: the map of the growing objects' handles (handles.h), made by
 * pl_grow_init and let go of, with the handles left, by pl_grow_release.
 * Thread: the pipeline thread, and while it waits, one thread per sink
 * instance (a flush's puts, a batch's finishes). Each slice belongs to
 * one instance, uploaders[id % upload_concurrency], which makes and uses
 * its handle: an instance is never called from two threads at once.
 */
#include "pipeline/growobj.h"
#include "pipeline/staging.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "base/fault.h"

int pl_grow_on(const engine *e)
{
    return pl_sink_grows(e) && !e->streaming;
}

/* The forms whose slices grow in the sink: those written as they come,
 * with no conversion (an XML slice with a root the state keeps in the
 * WAL itself). Listed sources only (pl_grow_init sets none for a
 * streaming source): its acknowledgements ask for a durable commit every
 * few hundred milliseconds, and with growing objects each would be a sync
 * of the whole output file system (an MQTT broker at its defaults then
 * drops messages while skippr waits); the WAL makes each one small fsync. */
static uint32_t stream_forms(const engine *e)
{
    static const sk_slice_form forms[] = {SK_FORM_LINES, SK_FORM_MULTILINE,
                                          SK_FORM_CSV, SK_FORM_XML};
    uint32_t bits = 0;
    for (size_t i = 0; i < sizeof forms / sizeof *forms; i++)
        if (pl_form_conv(e, forms[i]) == SK_CONV_NONE)
            bits |= 1u << forms[i];
    return bits;
}

/* Put s's buffer (sk_state_put_len bytes of it) to its growing object,
 * made or reopened on first use. */
static int put(engine *e, sk_slice *s)
{
    int rc;
    if (!pl_grow_handle(e, s) &&
        (rc = pl_grow_attach(e, s, sk_slice_pushed(s))))
        return rc;
    size_t held;
    rc = pl_grow_write(e, s, sk_slice_buffer(s, &held),
                       (size_t)sk_state_put_len(e->st, s));
    if (rc)
        pl_grow_write_failed(e, s, rc);
    return rc;
}

int pl_grow_put_one(engine *e, sk_slice *s)
{
    int rc = pl_grow_unspill(e, s);
    if (!rc)
        rc = put(e, s);
    if (!rc)
        sk_state_pushed_one(e->st, s);
    return rc;
}

/* Every instance's sync(): those that appended nothing since return at
 * once (the File sink's one syncfs covers the file system). */
int pl_grow_sync(engine *e)
{
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
        if (pl_grow_owner_up(j->e, sk_slice_id(s)) != &j->e->up[j->k] ||
            (j->rcs && !sk_slice_streamed(s)))
            continue;
        if (j->rcs)
            j->rc = j->rcs[i] = pl_grow_finish(j->e, s);
        else
            j->rc = put(j->e, s);
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
    if (!rc && pl_sink_stages(e))
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
    size_t n = sk_state_norphans(st);
    for (size_t i = 0; i < n; i++) {
        int rc = discard(e, sk_state_orphan_at(st, i));
        if (rc)
            return rc;
    }
    if (n)
        sk_info("recovery: removed %zu unfinished object%s of slices that "
                "never reached a commit", n, n == 1 ? "" : "s");
    sk_state_orphans_clear(st);
    return SKIPPR_OK;
}

int pl_grow_init(engine *e)
{
    sk_state *st = e->st;
    int streamed = 0;
    for (size_t i = 0; i < sk_state_nlive(st); i++)
        streamed |= sk_slice_streamed(sk_state_slice_at(st, i));
    /* Streaming sources keep the WAL path (see stream_forms()), and with it
     * their lazy commits: no slice streams. */
    if (!pl_grow_on(e)) {
        if (streamed || sk_state_norphans(st)) {
            sk_error("%s: the state holds objects growing in a sink that "
                     "grows objects in place, and this sink does not; run "
                     "the pipeline with its earlier sink to finish them",
                     e->sink->label);
            return SKIPPR_INVAL;
        }
        return SKIPPR_OK;
    }
    if (!(e->handles = pl_handles_new()))
        return SKIPPR_NOMEM;
    sk_grow_config h = {.stream_forms = stream_forms(e),
                        .part_bytes = pl_sink_part_bytes(e)};
    if (h.part_bytes && pl_sink_stages(e)) {
        h.stages = 1;
        h.wal_budget = (uint64_t)e->cfg->wal_disk_budget;
    }
    sk_state_set_grow(st, &h);
    size_t n = sk_state_nlive(st);
    if (h.stages) {
        /* A piece is put before its STAGE frame is written: a crash in
         * between leaves a piece that the WAL does not name. So every
         * slice a run inherits lists its staging folder when it is done
         * (one listing each), not only those with recorded pieces. */
        sk_state_assume_pieces(st);
    }
    for (size_t i = 0; i < n && !h.part_bytes; i++) {
        const sk_slice *s = sk_state_slice_at(st, i);
        size_t notes;
        sk_slice_notes(s, &notes);
        if (sk_slice_walled(s) || notes || sk_slice_staged_ever(s)) {
            sk_error("%s: the state holds objects growing by parts (S3), "
                     "and this sink does not grow them so; run the "
                     "pipeline with its earlier sink to finish them",
                     e->sink->label);
            return SKIPPR_INVAL;
        }
    }
    return discard_orphans(e);
}

/* An open streamed slice without records (its records went elsewhere
 * after a restart): its growing object goes, and so does the slice. */
int pl_grow_forget(engine *e, sk_slice *s)
{
    pl_grow_close(e, s);
    int rc = discard(e, s);
    return rc ? rc : sk_state_forget(e->st, s);
}

/* Teardown: let go of every handle; the objects stay for the next run. */
void pl_grow_release(engine *e)
{
    if (!e->handles)
        return;
    uint64_t id;
    void *h;
    while ((h = pl_handle_take_any(e->handles, &id)))
        pl_grow_ops(e)->grow_close(pl_grow_owner_up(e, id)->sink->ctx, h);
    pl_handles_free(e->handles);
    e->handles = NULL;
}
