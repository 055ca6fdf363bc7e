/* The pipeline's private header: the engine and the structures its stages
 * share, and the calls one stage makes into another. Only runtime/pipeline/
 * includes it; the rest of the engine sees pipeline/pipeline.h.
 *
 * The stages, one file each (each file opens with what it does, what it
 * owns and which thread runs it):
 *
 *   pipeline.c  setup, the run loop, teardown         pipeline thread
 *   units.c     listing in batches; lanes in flight   pipeline thread
 *   lanes.c     the lanes: made, fed, drained, shed   pipeline thread
 *   mark.c      the listing mark (incremental listing) pipeline thread
 *   read.c      open a unit, read, decompress         pipeline thread; pool
 *   frame.c     frame, peek and route a window        pool workers
 *   apply.c     append a window's records in order    pipeline thread
 *   append.c    slices: records, dead letters, puts   pipeline thread
 *   slicefmt.c  a slice's extension, conversion       any thread
 *   clock.c     event time: arrivals, watermark, late pipeline thread
 *   seal.c      commit, seal, upload batch, WAL GC    pipeline thread
 *   deliver.c   write one sealed slice to the sink    upload threads
 *   grow.c      slices growing in place in the sink   pipeline thread
 *   growobj.c   one growing object's sink calls       caller's
 *   handles.c   growing objects' handles by slice id  any (a mutex)
 *   staging.c   staging pieces; finishing sealed ones pipeline; sink threads
 *   stream.c    streaming sources: emit, sync, ack    pipeline thread
 *   verify.c    skipprd verify: both sides' digests   pipeline thread
 *   verifyrun.c skipprd verify: the passes           pipeline thread
 *   verifyreport.c skipprd verify: the report         pipeline thread
 *   verifysince.c  verify --since-state: the mark     pipeline thread
 *   verifyshards.c verify by shards: store, merge    pipeline thread
 *   report.c    progress line, minute report, status  pipeline thread
 *   shard.c     shards: units owned, state name, takeover pipeline thread
 *   lease.c     the state in a bucket: store and lease pipeline thread
 *
 * Cross-stage functions carry the prefix pl_; a function without it is
 * private to its file.
 */
#ifndef SK_PIPELINE_ENGINE_H
#define SK_PIPELINE_ENGINE_H

#include <stddef.h>
#include <stdint.h>

#include <skippr/backoff.h> /* one retry schedule for all */
#include "base/common.h"
#include "format/convert.h"
#include "format/csvpeek.h"
#include "format/decompress.h"
#include "format/json.h"
#include "format/xmlpeek.h"
#include "verify/digest.h"
#include "config/config.h"
#include "plugin/loader.h"
#include "route/route.h"
#include "sched/pool.h"
#include "state/remote.h"
#include "state/state.h"
#include "pipeline/tally.h"

#define WINDOW_BYTES (8u << 20)   /* decompressed bytes framed per round */
#define PIECE_BYTES (1u << 20)    /* a large window is cut into tasks this big */
#define MAX_PIECES 16             /* tasks per window at most */
#define RAW_READ (1u << 20)       /* one source read */
#define COMMIT_BYTES (16u << 20)  /* group commit after this much input */
#define OUT_BUF (1u << 20)        /* sink write size */
#define MAX_ATTEMPTS 8            /* sink retries before giving up */
#define SEGMENT_BYTES (64u << 20) /* WAL segment size before rotation */
#define LANES_PER_THREAD 3        /* units in flight per worker */
#define TRIM_EVERY_NS 5000000000ULL /* freed heap pages back this often */
#define MAX_LANES 64
#define MAX_UPLOADERS 256         /* upload_concurrency's bound */
#define REPORT_NS 60000000000ULL /* the minute report's period */
#define LEDGER_HELD 4096          /* finished units held in memory */
#define DOC_MAX_BYTES (1u << 30)  /* a streaming document (skippr_message) */
#define INFLATE_FREE (64u << 20)  /* decompressed bytes never held to the
                                   * max_inflate_ratio */

/* ---- framing tasks ------------------------------------------------------ */

typedef struct rec_out {
    size_t start, end;
    const char *reason; /* NULL: a record; else why it is dead-lettered */
    uint32_t next;      /* next record of the same group, or NO_REC */
    uint8_t multiline;  /* a JSON record that spans lines */
} rec_out;

#define NO_REC UINT32_MAX

/* The records of one piece that share a partition key (the piece's memo
 * id), chained in input order. The worker also checksums their output
 * bytes (each record and a newline), so the pipeline thread looks the slice
 * up once per group and only copies bytes. */
