/* Group commit, sealing and the upload batch: commits make appended
 * records and unit progress durable; slices due (age, size, the WAL's
 * disk budget) are sealed with their object's size and CRC; every sealed
 * slice is written on up to upload_concurrency threads, then recorded DONE
 * in order; old WAL segments are collected.
 *
 * Owns: the upload batch and its worker threads, for one call.
 * Thread: the pipeline thread, which starts and joins the upload threads.
 */
#include "pipeline/engine.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#include <time.h>

#include "base/fault.h"
#include "pipeline/clock.h"
#include "pipeline/lister.h"
#include "pipeline/shape.h"
#include "pipeline/staging.h"

typedef struct upload_batch {
    sk_slice **slices;
    int *rcs; /* per slice; NOT_TRIED until an uploader takes it */
    size_t n;
    atomic_size_t next;
    atomic_int failed;
} upload_batch;

#define NOT_TRIED 1 /* no status code is positive */

typedef struct upload_worker {
    upload_batch *b;
    uploader *u;
    size_t written; /* objects committed, waiting for the sink's sync() */
    pthread_t thread;
} upload_worker;

static void *upload_main(void *arg)
{
    upload_worker *w = arg;
    upload_batch *b = w->b;
    for (;;) {
        size_t i = atomic_fetch_add(&b->next, 1);
        if (i >= b->n || atomic_load(&b->failed) || sk_stop_requested)
            break;
        if (sk_slice_streamed(b->slices[i]))
            continue; /* finished by upload_sealed() */
        b->rcs[i] = pl_upload_one(w->u, b->slices[i]);
        if (b->rcs[i])
            atomic_store(&b->failed, 1);
        else
            w->written++;
    }
    return NULL;
}

/* Write the n sealed slices on up to e->nup threads, then, on this thread
 * and in order, record DONE for each one written. After a failure no new
 * slice is started; those written still count, the rest stay sealed for
 * the next run. Returns the first failure. */
/* Growing objects are finished first, each by the instance that owns its
 * handle, one thread per instance (a rename each); the upload threads
 * skip them. A failure marks the batch failed. */
static void finish_grown(engine *e, upload_batch *b)
{
    int grown = 0;
    for (size_t i = 0; i < b->n; i++)
        grown |= sk_slice_streamed(b->slices[i]);
    if (!grown)
        return;
    if (!sk_stop_requested &&
        pl_grow_parallel(e, b->slices, b->n, b->rcs) != SKIPPR_OK)
        atomic_store(&b->failed, 1);
    if (atomic_load(&b->failed))
        return;
    sk_crashpoint("sink_commit"); /* renamed, not yet durable */
    int src = pl_grow_sync(e);
    for (size_t i = 0; i < b->n && src; i++)
        if (sk_slice_streamed(b->slices[i]) && b->rcs[i] == SKIPPR_OK)
            b->rcs[i] = src; /* nothing of it is recorded */
    if (src)
        atomic_store(&b->failed, 1);
}

/* Sinks that defer durability make the batch durable now. If one
 * instance fails, the run stops: nothing of the batch is recorded (what
 * other instances made durable is written again, with the same bytes, by
 * the next run). */
static void sync_batch(engine *e, upload_worker *ws, size_t nw,
                       upload_batch *b)
{
    const skippr_sink_ops *ops = e->sink->plugin->sink;
    if (!SKIPPR_OPS_HAS(skippr_sink_ops, ops, sync) || !ops->sync)
        return;
    for (size_t k = 0; k < nw; k++) {
        if (!ws[k].written)
            continue;
        sk_crashpoint("sink_commit");
        int src = ops->sync(ws[k].u->sink->ctx);
        if (!src)
            continue;
        plugin_failed(ws[k].u->sink, "%s: making %zu objects durable "
                      "failed: %s", ws[k].u->sink->label, ws[k].written,
                      skippr_status_str(src));
        for (size_t i = 0; i < b->n; i++)
            if (b->rcs[i] == SKIPPR_OK)
                b->rcs[i] = src;
        return;
    }
}

/* Record every slice of the batch the sink holds durably as DONE; the
 * first failure, if any. */
static int record_done(engine *e, upload_batch *b)
{
    int rc = SKIPPR_OK;
    for (size_t i = 0; i < b->n; i++) {
        if (b->rcs[i] == NOT_TRIED)
            continue;
        if (b->rcs[i]) {
            if (!rc)
                rc = b->rcs[i];
            continue;
        }
        sk_slice *s = b->slices[i];
        e->tally.objects++;
        sk_debug("wrote %s (%" PRIu64 " records, %" PRIu64 " bytes)",
                 sk_slice_object_key(s), sk_slice_records(s),
                 sk_slice_object_bytes(s));
        int drc = sk_state_done(e->st, s);
        if (drc)
            return drc;
    }
    if (!rc && sk_stop_requested && atomic_load(&b->next) < b->n)
        rc = SKIPPR_STOPPED;
    return rc;
}