typedef struct group {
    uint32_t first, last;
    uint32_t nrec;
    uint32_t crc;       /* CRC32C of the group's output bytes */
    uint32_t xpow;      /* sk_crc32c_xpow(out_bytes), to join it on */
    uint64_t out_bytes; /* those bytes' count */
    uint8_t multiline;  /* a JSON record of it spans lines */
    sk_digest digest;   /* skipprd verify: its records' digest, made on
                         * the worker that framed them (no CRC then) */
} group;

typedef struct engine engine;
typedef struct pl_lister pl_lister;
typedef struct lane lane;

/* One uploader: a sink instance with its own buffers. Sealed slices are
 * written by up to upload_concurrency threads at once, each with its own
 * uploader, because a plugin instance is used by one thread at a time. */
typedef struct uploader {
    engine *e;
    sk_instance *sink;
    skippr_buf out;     /* sink write buffer */
    skippr_buf scratch; /* WAL read-back */
    skippr_backoff backoff; /* retry waits: retry_backoff_ms doubling to
                             * 100 times it, jittered (backoff.h) */
} uploader;

typedef struct piece {
    sk_task task;
    engine *e;
    const uint8_t *buf;
    size_t len;      /* window length */
    size_t from, to; /* this piece */
    int final;
    sk_json_framer fr_in, fr_out;
    int csv;                   /* the unit is CSV: the csv framer applies */
    sk_csv_framer csv_in, csv_out; /* shallow: the lane owns the header */
    sk_csv_decoder *csvdec;    /* picked quoted cells; made when needed */
    int xml;                   /* the unit is XML */
    sk_xml_framer xml_in, xml_out; /* shallow: the lane owns the header */
    size_t skip_before;        /* resuming: records starting before this
                                * window offset are already durable */
    rec_out *recs;
    size_t nrec, cap;
    size_t ndead;       /* records with a reason */
    group *groups;      /* by memo id: in order of first appearance */
    size_t ngroups, gcap;
    sk_memo memo;       /* partition keys built in this piece */
    skippr_buf scratch;
    size_t stop;
    int need_more;
    int failed; /* allocation failure */
} piece;

typedef struct todo {
    char *id;
    char *version;
    int64_t size;
    int64_t offset;
    uint32_t flags;
    int64_t arrival; /* event time: what the key names (eventtime.c) */
    int done;        /* copied in this batch */
} todo;

struct engine {
    const sk_pipeline_cfg *cfg;
    int once;     /* sk_run_opts.once: drain, flush, exit */
    int progress; /* sk_run_opts.progress: draw the progress line */
    sk_state *st;
    sk_registry reg;
    sk_instance *src, *sink; /* sink: uploaders[0]'s, for labels */
    const sk_yaml_doc *doc;  /* the config, for instances made later */
    sk_instance *store;      /* skipprd_el_storage_mode: s3, else NULL */
    struct sk_remote *remote; /* the lease and the store's copy */
    uploader *up;
    int nup;
    sk_router *router;
    sk_pool *pool;
    int nthreads;
    struct pl_lanes *lanes; /* units in flight (lanes.h) */
    struct pl_lister *lister; /* the listing (lister.h) */
    struct pl_mark *mark; /* the listing mark (mark.c); NULL until loaded */
    struct pl_clock *clock; /* event-time sealing's (clock.h) */
    struct pl_retrynews *retry; /* what a failing sink's retries say */
    struct pl_verify *verify; /* skipprd verify's (verify.h); NULL for a
                               * copy, which then reads into the state */
    struct pl_handles *handles; /* growing objects' (handles.h); NULL
                                 * while slices do not grow in the sink */
    pl_tally tally; /* the run's counts (tally.h) */
    int run_ended;                 /* the summary has been logged */
    int begun; /* past the checks (preflight, state, claim): a run that
                * stops earlier said why in one line and has no summary */
    struct pl_metrics *metrics;    /* metrics.c; NULL without an endpoint */
    uint64_t bytes_since_commit, last_commit_ns, start_ns;
    uint64_t last_seal_check_ns;
    uint64_t last_trim_ns;     /* sk_release_free_memory, at most every
                                * TRIM_EVERY_NS while units are copied */
    struct pl_report *report; /* the minute report, the progress line */
    uint64_t seal_checks; /* streaming: free memory is released every 10th */
    struct pl_shape *shape; /* paths, columns, extension (shape.h) */
    /* streaming sources */
    int streaming;            /* the source has poll(), not list() */
    struct pl_streamer *stream; /* stream.c's: its units, the document lane */
    /* The document being framed (stream.c sets it), whose sender
     * pl_dead_letter tells of its first bad record (append.c). */
    const skippr_message *doc_msg;
    uint64_t doc_dead; /* its records dead-lettered so far */
};

/* A plugin call failed: an error line, unless the plugin already logged
 * one saying why (then the engine's line is context, at info level). */
#define plugin_failed(inst, ...)                                               \
    sk_log(sk_instance_logged_error(inst) ? SKIPPR_LOG_DEBUG : SKIPPR_LOG_ERROR, \
           __VA_ARGS__)

static inline int ws(uint8_t c)
{
    return c == ' ' || c == '\n' || c == '\r' || c == '\t';
}

/* Which records of a slice a writer writes. A dead-letter slice holds
 * pairs: a metadata line, then the dead record's bytes. */
typedef enum write_mode {
    WRITE_ALL = 0,   /* a data slice: every record */
    WRITE_DEAD_DATA, /* the .bad object: the second of each pair */
    WRITE_DEAD_META  /* the .meta.jsonl sidecar: the first of each pair,
                      * with the record's offset in the .bad object */
} write_mode;

/* A slice on its way to the sink, or measured for sealing (count_only). */
typedef struct writer {
    uploader *u;
    void *h;
    int rc;
    uint64_t bytes;
    uint32_t crc;
    write_mode mode;
    uint64_t n;
    uint64_t data_off; /* meta mode: offset of the record in the data object */
    int count_only;
    int records_mode;    /* SKIPPR_SINK_RECORDS: one object_write a record */
    sk_conv *conv;       /* records are converted (pl_write_converted) */
    skippr_buf *conv_out;    /* one record's converted bytes */
    const char *conv_why; /* why a record could not be converted */
} writer;

/* Reading a unit. The pipeline thread makes every source call (an instance
 * is used by one thread at a time); decompression runs in the lane's task. */
typedef struct reader {
    const skippr_source_ops *ops;
    void *ctx;
    void *stream;
    sk_comp comp;
    sk_decomp *dec;
    uint8_t *raw; /* RAW_READ bytes, owned by the lane */
    size_t raw_len, raw_pos;
    int raw_eof;
    int done;          /* no more decompressed bytes */
    const char *error; /* decompression failure */
    uint64_t in_total, out_total; /* compressed bytes used, bytes made */
    int64_t max_ratio; /* max_inflate_ratio; 0: none */
    int bomb;          /* out_total outgrew max_ratio x in_total */
} reader;

/* A lane carries one unit from open to done. Each round the pipeline thread
 * reads the unit's next bytes into the lane's window and hands it to the
 * pool, which decompresses and frames it (pl_lane_read_submit), and the
 * pipeline thread applies the records in order (pl_lane_apply). Several
 * lanes are in flight, so small objects keep every worker busy while the
 * pipeline thread reads and applies; a large object's window is also split
 * into pieces. */
struct lane {
    engine *e;
    todo *t;           /* NULL: idle */
    sk_unit_rec *u;    /* the unit's ledger record (stable while not done) */
    reader r;
    skippr_buf win;        /* decompressed bytes not yet consumed */
    size_t target;     /* window fill target */
    size_t widest;     /* ... widened up to this for a big record */
    uint64_t base;     /* unit offset of win.data[0] */
    int first;         /* a BOM may still lead the window */
    int final;         /* the window holds the unit's last byte */
    uint64_t made;     /* bytes added to the window this round */
    sk_json_framer fr;
    int fmt;           /* SK_FORMAT_JSON or _CSV; SK_FORMAT_AUTO: sniff */
    const char *fmt_error; /* the unit's format cannot be copied */
    sk_csv_framer csv; /* CSV units: owns the header */
    sk_xml_framer xml; /* XML units: owns the header */
    uint64_t skip_until; /* a CSV or XML unit resumed: records before
                          * this unit offset are durable, framed again
                          * but dropped */
    piece *pieces;     /* MAX_PIECES of them */
    size_t npieces;
    sk_task inflate;   /* compressed units: decompress, then frame */
    sk_group g;
    int busy;          /* submitted, not yet applied */
    int doc;           /* frames streaming documents: u is no ledger's */
    sk_unit_rec *scratch; /* a verify's unit record (no ledger's), made
                           * on first use */
};

/* frame.c: framing tasks (pool workers) */
void pl_piece_run(piece *p);
void pl_piece_task(sk_task *t);

/* append.c: records into slices, dead letters, a slice's format */
/* sk_state_append (and _raw) with the put a full streamed buffer asks
 * for: SKIPPR_OK or a failure. */
int pl_append(engine *e, sk_slice *s, const void *rec, size_t len);
int pl_append_raw(engine *e, sk_slice *s, const void *rec, size_t len);
int pl_dead_letter(engine *e, const char *unit, uint64_t offset,
                   const uint8_t *bytes, size_t len, const char *reason);