static int upload_sealed(engine *e, sk_slice **slices, size_t n)
{
    if (n == 0)
        return SKIPPR_OK;
    int *rcs = sk_calloc(n, sizeof *rcs);
    size_t nw = (size_t)e->nup < n ? (size_t)e->nup : n;
    upload_worker *ws = sk_calloc(nw, sizeof *ws);
    if (!rcs || !ws) {
        sk_free(rcs);
        sk_free(ws);
        return SKIPPR_NOMEM;
    }
    upload_batch b = {.slices = slices, .rcs = rcs, .n = n};
    for (size_t i = 0; i < n; i++)
        rcs[i] = NOT_TRIED;
    for (size_t k = 0; k < nw; k++)
        ws[k] = (upload_worker){.b = &b, .u = &e->up[k]};
    finish_grown(e, &b);
    size_t started = 1; /* worker 0 runs on this thread */
    while (started < nw &&
           pthread_create(&ws[started].thread, NULL, upload_main,
                          &ws[started]) == 0)
        started++;
    upload_main(&ws[0]);
    for (size_t k = 1; k < started; k++)
        pthread_join(ws[k].thread, NULL);
    sync_batch(e, ws, nw, &b);
    int rc = record_done(e, &b);
    sk_free(ws);
    sk_free(rcs);
    return rc;
}

/* Event time: the earliest arrival time among the listed units not yet
 * done, or when all are, the latest one listed (units.c checks that the
 * listing comes in arrival order, else turns event time off). INT64_MIN
 * when unknown. */
int64_t pl_watermark(engine *e)
{
    if (!pl_clock_on(e->clock))
        return INT64_MIN;
    int64_t a;
    return pl_lister_undone_arrival(e->lister, &a) ? a
                                                   : pl_clock_latest(e->clock);
}

/* Bytes of s's object that the WAL holds. */
static uint64_t wal_held(const sk_slice *s)
{
    return sk_slice_streamed(s) ? sk_slice_walled(s) : sk_slice_bytes(s);
}

/* Whether open slice s is due (*due): forced; open for
 * buffer_threshold_seconds (wall clock); max_object_bytes reached; or its
 * time bucket ended allowed_lateness_seconds before the watermark wm
 * (*at: when, from the clock). */
static int slice_due(engine *e, const sk_slice *s, int64_t now, int64_t wm,
                     int force, int64_t *at, int *due)
{
    int rc = pl_clock_seal_at(e->clock, s, e->router,
                              e->cfg->allowed_lateness_seconds, at);
    *due = force ||
           now - sk_slice_opened_at(s) >= e->cfg->buffer_threshold_seconds ||
           sk_slice_bytes(s) >= (uint64_t)e->cfg->max_object_bytes ||
           (pl_clock_on(e->clock) && *at <= wm);
    return rc;
}

/* Whether any open slice is due now (wm: the watermark; *any), noting
 * when the next of the others is. */
static int any_due(engine *e, int64_t now, int64_t wm, int force, int *any)
{
    sk_state *st = e->st;
    int rc = SKIPPR_OK;
    *any = 0;
    pl_clock_flush_begin(e->clock);
    for (size_t i = 0; i < sk_state_nlive(st) && !rc; i++) {
        sk_slice *s = sk_state_slice_at(st, i);
        int64_t at;
        int due;
        if (sk_slice_state_of(s) != SK_SLICE_OPEN)
            continue;
        if ((rc = slice_due(e, s, now, wm, force, &at, &due)))
            break;
        if (due)
            *any = 1;
        else
            pl_clock_pending(e->clock, at);
    }
    pl_clock_flush_end(e->clock, wm);
    return rc;
}

/* Over the WAL's budget, a slice not due is sealed anyway when it is the
 * one of list[0..n) the WAL holds most of (a streamed slice holds none of
 * its bytes there but a parted one's tail). */
static int largest_held(sk_slice *const *list, size_t n, const sk_slice *s)
{
    const sk_slice *big = NULL;
    for (size_t k = 0; k < n; k++)
        if (sk_slice_state_of(list[k]) == SK_SLICE_OPEN &&
            wal_held(list[k]) > 0 &&
            (!big || wal_held(list[k]) > wal_held(big)))
            big = list[k];
    return big == s;
}

/* Seal s: its object's key, size and CRC32C in a SEAL frame. */
static int seal_one(engine *e, sk_slice *s)
{
    pl_clock_closed(e->clock, s, 1);
    e->tally.sealed++;
    sk_conv_kind ck = pl_slice_conv(e, s);
    char tail[300];
    size_t tl = pl_xml_trailer(s, tail, sizeof tail);
    if (ck == SK_CONV_NONE) /* the records and newlines (and a close tag) */
        return sk_state_seal(e->st, s, pl_slice_ext(e, s), tail, tl);
    /* A converted object: measure what delivery will write. */
    writer cw = {.mode = WRITE_ALL, .count_only = 1};
    skippr_buf scratch;
    skippr_buf_init(&scratch, SK_WAL_MAX_PAYLOAD + 64);
    int rc = pl_write_converted(e, s, ck, &cw, &scratch);
    skippr_buf_free(&scratch);
    return rc ? rc : sk_state_seal_as(e->st, s, pl_shape_ext(e->shape),
                                      cw.bytes, cw.crc);
}

/* Seal what is due among list[0..n) (a copy of the live slices: indexes
 * shift as slices leave); a forced flush forgets streamed slices that
 * hold no records (theirs went to other slices after a restart). */
static int seal_due(engine *e, sk_slice **list, size_t n, int64_t now,
                    int64_t wm, int force, int over_budget)
{
    int rc = SKIPPR_OK;
    for (size_t i = 0; i < n && !rc; i++) {
        sk_slice *s = list[i];
        if (sk_slice_state_of(s) == SK_SLICE_OPEN && sk_slice_records(s) == 0 &&
            sk_slice_streamed(s) && force) {
            pl_clock_closed(e->clock, s, 0);
            rc = pl_grow_forget(e, s);
            continue;
        }
        if (sk_slice_state_of(s) != SK_SLICE_OPEN || sk_slice_records(s) == 0)
            continue;
        int64_t at;
        int due;
        if (!(rc = slice_due(e, s, now, wm, force, &at, &due)) &&
            (due || (over_budget && largest_held(list, n, s))))
            rc = seal_one(e, s);
    }
    return rc;
}

/* Upload every sealed slice (those sealed before a crash too), then let
 * the WAL's old segments go: a full segment (or a drained run) starts a
 * new one, and what no live slice needs is deleted. list has room for
 * every live slice. */
static int upload_and_rotate(engine *e, sk_slice **list, int force,
                             size_t staged)
{
    sk_state *st = e->st;
    size_t nsealed = 0;
    for (size_t i = 0; i < sk_state_nlive(st); i++)
        if (sk_slice_state_of(sk_state_slice_at(st, i)) == SK_SLICE_SEALED)
            list[nsealed++] = sk_state_slice_at(st, i);
    int rc = upload_sealed(e, list, nsealed);
    if (!rc)
        rc = sk_wal_sync(sk_state_wal(st));
    uint64_t seg_max = SK_MIN((uint64_t)SEGMENT_BYTES,
                              (uint64_t)e->cfg->wal_disk_budget / 4);
    uint64_t active = sk_wal_active_size(sk_state_wal(st));
    if (!rc && (((force || staged) && active > 0) || active >= seg_max))
        rc = sk_state_rotate(st);
    return rc ? rc : sk_state_gc(st);
}

int pl_flush_slices(engine *e, int force)
{
    sk_state *st = e->st;
    int64_t now = (int64_t)time(NULL);
    int64_t wm = pl_watermark(e);
    int any;
    int rc = any_due(e, now, wm, force, &any);
    if (rc)
        return rc;
    uint64_t disk = sk_wal_disk_bytes(sk_state_wal(st));
    int over_budget = disk > (uint64_t)e->cfg->wal_disk_budget;
    if (!any && !over_budget && !force) {
        for (size_t i = 0; i < sk_state_nlive(st); i++)
            if (sk_slice_state_of(sk_state_slice_at(st, i)) == SK_SLICE_SEALED)
                any = 1;
        if (!any)
            return SKIPPR_OK;
    }
    rc = pl_commit(e, 1);
    if (rc)
        return rc;
    e->bytes_since_commit = 0;
    e->last_commit_ns = sk_now_ns();
    /* Over budget with tails of S3 objects in the WAL: they move to
     * staging pieces (made to count by another commit), and a new
     * segment lets the old ones go, instead of cutting objects small. */
    size_t staged = 0;
    if (over_budget && (rc = pl_grow_stage(e, &staged)))
        return rc;
    if (staged && (rc = pl_commit(e, 1)))
        return rc;
    size_t n = sk_state_nlive(st);
    sk_slice **list = sk_calloc(n ? n : 1, sizeof *list);
    if (!list)
        return SKIPPR_NOMEM;
    for (size_t i = 0; i < n; i++)
        list[i] = sk_state_slice_at(st, i);
    rc = seal_due(e, list, n, now, wm, force, over_budget);
    /* One fsync makes the whole batch of seals durable before any upload. */
    if (!rc && !(rc = sk_wal_sync(sk_state_wal(st)))) {
        sk_crashpoint("seal");
        rc = upload_and_rotate(e, list, force, staged);
    }
    sk_free(list);
    return rc;
}