int pl_append_json(engine *e, sk_slice *s, const char *key, size_t klen,
                   const uint8_t *rec, size_t len, const char *unit,
                   uint64_t offset, int spans);

/* slicefmt.c: what a slice's format means for its object */
int pl_slice_is_multiline(const sk_slice *s);
const char *pl_slice_ext(const engine *e, const sk_slice *s);
sk_conv_kind pl_form_conv(const engine *e, sk_slice_form form);
sk_conv_kind pl_slice_conv(const engine *e, const sk_slice *s);
size_t pl_xml_trailer(const sk_slice *s, char *out, size_t cap);

/* deliver.c: writing one sealed slice through the sink (upload threads) */
int pl_write_converted(engine *e, sk_slice *s, sk_conv_kind kind,
                       writer *w, skippr_buf *scratch);
int pl_sink_takes_records(const sk_instance *sink);
int pl_upload_one(uploader *u, sk_slice *s);

/* grow.c: slices that grow in the sink (SKIPPR_SINK_GROWS) */
/* Whether data slices grow in the sink (a listed source and a sink that
 * grows objects); pl_grow_init then gives the state its settings. */
int pl_grow_on(const engine *e);
int pl_grow_init(engine *e);
int pl_grow_finish(engine *e, sk_slice *s);
int pl_grow_parallel(engine *e, sk_slice **v, size_t n, int *rcs);
int pl_grow_sync(engine *e);
/* The put of s's full buffer that an append asked for (SK_STATE_PUT_*). */
int pl_grow_put_one(engine *e, sk_slice *s);
int pl_grow_forget(engine *e, sk_slice *s);
void pl_grow_release(engine *e);

/* seal.c: group commit, sealing, the upload batch, WAL GC */
int pl_flush(engine *e, int release);
int pl_commit(engine *e, int durable);
int pl_flush_slices(engine *e, int force);
int64_t pl_watermark(engine *e);
int pl_st_memory_over(const engine *e);
int pl_relieve_memory(engine *e);
int pl_wal_over_budget(const engine *e);
int pl_grow_stage(engine *e, size_t *n);
int pl_maybe_commit(engine *e, int force);

/* read.c: opening units, reading and decompressing them into windows */
void pl_lane_skip_bom(lane *l);
const char *pl_format_problem(const engine *e, int fmt);
int pl_lane_format_known(lane *l);
void pl_lane_frame(lane *l, int may_split);
int pl_lane_read_submit(lane *l);
void pl_unit_failed(engine *e, const char *id, uint64_t offset, int rc);
void pl_lane_reset_format(lane *l);
int pl_lane_open(lane *l, todo *t);
void pl_lane_close(lane *l);

/* apply.c: applying framed windows in order */
int pl_lane_apply(lane *l, int *finished);

/* lanes.c: one lane's buffers (its window up to win_max bytes; the
 * streamer's document lane too); pl_lane_free releases them, also after
 * a failure of pl_lane_init */
int pl_lane_init(engine *e, lane *l, size_t win_max);
void pl_lane_free(lane *l);

/* units.c: listed sources: list in batches, run the units */
int pl_copy_pass(engine *e);
/* claim.c: the state's claim on its sink; SKIPPR_CHANGED (logged) when
 * another state holds it and allow_second_copy is not set. */
int pl_claim_sink(engine *e);
/* definition.c: SKIPPR_OK when the state was made for this pipeline's
 * definition (source, sink, transform), recording it on first use;
 * SKIPPR_CHANGED (logged) when made for another. */
int pl_definition_check(engine *e);
/* The definition file of the state folder from_dir becomes this state's:
 * SKIPPR_OK, SKIPPR_NOENT when it has none, or an I/O status. */
int pl_definition_take(engine *e, const char *from_dir);

/* metrics.c: the Prometheus endpoint (metrics_listen) */
typedef struct pl_metrics pl_metrics;
int pl_metrics_start(engine *e);
/* Copy the counters into the endpoint's snapshot (at most 4 a second
 * unless forced). */
void pl_metrics_update(engine *e, int force);
void pl_metrics_stop(engine *e);

/* shard.c: a new shard count takes over what the old one finished */
int pl_shard_inherit(engine *e);
/* skipprd_el_storage_mode: s3: a store instance of its own (*inst) and
 * the lease on state folder state_name's state in it (*out); both the
 * caller's (sk_remote_close, then sk_instance_free), also on failure. */
int pl_remote_open(engine *e, const char *state_name, sk_instance **inst,
                   sk_remote **out);
/* Refuse a state folder that another shard count took over. */
int pl_shard_check_retired(engine *e);

/* stream.c: streaming sources (poll/emit/ack) */


#endif