/* Whether the WAL holds more than wal_disk_budget. */
int pl_wal_over_budget(const engine *e)
{
    return sk_wal_disk_bytes(sk_state_wal(e->st)) >
           (uint64_t)e->cfg->wal_disk_budget;
}

int pl_st_memory_over(const engine *e)
{
    return sk_state_block_memory(e->st) > (uint64_t)e->cfg->memory_budget;
}

/* Write what the state holds in memory out: new streamed slices
 * announced, their due buffers put to the sink (a thread per sink
 * instance), then the other blocks to the WAL (release: their buffers
 * given back). The order is the state's (state/streamed.h). */
int pl_flush(engine *e, int release)
{
    sk_slice **v = NULL;
    size_t n = 0;
    int rc = sk_state_announce(e->st);
    if (!rc)
        rc = sk_state_due_puts(e->st, &v, &n);
    for (size_t i = 0; i < n && !rc; i++) /* spilled ones made whole */
        rc = pl_grow_unspill(e, v[i]);
    if (!rc && n && !(rc = pl_grow_parallel(e, v, n, NULL)))
        sk_state_pushed(e->st, v, n);
    sk_free(v);
    return rc ? rc : sk_state_flush_blocks(e->st, release);
}

/* A group commit (durable 0: without waiting for the disk; see
 * sk_state_commit_as): a flush, the sink synced when it holds puts not
 * yet durable, then the state records them and the units' progress. */
int pl_commit(engine *e, int durable)
{
    int rc = pl_flush(e, 0);
    if (!rc && sk_state_sink_unsynced(e->st)) {
        sk_crashpoint("stream_sync");
        if (!(rc = pl_grow_sync(e)))
            sk_state_sink_synced(e->st);
    }
    if (!rc)
        rc = pl_grow_stage_tails(e);
    return rc ? rc : sk_state_commit_as(e->st, durable);
}

/* Over the memory budget: blocks go to the WAL, growing objects' buffers
 * to the sink. Parted slices (S3) put only whole parts, so if that was not
 * enough, a commit writes their tails to the WAL and a spill frees them. */
int pl_relieve_memory(engine *e)
{
    int rc = pl_flush(e, 1);
    if (rc || !sk_state_part_bytes(e->st) || !pl_st_memory_over(e))
        return rc;
    if ((rc = pl_commit(e, 1)))
        return rc;
    e->bytes_since_commit = 0;
    e->last_commit_ns = sk_now_ns();
    sk_state_spill(e->st);
    return SKIPPR_OK;
}

/* Group commit: durable every commit_interval_ms (and when forced);
 * in between, every COMMIT_BYTES of input, a commit that only starts the
 * disk writing, so that reading never stalls on an fsync mid-run and a
 * process crash still re-reads at most COMMIT_BYTES. */
int pl_maybe_commit(engine *e, int force)
{
    uint64_t now = sk_now_ns();
    int due = force || now - e->last_commit_ns >=
                           (uint64_t)e->cfg->commit_interval_ms * 1000000ULL;
    if (pl_grow_on(e) && !force && e->cfg->commit_interval_ms > 0) {
        /* Slices grow in the sink: a commit syncs it, and after each
         * sync the kernel writes again what the next appends touch: the
         * growing objects' inodes and last pages, their folders.
         * (Keeping the last pages out of the objects until the seal was
         * tried: it saved nothing measurable, see PERFORMANCE.md.)
         * Spacing commits so that each carries 32 pages per open slice
         * keeps that near 3% of the bytes written (ten pages measured 6
         * to 8% at 5,600 slices, above the directories' own cost); the
         * re-read after a crash is bounded by the same spacing, 128 KiB
         * an open slice. There are
         * no lazy commits: one that does not sync the sink could not be
         * trusted after a power loss. commit_interval_ms 0 still commits
         * after every window, as asked. */
        uint64_t spacing = SK_MAX((uint64_t)COMMIT_BYTES,
                                  (uint64_t)sk_state_nlive(e->st) * 32 * 4096);
        /* Parted slices (S3): each commit writes every tail that no part
         * holds into the WAL; spaced by the memory budget, most bytes
         * reach a part first and never touch the disk. */
        if (sk_state_part_bytes(e->st))
            spacing = SK_MAX((uint64_t)COMMIT_BYTES,
                             SK_MIN((uint64_t)e->cfg->memory_budget / 2,
                                    (uint64_t)sk_state_nlive(e->st) *
                                        sk_state_part_bytes(e->st)));
        if (!due || e->bytes_since_commit < spacing)
            return SKIPPR_OK;
    }
    if (!due && e->bytes_since_commit < COMMIT_BYTES)
        return SKIPPR_OK;
    int rc = pl_commit(e, due);
    e->bytes_since_commit = 0;
    if (due)
        e->last_commit_ns = now;
    return rc;
}
