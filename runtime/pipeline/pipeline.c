#include "pipeline/pipeline.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <time.h>
#include <unistd.h>

#include "base/common.h"
#include "format/convert.h"
#include "base/crc32c.h"
#include "format/csvpeek.h"
#include "format/xmlpeek.h"
#include "format/decompress.h"
#include "base/fault.h"
#include "format/json.h"
#include "plugin/loader.h"
#include "sched/pool.h"
#include "route/route.h"
#include "state/state.h"

#define WINDOW_BYTES (8u << 20)   /* decompressed bytes framed per round */
#define PIECE_BYTES (1u << 20)    /* a large window is cut into tasks this big */
#define MAX_PIECES 16             /* tasks per window at most */
#define RAW_READ (1u << 20)       /* one source read */
#define COMMIT_BYTES (16u << 20)  /* group commit after this much input */
#define OUT_BUF (1u << 20)        /* sink write size */
#define MAX_ATTEMPTS 8            /* sink retries before giving up */
#define SEGMENT_BYTES (64u << 20) /* WAL segment size before rotation */
#define LANES_PER_THREAD 3        /* units in flight per worker */
#define MAX_LANES 64
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
} group;

typedef struct engine engine;
typedef struct lane lane;

/* A streaming source's unit (a topic-partition) as the engine tracks it. */
typedef struct stream_unit {
    sk_unit_rec *rec;  /* the ledger's (never finished, so never freed
                        * before the engine); its offset is the next
                        * position, its id the unit's */
    int64_t acked;     /* offset already acked to the source */
} stream_unit;

/* One uploader: a sink instance with its own buffers. Sealed slices are
 * written by up to upload_concurrency threads at once, each with its own
 * uploader, because a plugin instance is used by one thread at a time. */
typedef struct uploader {
    engine *e;
    sk_instance *sink;
    sk_buf out;     /* sink write buffer */
    sk_buf scratch; /* WAL read-back */
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
    sk_buf scratch;
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
} todo;

struct engine {
    const sk_pipeline_cfg *cfg;
    const sk_run_opts *opts;
    sk_state *st;
    sk_registry reg;
    sk_instance *src, *sink; /* sink: uploaders[0]'s, for labels */
    uploader *up;
    int nup;
    sk_router *router;
    sk_pool *pool;
    int nthreads;
    struct lane *lanes; /* units in flight */
    size_t nlanes;
    size_t win_max;
    /* listing */
    todo *todo;
    size_t ntodo, todo_cap;
    char *list_after;
    int list_more;
    uint64_t skipped_done, skipped_changed;
    /* counters */
    uint64_t units_done, records, dead, bytes_in, objects;
    uint64_t bytes_since_commit, last_commit_ns, start_ns, last_progress_ns;
    uint64_t last_seal_check_ns;
    /* the minute report: when it was last made, the counters then */
    uint64_t report_ns, report_units, report_records, report_objects;
    uint64_t seal_checks; /* streaming: free memory is released every 10th */
    /* formats */
    const char *const *paths; /* the router's peek paths */
    size_t npaths;
    sk_xml_spec *xml_spec;    /* the routing paths for XML; owned */
    char **csv_cols;          /* the source's csv_columns, split; owned */
    size_t ncsv_cols;
    const char *ext;          /* data objects' extension, from the sink */
    sk_buf slice_key;         /* a CSV slice's key: route key + header id */
    /* multiline_records: JSON records with a line feed, when the sink
     * writes .jsonl objects (one record per line) */
    int multiline_check;      /* the sink writes .jsonl files */
    uint64_t multiline_json;  /* such records put in .json objects */
    uint64_t multiline_compacted; /* such records compacted */
    sk_buf multiline_key;     /* a .json slice's key: route key + tag */
    sk_buf compact;           /* a compacted record */
    /* streaming sources */
    int streaming;            /* the source has poll(), not list() */
    sk_stream_hooks hooks;    /* what its host calls reach */
    stream_unit *sunits;
    size_t nsunits, sunits_cap;
    sk_buf sscratch;          /* decoded field values of one message */
    uint64_t duplicates;      /* messages dropped as already durable */
    lane *doc_lane;           /* frames documents (SKIPPR_MSG_DOCUMENT) */
    sk_unit_rec doc_rec;      /* the doc lane's scratch unit record */
    const skippr_message *doc_msg; /* the document being framed */
    uint64_t doc_dead;        /* its records dead-lettered so far */
};

/* A plugin call failed: an error line, unless the plugin already logged
 * one saying why (then the engine's line is context, at info level). */
#define plugin_failed(inst, ...)                                               \
    sk_log(sk_instance_logged_error(inst) ? SKIPPR_LOG_INFO : SKIPPR_LOG_ERROR, \
           __VA_ARGS__)

static int ws(uint8_t c) { return c == ' ' || c == '\n' || c == '\r' || c == '\t'; }

static int push_rec(piece *p, const rec_out *r)
{
    if (p->nrec >= NO_REC ||
        sk_array_grow(&p->recs, p->nrec, &p->cap, sizeof *p->recs, 1024))
        return SKIPPR_NOMEM;
    p->recs[p->nrec++] = *r;
    return SKIPPR_OK;
}

/* Keeps [start, end) of the piece: dead-lettered if there is a reason or
 * it is too large. 0: a record to route; 1: a dead letter; -1: out of
 * memory (p->failed is set). */
static int piece_push(piece *p, size_t start, size_t end, const char *reason)
{
    if (!reason && end - start > (size_t)p->e->cfg->max_record_bytes)
        reason = "record larger than max_record_bytes";
    rec_out o = {start, end, reason, NO_REC};
    if (push_rec(p, &o)) {
        p->failed = 1;
        return -1;
    }
    if (reason) {
        p->ndead++;
        return 1;
    }
    return 0;
}

/* Add the record just pushed to group id. */
static int group_add(piece *p, uint32_t id, const uint8_t *rec, size_t len)
{
    uint32_t idx = (uint32_t)(p->nrec - 1);
    if (id == p->ngroups) {
        if (sk_array_grow(&p->groups, p->ngroups, &p->gcap, sizeof *p->groups,
                          64))
            return SKIPPR_NOMEM;
        p->groups[p->ngroups++] = (group){idx, idx, 0, 0, 0, 0};
    } else {
        p->recs[p->groups[id].last].next = idx;
        p->groups[id].last = idx;
    }
    group *g = &p->groups[id];
    g->nrec++;
    g->crc = sk_crc32c(sk_crc32c(g->crc, rec, len), "\n", 1);
    g->out_bytes += len + 1;
    return SKIPPR_OK;
}

/* Routes the record just kept, [start, end), by fields f that its values
 * were decoded into: a string field without a pointer lies in scratch at
 * at[i] (scratch may have moved while later values were decoded). dec is
 * the decoding's result: SKIPPR_CORRUPT dead-letters the record with
 * `undecodable`. Returns -1 when the piece failed, else 0. */
static int piece_route(piece *p, sk_field *f, const size_t *at, int dec,
                       size_t start, size_t end, const char *undecodable)
{
    engine *e = p->e;
    if (dec == SKIPPR_CORRUPT) {
        p->recs[p->nrec - 1].reason = undecodable;
        p->ndead++;
        return 0;
    }
    for (size_t i = 0; i < e->npaths && !dec; i++)
        if (f[i].kind == SK_FIELD_STRING && !f[i].p)
            f[i].p = p->scratch.data + at[i];
    uint32_t id;
    if (dec || sk_route_memo_fields(e->router, &p->memo, f, &id) ||
        group_add(p, id, p->buf + start, end - start)) {
        p->failed = 1;
        return -1;
    }
    return 0;
}

/* piece_run for a CSV unit: rows instead of JSON values; the picked
 * cells are decoded (libcsv, for quoted ones) into fields. The header row
 * is taken by the framer and is no record. */
static void piece_run_csv(piece *p)
{
    engine *e = p->e;
    sk_csv_framer fr = p->csv_in;
    size_t pos = p->from;
    sk_csv_record r;
    int header_utf8 = -1; /* not checked yet */
    for (;;) {
        sk_csv_rc rc = sk_csv_next(&fr, e->paths, e->npaths, p->buf, p->len,
                                   &pos, p->final, &r);
        if (rc == SK_CSV_END)
            break;
        if (rc == SK_CSV_NOMEM) {
            p->failed = 1;
            break;
        }
        if (rc == SK_CSV_NEED_MORE) {
            p->need_more = 1;
            pos = r.start;
            break;
        }
        if (rc == SK_CSV_HEADER || r.start < p->skip_before)
            continue; /* the header; or durable before a restart */
        const char *why = rc == SK_CSV_ERROR ? r.reason : NULL;
        if (!why && e->sink->format != SK_FORMAT_CSV) {
            /* csv -> jsonl: names and values become JSON strings */
            if (header_utf8 < 0)
                header_utf8 = sk_utf8_valid(fr.hdr.row, fr.hdr.row_len);
            if (!header_utf8)
                why = "csv->jsonl: the header row is not valid UTF-8";
            else if (!sk_utf8_valid(p->buf + r.start, r.end - r.start))
                why = "csv->jsonl: the row is not valid UTF-8";
        }
        int kept = piece_push(p, r.start, r.end, why);
        if (kept < 0)
            break;
        if (kept > 0)
            continue;
        /* Fields from the picked cells; an empty cell is absent. Quoted
         * cells are decoded into scratch first (it may move as it grows),
         * then the fields point into it. */
        sk_field f[SK_PEEK_MAX_PATHS];
        size_t at[SK_PEEK_MAX_PATHS];
        sk_buf_reset(&p->scratch);
        int bad = 0;
        for (size_t i = 0; i < e->npaths && !bad; i++) {
            const sk_csv_cell *c = &r.cells[i];
            f[i] = (sk_field){SK_FIELD_ABSENT, NULL, 0};
            if (!c->present || c->len == 0)
                continue;
            const uint8_t *raw = p->buf + c->off;
            if (raw[0] != '"') {
                f[i] = (sk_field){SK_FIELD_STRING, raw, c->len};
                continue;
            }
            if (!p->csvdec && !(p->csvdec = sk_csv_decoder_new(fr.delim))) {
                bad = SKIPPR_NOMEM;
                break;
            }
            at[i] = p->scratch.len;
            bad = sk_csv_decode_cell(p->csvdec, raw, c->len, &p->scratch);
            if (!bad && p->scratch.len > at[i])
                f[i] = (sk_field){SK_FIELD_STRING, NULL, p->scratch.len - at[i]};
        }
        if (piece_route(p, f, at, bad, r.start, r.end,
                        "a routing cell cannot be decoded"))
            break;
    }
    p->stop = pos;
    p->csv_out = fr;
}

/* piece_run for an XML unit: records are elements (xmlpeek.c); with
 * validate: true libxml2 parses each one, and a malformed one is
 * dead-lettered. */
static void piece_run_xml(piece *p)
{
    engine *e = p->e;
    sk_xml_framer fr = p->xml_in;
    size_t pos = p->from;
    sk_xml_record r;
    for (;;) {
        sk_xml_rc rc = sk_xml_next(&fr, e->xml_spec, p->buf, p->len, &pos,
                                   p->final, &r);
        if (rc == SK_XML_END)
            break;
        if (rc == SK_XML_NOMEM) {
            p->failed = 1;
            break;
        }
        if (rc == SK_XML_NEED_MORE) {
            p->need_more = 1;
            break;
        }
        if (rc == SK_XML_HEADER || r.start < p->skip_before)
            continue; /* the header; or durable before a restart */
        const char *why = rc == SK_XML_ERROR ? r.reason : NULL;
        if (!why && !e->cfg->route.skim &&
            !sk_xml_record_valid(&fr, p->buf + r.start, r.end - r.start))
            why = "the record is not well-formed XML (libxml2)";
        int kept = piece_push(p, r.start, r.end, why);
        if (kept < 0)
            break;
        if (kept > 0)
            continue;
        sk_field f[SK_PEEK_MAX_PATHS];
        size_t at[SK_PEEK_MAX_PATHS];
        sk_buf_reset(&p->scratch);
        int bad = 0;
        for (size_t i = 0; i < e->npaths && !bad; i++) {
            f[i] = (sk_field){SK_FIELD_ABSENT, NULL, 0};
            if (!r.values[i].kind)
                continue;
            at[i] = p->scratch.len;
            bad = sk_xml_value_text(p->buf, &r.values[i], &p->scratch);
            if (!bad && p->scratch.len > at[i])
                f[i] = (sk_field){SK_FIELD_STRING, NULL, p->scratch.len - at[i]};
        }
        if (piece_route(p, f, at, bad, r.start, r.end,
                        "a routing value cannot be decoded"))
            break;
    }
    p->stop = pos;
    p->xml_out = fr;
}

/* Frame, peek and route records starting in [from, to). Runs on a worker
 * (or inline on the pipeline thread for a re-run). */
static void piece_run(piece *p)
{
    engine *e = p->e;
    const sk_peek_spec *spec = sk_router_json_spec(e->router);
    sk_json_framer fr = p->fr_in;
    size_t pos = p->from;
    p->nrec = 0;
    p->ndead = 0;
    p->ngroups = 0;
    p->need_more = 0;
    p->failed = 0;
    sk_memo_reset(&p->memo);
    if (p->csv || p->xml) {
        if (p->csv)
            piece_run_csv(p);
        else
            piece_run_xml(p);
        for (size_t i = 0; i < p->ngroups; i++)
            p->groups[i].xpow = sk_crc32c_xpow(p->groups[i].out_bytes);
        return;
    }
    sk_json_record r;
    for (;;) {
        size_t before = pos;
        while (pos < p->len && ws(p->buf[pos]))
            pos++;
        if (pos >= p->to) {
            /* Whitespace across the cut is the next piece's to skip; but a
             * record that ran past the cut was ours, so stop after it. */
            if (p->to < p->len)
                pos = before > p->to ? before : p->to;
            break;
        }
        sk_json_rc rc = sk_json_next(&fr, spec, p->buf, p->len, &pos,
                                     p->final, &r);
        if (rc == SK_JSON_END)
            break;
        if (rc == SK_JSON_NEED_MORE) {
            p->need_more = 1;
            pos = r.start;
            break;
        }
        int kept = piece_push(p, r.start, r.end,
                              rc == SK_JSON_ERROR ? r.reason : NULL);
        if (kept < 0)
            break;
        if (kept > 0)
            continue;
        uint32_t id;
        if (sk_route_memo(e->router, &p->memo, p->buf, r.values, &p->scratch,
                          &id) ||
            group_add(p, id, p->buf + r.start, r.end - r.start)) {
            p->failed = 1;
            break;
        }
    }
    if (p->final && p->to == p->len && !p->need_more && !p->failed &&
        fr.in_array && pos >= p->len) {
        /* The unit ends inside its top-level array: its elements were
         * copied, but a missing ']' usually means the object was cut
         * short, so it is said where dead letters are counted. */
        if (piece_push(p, p->len, p->len, "the top-level array is not "
                       "closed: the object may have been cut short") >= 0)
            sk_json_framer_init(&fr);
    }
    for (size_t i = 0; i < p->ngroups; i++)
        p->groups[i].xpow = sk_crc32c_xpow(p->groups[i].out_bytes);
    p->stop = pos;
    p->fr_out = fr;
}

static void piece_task(sk_task *t)
{
    piece *p = (piece *)((char *)t - offsetof(piece, task));
    piece_run(p);
}

/* ---- dead letters ------------------------------------------------------- */

static int json_str_append(sk_buf *b, const char *s, size_t n)
{
    int rc = sk_buf_putc(b, '"');
    for (size_t i = 0; !rc && i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '"' || c == '\\')
            rc = sk_buf_printf(b, "\\%c", c);
        else if (c < 0x20 || c == 0x7f)
            rc = sk_buf_printf(b, "\\u%04x", c);
        else
            rc = sk_buf_putc(b, c);
    }
    return rc ? rc : sk_buf_putc(b, '"');
}

static int dead_letter(engine *e, const char *unit, uint64_t offset,
                       const uint8_t *bytes, size_t len, const char *reason)
{
    sk_slice *s = sk_state_slice(e->st, "_errors", 7, 0, SK_SLICE_DEAD);
    if (!s)
        return SKIPPR_NOMEM;
    sk_buf meta;
    sk_buf_init(&meta, 1u << 20);
    int rc = sk_buf_append(&meta, "\"unit\":", 7);
    if (!rc)
        rc = json_str_append(&meta, unit, strlen(unit));
    if (!rc)
        rc = sk_buf_printf(&meta, ",\"offset\":%" PRIu64 ",\"length\":%zu,"
                           "\"reason\":", offset, len);
    if (!rc)
        rc = json_str_append(&meta, reason, strlen(reason));
    if (!rc)
        rc = sk_state_append(e->st, s, meta.data, meta.len);
    if (!rc)
        rc = sk_state_append(e->st, s, bytes, len);
    sk_buf_free(&meta);
    const skippr_message *m = e->doc_msg;
    if (!rc && m && e->doc_dead++ == 0 && m->problem && m->problem_cap) {
        /* The document's sender is told about its first bad record. */
        size_t line = 1;
        for (uint64_t i = 0; i < offset && i < m->len; i++)
            line += ((const uint8_t *)m->data)[i] == '\n';
        snprintf(m->problem, m->problem_cap,
                 "line %zu (byte %" PRIu64 "): %s", line, offset, reason);
    }
    if (!rc) {
        e->dead++;
        sk_debug("dead letter: %s at offset %" PRIu64 " (%zu bytes): %s",
                 unit, offset, len, reason);
    }
    return rc;
}

/* The OPEN data slice of partition key[0..klen) whose records need their
 * own object: a CSV header's, an XML root's, multi-line JSON. Its key is
 * the partition, a NUL, then tag (the object's name is the part before
 * the NUL), built in b, which key must not point into. NULL on failure. */
static sk_slice *tagged_slice(engine *e, sk_buf *b, const char *key,
                              size_t klen, const char *tag, size_t tlen)
{
    sk_buf_reset(b);
    if (sk_buf_append(b, key, klen) || sk_buf_putc(b, 0) ||
        sk_buf_append(b, tag, tlen))
        return NULL;
    const char *k = (const char *)b->data;
    return sk_state_slice(e->st, k, b->len, sk_hash_fast(k, b->len),
                          SK_SLICE_DATA);
}

/* The tag after a NUL in the key of a slice of multi-line JSON records:
 * its object sits beside the partition's .jsonl ones, named .json. */
#define MULTILINE_TAG "json:multiline"

static int slice_is_multiline(const sk_slice *s)
{
    size_t name = strnlen(s->key, s->key_len);
    size_t tl = sizeof MULTILINE_TAG - 1;
    return s->kind == SK_SLICE_DATA && s->key_len == name + 1 + tl &&
           memcmp(s->key + name + 1, MULTILINE_TAG, tl) == 0;
}

/* The extension of slice s's object. */
static const char *slice_ext(const engine *e, const sk_slice *s)
{
    if (s->kind == SK_SLICE_DEAD)
        return ".bad";
    return slice_is_multiline(s) ? ".json" : e->ext;
}

/* A JSON record of partition key[0..klen) (whose .jsonl slice is s) that
 * holds a line feed, so a .jsonl object cannot hold it as one line: put it
 * where multiline_records says. unit and offset name it in a dead letter.
 * Counts it in e->records (or e->dead). */
static int append_multiline(engine *e, sk_slice *s, const char *key,
                            size_t klen, const uint8_t *rec, size_t len,
                            const char *unit, uint64_t offset)
{
    int rc;
    switch (e->cfg->multiline) {
    case SK_MULTILINE_DEAD:
        return dead_letter(e, unit, offset, rec, len,
                           "the record spans lines, which a .jsonl object "
                           "cannot hold (multiline_records: dead_letter)");
    case SK_MULTILINE_COMPACT:
        sk_buf_reset(&e->compact);
        if ((rc = sk_buf_reserve(&e->compact, len)))
            return rc;
        rc = sk_state_append(e->st, s, e->compact.data,
                             sk_json_compact(rec, len, e->compact.data));
        if (!rc) {
            e->multiline_compacted++;
            e->records++;
        }
        return rc;
    case SK_MULTILINE_JSON:
        break;
    }
    sk_slice *js = tagged_slice(e, &e->multiline_key, key, klen,
                                MULTILINE_TAG, sizeof MULTILINE_TAG - 1);
    if (!js)
        return SKIPPR_NOMEM;
    if (!(rc = sk_state_append(e->st, js, rec, len))) {
        e->multiline_json++;
        e->records++;
    }
    return rc;
}

/* Append one JSON record to s, or, when it spans lines and the sink
 * writes .jsonl, where multiline_records says. Counts it. */
static int append_json(engine *e, sk_slice *s, const char *key, size_t klen,
                       const uint8_t *rec, size_t len, const char *unit,
                       uint64_t offset)
{
    if (e->multiline_check && memchr(rec, '\n', len))
        return append_multiline(e, s, key, klen, rec, len, unit, offset);
    int rc = sk_state_append(e->st, s, rec, len);
    if (!rc)
        e->records++;
    return rc;
}

/* ---- sink upload -------------------------------------------------------- */

typedef struct writer {
    uploader *u;
    void *h;
    int rc;
    uint64_t bytes;
    uint32_t crc;
    int dead_mode; /* 0 all, 1 odd records (bytes), 2 even (meta lines) */
    uint64_t n;
    uint64_t data_off; /* meta mode: offset of the record in the data object */
    int count_only;
    int records_mode;    /* SKIPPR_SINK_RECORDS: one object_write a record */
    sk_conv *conv;       /* records are converted (write_converted) */
    sk_buf *conv_out;    /* one record's converted bytes */
    const char *conv_why; /* why a record could not be converted */
} writer;

/* The CRC of what is written is taken once per buffer (a long CRC runs
 * three chains at once), not once per record. */
static int writer_flush(writer *w)
{
    uploader *u = w->u;
    if (u->out.len == 0 || w->count_only)
        return SKIPPR_OK;
    w->crc = sk_crc32c(w->crc, u->out.data, u->out.len);
    sk_crashpoint("sink_write");
    int rc = u->sink->plugin->sink->object_write(u->sink->ctx, w->h,
                                                 u->out.data, u->out.len);
    sk_buf_reset(&u->out);
    return rc;
}

static int writer_put(writer *w, const void *p, size_t n)
{
    w->bytes += n;
    if (w->count_only) {
        w->crc = sk_crc32c(w->crc, p, n);
        return SKIPPR_OK;
    }
    uploader *u = w->u;
    if (u->out.len + n > OUT_BUF) {
        int rc = writer_flush(w);
        if (rc)
            return rc;
    }
    if (n > OUT_BUF) {
        w->crc = sk_crc32c(w->crc, p, n);
        sk_crashpoint("sink_write");
        return u->sink->plugin->sink->object_write(u->sink->ctx, w->h, p, n);
    }
    return sk_buf_append(&u->out, p, n);
}

/* A record sink gets each record in its own object_write(), without the
 * newline; size and CRC still count the newline, as sealed. */
static int write_one(writer *w, const void *rec, size_t len)
{
    w->bytes += len + 1;
    w->crc = sk_crc32c(sk_crc32c(w->crc, rec, len), "\n", 1);
    if (w->count_only)
        return SKIPPR_OK;
    sk_crashpoint("sink_write");
    return w->u->sink->plugin->sink->object_write(w->u->sink->ctx, w->h, rec,
                                                  len);
}

static int write_record(void *ud, const uint8_t *rec, size_t len)
{
    writer *w = ud;
    int rc;
    if (w->records_mode && w->dead_mode != 2) {
        if (w->dead_mode == 1 && (w->n++ % 2) == 0)
            return SKIPPR_OK; /* a dead letter's meta: the sidecar's */
        return write_one(w, rec, len);
    }
    if (w->conv) {
        sk_buf_reset(w->conv_out);
        if ((rc = sk_conv_record(w->conv, rec, len, w->conv_out,
                                 &w->conv_why)))
            return rc;
        return w->conv_out->len
                   ? writer_put(w, w->conv_out->data, w->conv_out->len)
                   : SKIPPR_OK;
    }
    if (!w->dead_mode && !w->count_only) {
        /* The common case, a data record that fits the buffer: one copy. */
        sk_buf *out = &w->u->out;
        if (out->cap - out->len > len && out->len + len + 1 <= OUT_BUF) {
            memcpy(out->data + out->len, rec, len);
            out->data[out->len + len] = '\n';
            out->len += len + 1;
            w->bytes += len + 1;
            return SKIPPR_OK;
        }
    }
    if (w->dead_mode) {
        int is_meta = (w->n++ % 2) == 0;
        if (w->dead_mode == 1 && is_meta)
            return SKIPPR_OK;
        if (w->dead_mode == 2) {
            if (!is_meta) {
                w->data_off += len + 1;
                return SKIPPR_OK;
            }
            char head[64];
            int hn = snprintf(head, sizeof head, "{\"object_offset\":%" PRIu64
                              ",", w->data_off);
            if (w->records_mode) {
                /* The meta line is one record: build it first. */
                sk_buf line;
                sk_buf_init(&line, (size_t)hn + len + 2);
                rc = sk_buf_append(&line, head, (size_t)hn);
                if (!rc)
                    rc = sk_buf_append(&line, rec, len);
                if (!rc)
                    rc = sk_buf_append(&line, "}", 1);
                if (!rc)
                    rc = write_one(w, line.data, line.len);
                sk_buf_free(&line);
                return rc;
            }
            if ((rc = writer_put(w, head, (size_t)hn)) ||
                (rc = writer_put(w, rec, len)))
                return rc;
            return writer_put(w, "}\n", 2);
        }
    }
    if ((rc = writer_put(w, rec, len)))
        return rc;
    return writer_put(w, "\n", 1);
}

/* The conversion slice s needs for this sink, if any: a CSV slice (its
 * key holds the header's id) to a jsonl sink, or a JSON slice to a csv
 * sink. */
/* The format of a data slice's records, from the tag lane_apply puts in
 * its key after a NUL ("csv:<id>", "xml:<id>:<root>"; none for JSON).
 * *tag, if not NULL, is set past the "xml:" or "csv:". */
static int slice_format(const sk_slice *s, const char **tag)
{
    size_t name = strnlen(s->key, s->key_len);
    if (s->kind != SK_SLICE_DATA || name + 5 > s->key_len)
        return SK_FORMAT_JSON;
    const char *t = s->key + name + 1;
    if (tag)
        *tag = t + 4;
    return memcmp(t, "csv:", 4) == 0   ? SK_FORMAT_CSV
           : memcmp(t, "xml:", 4) == 0 ? SK_FORMAT_XML
                                       : SK_FORMAT_JSON;
}

static sk_conv_kind slice_conv(const engine *e, const sk_slice *s)
{
    if (s->kind != SK_SLICE_DATA)
        return SK_CONV_NONE;
    int fmt = slice_format(s, NULL);
    int sink_csv = e->sink->format == SK_FORMAT_CSV;
    if (fmt == SK_FORMAT_CSV && !sink_csv)
        return SK_CONV_CSV_JSONL;
    if (fmt == SK_FORMAT_JSON && sink_csv)
        return SK_CONV_JSON_CSV;
    return SK_CONV_NONE;
}

/* An XML slice's object ends with its root's close tag, which its key
 * carries after the header's id. 0 if s is none. */
static size_t xml_trailer(const sk_slice *s, char *out, size_t cap)
{
    const char *tag;
    if (slice_format(s, &tag) != SK_FORMAT_XML)
        return 0;
    size_t at = (size_t)(tag - s->key) + 16 + 1; /* "<id>:" */
    if (at > s->key_len)
        return 0;
    int n = snprintf(out, cap, "</%.*s>\n", (int)(s->key_len - at),
                     s->key + at);
    return n > 0 && (size_t)n < cap ? (size_t)n : 0;
}

static int learn_record(void *ud, const uint8_t *rec, size_t len)
{
    writer *w = ud;
    return sk_conv_learn(w->conv, rec, len, &w->conv_why);
}

/* Writes slice s, converted, through w (a real or a count-only writer):
 * for json -> csv a first pass learns the header. */
static int write_converted(engine *e, sk_slice *s, sk_conv_kind kind,
                           writer *w, sk_buf *scratch)
{
    sk_buf out;
    sk_buf_init(&out, (size_t)SK_WAL_MAX_PAYLOAD * 8);
    sk_conv *c = sk_conv_new(kind, e->src->csv_delim);
    w->conv = c;
    w->conv_out = &out;
    w->conv_why = NULL;
    int rc = c ? SKIPPR_OK : SKIPPR_NOMEM;
    if (!rc && sk_conv_needs_learning(c))
        rc = sk_state_foreach_record(e->st, s, scratch, learn_record, w);
    if (!rc && !(rc = sk_conv_begin(c, &out)) && out.len)
        rc = writer_put(w, out.data, out.len);
    if (!rc)
        rc = sk_state_foreach_record(e->st, s, scratch, write_record, w);
    if (rc == SKIPPR_CORRUPT && w->conv_why)
        sk_error("slice %" PRIu64 " (%s): cannot convert it for the sink: %s",
                 s->id, s->key, w->conv_why);
    w->conv = NULL;
    w->conv_out = NULL;
    sk_conv_free(c);
    sk_buf_free(&out);
    return rc;
}

static void backoff_sleep(const engine *e, int attempt)
{
    /* Exponential backoff from retry_backoff_ms (100), doubling to 100
     * times it (10 s), with jitter over its upper half. */
    uint64_t base = (uint64_t)e->cfg->retry_backoff_ms;
    uint64_t cap_ms = base << (attempt < 7 ? attempt : 7);
    if (cap_ms > base * 100)
        cap_ms = base * 100;
    uint64_t ms = cap_ms / 2 + (uint64_t)rand() % (cap_ms / 2 + 1);
    struct timespec ts = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* A sink that takes records, not files (Kafka, MQTT, HTTP). */
static int sink_takes_records(const sk_instance *sink)
{
    const skippr_sink_ops *ops = sink->plugin->sink;
    return SKIPPR_OPS_HAS(skippr_sink_ops, ops, flags) &&
           (ops->flags & SKIPPR_SINK_RECORDS);
}

/* Write one object with retries. mode as writer.dead_mode. */
static int put_object(uploader *u, sk_slice *s, const char *key,
                      const char *slice_id, uint64_t size, uint32_t crc,
                      int mode, const char *ctype)
{
    engine *e = u->e;
    sk_instance *sink = u->sink;
    const skippr_sink_ops *ops = sink->plugin->sink;
    /* The partition is the slice key up to a NUL (a format tag follows);
     * the namespace its first folder. */
    char ns[SK_SEGMENT_MAX + 1];
    size_t nsl = strcspn(s->key, "/");
    snprintf(ns, sizeof ns, "%.*s", (int)SK_MIN(nsl, SK_SEGMENT_MAX), s->key);
    skippr_object_info info = {key, slice_id, size, crc, ctype,
                               s->key, ns, s->records};
    int records_mode = sink_takes_records(sink);
    int rc = SKIPPR_FATAL;
    for (int attempt = 0; attempt < MAX_ATTEMPTS; attempt++) {
        if (attempt) {
            if (sk_stop_requested)
                return SKIPPR_STOPPED;
            backoff_sleep(e, attempt);
        }
        /* Before every attempt, since a failed one may still have landed
         * (a commit whose answer was lost). */
        rc = ops->object_check ? ops->object_check(sink->ctx, &info)
                               : SKIPPR_NOENT;
        if (rc == SKIPPR_OK) {
            sk_info("object %s already complete (slice %s); not rewritten",
                    key, slice_id);
            return SKIPPR_OK;
        }
        if (rc == SKIPPR_CHANGED)
            sk_warn("object %s exists with other content; rewriting it with "
                    "slice %s", key, slice_id);
        else if (rc == SKIPPR_RETRY) {
            sk_warn("%s: cannot tell whether %s was written (attempt %d of "
                    "%d); asking again", sink->label, key, attempt + 1,
                    MAX_ATTEMPTS);
            continue;
        } else if (rc != SKIPPR_NOENT) {
            plugin_failed(sink, "%s: checking %s failed: %s", sink->label,
                          key, skippr_status_str(rc));
            return rc;
        }
        writer w = {u, NULL, 0, 0, 0, mode, 0, 0, 0, records_mode,
                    NULL, NULL, NULL};
        sk_buf_reset(&u->out);
        if ((rc = sk_buf_reserve(&u->out, OUT_BUF)))
            return rc;
        rc = ops->object_open(sink->ctx, &info, &w.h);
        if (rc == SKIPPR_OK) {
            sk_conv_kind ck = mode == 0 ? slice_conv(e, s) : SK_CONV_NONE;
            rc = ck != SK_CONV_NONE
                     ? write_converted(e, s, ck, &w, &u->scratch)
                     : sk_state_foreach_record(e->st, s, &u->scratch,
                                               write_record, &w);
            char tail[300];
            size_t tl = mode == 0 ? xml_trailer(s, tail, sizeof tail) : 0;
            if (!rc && tl)
                rc = writer_put(&w, tail, tl);
            if (!rc)
                rc = writer_flush(&w);
            if (!rc && (w.bytes != size || w.crc != crc)) {
                sk_error("slice %s: re-read %" PRIu64 " bytes with CRC %08x, "
                         "sealed as %" PRIu64 " bytes with CRC %08x",
                         slice_id, w.bytes, w.crc, size, crc);
                ops->object_abort(sink->ctx, w.h);
                return SKIPPR_CORRUPT;
            }
            if (!rc) {
                sk_crashpoint("sink_commit");
                rc = ops->object_commit(sink->ctx, w.h);
            } else
                ops->object_abort(sink->ctx, w.h);
        }
        if (rc == SKIPPR_OK)
            return SKIPPR_OK;
        if (rc != SKIPPR_RETRY) {
            plugin_failed(sink, "%s: writing %s failed: %s", sink->label,
                          key, skippr_status_str(rc));
            return rc;
        }
        sk_warn("%s: writing %s failed (attempt %d of %d); retrying",
                sink->label, key, attempt + 1, MAX_ATTEMPTS);
    }
    plugin_failed(sink, "%s: giving up on %s after %d attempts", sink->label,
                  key, MAX_ATTEMPTS);
    return SKIPPR_FATAL;
}

/* Write slice s's object (and, for dead letters, its sidecar) with u.
 * Runs on an upload thread: touches nothing shared but the WAL's files,
 * read-only. The caller records DONE. */
static int upload_one(uploader *u, sk_slice *s)
{
    engine *e = u->e;
    char slice_id[40];
    snprintf(slice_id, sizeof slice_id, "%s-%010" PRIu64, e->st->state_id,
             s->id);
    int rc;
    if (s->kind == SK_SLICE_DEAD) {
        rc = put_object(u, s, s->object_key, slice_id, s->object_bytes,
                        s->object_crc, 1, "application/octet-stream");
        if (rc)
            return rc;
        /* The sidecar: one JSON line per dead letter. */
        writer w = {u, NULL, 0, 0, 0, 2, 0, 0, 1, 0, NULL, NULL, NULL};
        rc = sk_state_foreach_record(e->st, s, &u->scratch, write_record, &w);
        if (rc)
            return rc;
        char *mkey = sk_asprintf("%s.meta.jsonl", s->object_key);
        char mid[48];
        snprintf(mid, sizeof mid, "%s-meta", slice_id);
        if (!mkey)
            return SKIPPR_NOMEM;
        rc = put_object(u, s, mkey, mid, w.bytes, w.crc, 2,
                        "application/x-ndjson");
        sk_free(mkey);
    } else {
        rc = put_object(u, s, s->object_key, slice_id, s->object_bytes,
                        s->object_crc, 0,
                        e->sink->format == SK_FORMAT_CSV
                            ? "text/csv"
                        : e->sink->format == SK_FORMAT_XML
                            ? "application/xml"
                        : slice_is_multiline(s) ? "application/json"
                                                : "application/x-ndjson");
    }
    return rc;
}

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
        b->rcs[i] = upload_one(w->u, b->slices[i]);
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
    upload_batch b = {slices, rcs, n, 0, 0};
    for (size_t i = 0; i < n; i++)
        rcs[i] = NOT_TRIED;
    size_t started = 1; /* worker 0 runs on this thread */
    for (size_t k = 0; k < nw; k++)
        ws[k] = (upload_worker){&b, &e->up[k], 0, 0};
    while (started < nw &&
           pthread_create(&ws[started].thread, NULL, upload_main,
                          &ws[started]) == 0)
        started++;
    upload_main(&ws[0]);
    for (size_t k = 1; k < started; k++)
        pthread_join(ws[k].thread, NULL);
    /* Sinks that defer durability make this batch durable now. If one
     * instance fails, the run stops: nothing of the batch is recorded (what
     * other instances made durable is written again, with the same bytes,
     * by the next run). */
    const skippr_sink_ops *ops = e->sink->plugin->sink;
    if (SKIPPR_OPS_HAS(skippr_sink_ops, ops, sync) && ops->sync) {
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
            for (size_t i = 0; i < n; i++)
                if (rcs[i] == SKIPPR_OK)
                    rcs[i] = src;
            break;
        }
    }
    int rc = SKIPPR_OK;
    for (size_t i = 0; i < n; i++) {
        if (rcs[i] == NOT_TRIED)
            continue;
        if (rcs[i]) {
            if (!rc)
                rc = rcs[i];
            continue;
        }
        sk_slice *s = slices[i];
        e->objects++;
        sk_debug("wrote %s (%" PRIu64 " records, %" PRIu64 " bytes)",
                 s->object_key, s->records, s->object_bytes);
        int drc = sk_state_done(e->st, s);
        if (drc) {
            rc = drc;
            break;
        }
    }
    if (!rc && sk_stop_requested && atomic_load(&b.next) < n)
        rc = SKIPPR_STOPPED;
    sk_free(ws);
    sk_free(rcs);
    return rc;
}

/* Seal what is due and upload every sealed slice. force: seal all. */
static int flush_slices(engine *e, int force)
{
    sk_state *st = e->st;
    int64_t now = (int64_t)time(NULL);
    int any = 0;
    for (size_t i = 0; i < st->nlive; i++) {
        sk_slice *s = st->live[i];
        if (s->state != SK_SLICE_OPEN)
            continue;
        if (force || now - s->opened_at >= e->cfg->buffer_threshold_seconds ||
            s->bytes >= (uint64_t)e->cfg->max_object_bytes)
            any = 1;
    }
    uint64_t disk = sk_wal_disk_bytes(st->wal);
    int over_budget = disk > (uint64_t)e->cfg->wal_disk_budget;
    if (!any && !over_budget && !force) {
        for (size_t i = 0; i < st->nlive; i++)
            if (st->live[i]->state == SK_SLICE_SEALED)
                any = 1;
        if (!any)
            return SKIPPR_OK;
    }
    int rc = sk_state_commit(st);
    if (rc)
        return rc;
    e->bytes_since_commit = 0;
    e->last_commit_ns = sk_now_ns();
    /* Seal. Indexes shift as slices leave, so collect first. */
    size_t n = st->nlive;
    sk_slice **list = sk_calloc(n ? n : 1, sizeof *list);
    if (!list)
        return SKIPPR_NOMEM;
    if (n)
        memcpy(list, st->live, n * sizeof *list);
    for (size_t i = 0; i < n; i++) {
        sk_slice *s = list[i];
        if (s->state != SK_SLICE_OPEN || s->records == 0)
            continue;
        int due = force || now - s->opened_at >=
                               e->cfg->buffer_threshold_seconds ||
                  s->bytes >= (uint64_t)e->cfg->max_object_bytes;
        if (!due && over_budget) {
            /* The WAL is over budget: flush the largest slices first. */
            sk_slice *big = NULL;
            for (size_t k = 0; k < n; k++)
                if (list[k]->state == SK_SLICE_OPEN &&
                    (!big || list[k]->bytes > big->bytes))
                    big = list[k];
            due = big == s;
        }
        if (!due)
            continue;
        sk_conv_kind ck = slice_conv(e, s);
        char tail[300];
        size_t tl = xml_trailer(s, tail, sizeof tail);
        if (ck == SK_CONV_NONE) {
            /* The records and newlines (and an XML root's close tag) */
            rc = sk_state_seal(st, s, slice_ext(e, s), tail, tl);
        } else {
            /* A converted object: measure what delivery will write. */
            writer cw = {NULL, NULL, 0, 0, 0, 0, 0, 0, 1, 0,
                         NULL, NULL, NULL};
            sk_buf scratch;
            sk_buf_init(&scratch, SK_WAL_MAX_PAYLOAD + 64);
            rc = write_converted(e, s, ck, &cw, &scratch);
            sk_buf_free(&scratch);
            if (!rc)
                rc = sk_state_seal_as(st, s, e->ext, cw.bytes, cw.crc);
        }
        if (rc)
            goto out;
    }
    /* One fsync makes the whole batch of seals durable before any upload. */
    if ((rc = sk_wal_sync(st->wal)))
        goto out;
    sk_crashpoint("seal");
    /* Upload everything sealed (including slices sealed before a crash). */
    size_t nsealed = 0;
    for (size_t i = 0; i < st->nlive; i++)
        if (st->live[i]->state == SK_SLICE_SEALED)
            list[nsealed++] = st->live[i];
    if ((rc = upload_sealed(e, list, nsealed)))
        goto out;
    rc = sk_wal_sync(st->wal);
    /* A full segment (or a drained run) starts a new one, so that the old
     * one can be deleted once its slices are done. */
    if (!rc && ((force && sk_wal_active_size(st->wal) > 0) ||
                sk_wal_active_size(st->wal) >= SEGMENT_BYTES))
        rc = sk_wal_rotate(st->wal);
    if (!rc)
        rc = sk_state_gc(st);
out:
    sk_free(list);
    return rc;
}

/* Once a minute, at info level: what the last minute copied, and memory
 * as malloc and the kernel see it. A long run's log so shows its pace, and
 * whether live memory stays level (heap in use) apart from what the
 * process keeps resident. */
static void minute_report(engine *e, uint64_t now)
{
    if (now - e->report_ns < REPORT_NS)
        return;
    e->report_ns = now;
    sk_memstats m;
    sk_memory_stats(&m);
    sk_info("last minute: %" PRIu64 " units, %" PRIu64 " records, %" PRIu64
            " objects written; memory: heap in use %.1f MiB, malloc holds "
            "%.1f MiB, resident %.1f MiB",
            e->units_done - e->report_units, e->records - e->report_records,
            e->objects - e->report_objects, (double)m.heap_used / 1048576.0,
            (double)m.heap_held / 1048576.0, (double)m.rss / 1048576.0);
    e->report_units = e->units_done;
    e->report_records = e->records;
    e->report_objects = e->objects;
}

static void progress(engine *e, int force)
{
    uint64_t now = sk_now_ns();
    minute_report(e, now);
    if (!e->opts->progress)
        return;
    if (!force && now - e->last_progress_ns < 250000000ULL)
        return;
    e->last_progress_ns = now;
    double secs = (double)(now - e->start_ns) / 1e9;
    double mbs = secs > 0 ? (double)e->bytes_in / 1e6 / secs : 0;
    uint64_t buffered = 0;
    for (size_t i = 0; i < e->st->nlive; i++)
        buffered += e->st->live[i]->bytes;
    fprintf(stderr, "\r\033[Kunits %" PRIu64 " | records %" PRIu64
            " | dead %" PRIu64 " | %.1f MB/s | buffered %.1f MB | "
            "objects %" PRIu64, e->units_done, e->records, e->dead, mbs,
            (double)buffered / 1e6, e->objects);
    fflush(stderr);
    sk_log_progress_active = 1;
}

static int st_memory_over(const engine *e)
{
    return e->st->open_block_cap > (uint64_t)e->cfg->memory_budget;
}

/* Group commit: durable every commit_interval_ms (and when forced);
 * in between, every COMMIT_BYTES of input, a commit that only starts the
 * disk writing, so that reading never stalls on an fsync mid-run and a
 * process crash still re-reads at most COMMIT_BYTES. */
static int maybe_commit(engine *e, int force)
{
    uint64_t now = sk_now_ns();
    int due = force || now - e->last_commit_ns >=
                           (uint64_t)e->cfg->commit_interval_ms * 1000000ULL;
    if (!due && e->bytes_since_commit < COMMIT_BYTES)
        return SKIPPR_OK;
    int rc = sk_state_commit_as(e->st, due);
    e->bytes_since_commit = 0;
    if (due)
        e->last_commit_ns = now;
    return rc;
}

/* ---- units in flight ------------------------------------------------------ */

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

/* Read source bytes into dst until cap or the end of the unit. */
static int reader_read(reader *r, uint8_t *dst, size_t cap, size_t *n)
{
    *n = 0;
    while (*n < cap && !r->raw_eof) {
        size_t got = 0;
        int rc = r->ops->read(r->ctx, r->stream, dst + *n, cap - *n, &got);
        if (rc)
            return rc;
        sk_crashpoint("read");
        if (got == 0)
            r->raw_eof = 1;
        *n += got;
    }
    return SKIPPR_OK;
}

/* Refill the raw buffer of a compressed unit once it is used up. */
static int reader_raw_fill(reader *r)
{
    if (r->raw_eof || r->raw_pos < r->raw_len)
        return SKIPPR_OK;
    r->raw_pos = r->raw_len = 0;
    return reader_read(r, r->raw, RAW_READ, &r->raw_len);
}

/* Decompress what the raw buffer holds into dst. Never calls the source:
 * stops when raw is used up (the pipeline thread refills it). */
static void reader_inflate(reader *r, uint8_t *dst, size_t cap, size_t *n)
{
    *n = 0;
    while (*n < cap && !r->done) {
        if (r->raw_pos == r->raw_len && !r->raw_eof)
            break;
        size_t used = 0, made = 0;
        const char *why = NULL;
        int rc = sk_decomp_run(r->dec, r->raw + r->raw_pos,
                               r->raw_len - r->raw_pos, &used, dst + *n,
                               cap - *n, &made, r->raw_eof, &why);
        r->raw_pos += used;
        *n += made;
        r->in_total += used;
        r->out_total += made;
        if (r->max_ratio > 0 && r->out_total > INFLATE_FREE &&
            r->out_total / (r->in_total ? r->in_total : 1) >=
                (uint64_t)r->max_ratio) {
            r->bomb = 1; /* lane_apply fails the unit */
            r->done = 1;
        } else if (rc) {
            r->error = why;
            r->done = 1;
        } else if (r->raw_eof && used == 0 && made == 0) {
            r->done = 1;
        }
    }
}

/* Uncompressed bytes into dst, reading the source as needed (pipeline
 * thread only). *n == 0 only when the unit is finished. */
static int reader_fill(reader *r, uint8_t *dst, size_t cap, size_t *n)
{
    *n = 0;
    while (*n < cap && !r->done) {
        int rc = reader_raw_fill(r);
        if (rc)
            return rc;
        if (r->comp != SK_COMP_NONE) {
            size_t made = 0;
            reader_inflate(r, dst + *n, cap - *n, &made);
            *n += made;
            continue;
        }
        if (r->raw_eof && r->raw_pos == r->raw_len) {
            r->done = 1;
            break;
        }
        size_t k = SK_MIN(cap - *n, r->raw_len - r->raw_pos);
        memcpy(dst + *n, r->raw + r->raw_pos, k);
        r->raw_pos += k;
        *n += k;
    }
    return SKIPPR_OK;
}

/* A lane carries one unit from open to done. Each round the pipeline thread
 * reads the unit's next bytes into the lane's window and hands it to the
 * pool, which decompresses and frames it (lane_read_submit), and the
 * pipeline thread applies the records in order (lane_apply). Several lanes are in flight,
 * so small objects keep every worker busy while the pipeline thread reads
 * and applies; a large object's window is also split into pieces. */
struct lane {
    engine *e;
    todo *t;           /* NULL: idle */
    sk_unit_rec *u;    /* the unit's ledger record (stable while not done) */
    reader r;
    sk_buf win;        /* decompressed bytes not yet consumed */
    size_t target;     /* window fill target */
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
};

static void run_task(engine *e, sk_task *t, sk_group *g)
{
    if (e->pool)
        sk_pool_submit(e->pool, t, g);
    else
        t->fn(t);
}

/* Skip a UTF-8 BOM at the start of the unit. */
static void lane_skip_bom(lane *l)
{
    if (!l->first)
        return;
    size_t start = sk_json_skip_bom(l->win.data, l->win.len);
    if (l->win.len >= 3 || l->final)
        l->first = 0;
    if (start) {
        memmove(l->win.data, l->win.data + start, l->win.len - start);
        l->win.len -= start;
        l->base += start;
    }
}

/* The copy this pipeline can make of a unit of format fmt, or why not. */
static const char *format_problem(const engine *e, int fmt)
{
    if (sink_takes_records(e->sink) &&
        (fmt == SK_FORMAT_CSV || fmt == SK_FORMAT_XML ||
         e->sink->format != SK_FORMAT_JSON))
        return "a record sink (Kafka, MQTT, HTTP) takes JSON records, one "
               "per message; CSV and XML need a file or S3 sink";
    return sk_format_pair_problem((sk_format)fmt, e->sink->format,
                                  !e->cfg->route.skim);
}

/* The unit's format is known: whether this sink can take it, and a CSV
 * unit's configured columns. SKIPPR_OK or SKIPPR_NOMEM. */
static int lane_format_known(lane *l)
{
    engine *e = l->e;
    l->fmt_error = format_problem(e, l->fmt);
    if (l->fmt == SK_FORMAT_CSV && e->csv_cols)
        return sk_csv_framer_set_columns(&l->csv,
                                         (const char *const *)e->csv_cols,
                                         e->ncsv_cols, e->paths, e->npaths);
    return SKIPPR_OK;
}

/* The data decides an unknown format: '{' or '[' first is JSON, '<' is
 * XML, anything else CSV. Runs with the unit's first bytes in the
 * window. */
static void lane_sniff(lane *l)
{
    size_t i = 0;
    while (i < l->win.len && ws(l->win.data[i]))
        i++;
    if (i == l->win.len && !l->final)
        return; /* only blanks so far */
    uint8_t c = i < l->win.len ? l->win.data[i] : '{';
    if (c == '{' || c == '[')
        l->fmt = SK_FORMAT_JSON;
    else if (c == '<')
        l->fmt = SK_FORMAT_XML;
    else
        l->fmt = SK_FORMAT_CSV;
    if (lane_format_known(l))
        l->fmt_error = "out of memory";
}

/* Split the window into pieces at line starts (speculative cuts, checked
 * when applied) and run them. */
static void lane_frame(lane *l, int may_split)
{
    engine *e = l->e;
    const uint8_t *buf = l->win.data;
    size_t len = l->win.len;
    if (l->fmt == SK_FORMAT_AUTO)
        lane_sniff(l);
    if (l->fmt_error)
        len = 0; /* lane_apply fails the unit */
    size_t npieces = 1;
    /* CSV rows may hold quoted line breaks, so a line start is no safe
     * cut: a CSV window is one task. */
    if (may_split && l->fmt == SK_FORMAT_JSON && !l->fr.in_array &&
        e->nthreads > 1 && len >= 2 * PIECE_BYTES)
        npieces = SK_MIN((size_t)MAX_PIECES, len / PIECE_BYTES);
    size_t bounds[MAX_PIECES + 1];
    bounds[0] = 0;
    size_t k = 1;
    for (size_t i = 1; i < npieces; i++) {
        size_t nominal = len * i / npieces;
        if (nominal <= bounds[k - 1])
            continue;
        const uint8_t *nl = memchr(buf + nominal, '\n', len - nominal);
        if (!nl)
            break;
        size_t b = (size_t)(nl - buf) + 1;
        if (b >= len)
            break;
        bounds[k++] = b;
    }
    bounds[k] = len;
    l->npieces = k;
    for (size_t i = 0; i < k; i++) {
        piece *p = &l->pieces[i];
        p->buf = buf;
        p->len = len;
        p->from = bounds[i];
        p->to = bounds[i + 1];
        p->final = l->final;
        sk_json_framer_init(&p->fr_in);
        if (i == 0)
            p->fr_in = l->fr;
        p->csv = l->fmt == SK_FORMAT_CSV;
        p->csv_in = l->csv;
        p->xml = l->fmt == SK_FORMAT_XML;
        p->xml_in = l->xml;
        p->skip_before = l->skip_until > l->base
                             ? (size_t)(l->skip_until - l->base)
                             : 0;
        p->task.fn = piece_task;
        if (may_split)
            run_task(e, &p->task, &l->g);
        else
            piece_run(p);
    }
}

/* Task of a compressed lane: decompress the raw buffer into the window,
 * then frame it in one piece. */
static void lane_inflate_task(sk_task *t)
{
    lane *l = (lane *)((char *)t - offsetof(lane, inflate));
    size_t n = 0;
    reader_inflate(&l->r, l->win.data + l->win.len,
                   l->target - SK_MIN(l->target, l->win.len), &n);
    l->win.len += n;
    l->made = n;
    l->final = l->r.done;
    lane_skip_bom(l);
    lane_frame(l, 0);
}

/* Pipeline thread: read the next bytes of the lane's unit, then hand the
 * window to the pool. */
static int lane_read_submit(lane *l)
{
    engine *e = l->e;
    reader *r = &l->r;
    int rc = sk_buf_reserve(&l->win, l->target - SK_MIN(l->target,
                                                         l->win.len));
    if (rc)
        return rc;
    sk_group_init(&l->g);
    l->busy = 1;
    if (r->comp != SK_COMP_NONE) {
        if ((rc = reader_raw_fill(r)))
            return rc;
        l->inflate.fn = lane_inflate_task;
        run_task(e, &l->inflate, &l->g);
        return SKIPPR_OK;
    }
    /* Uncompressed: bytes left from compression sniffing, then straight
     * from the source into the window. */
    size_t n = 0;
    if (r->raw_pos < r->raw_len) {
        n = SK_MIN(l->target - SK_MIN(l->target, l->win.len),
                   r->raw_len - r->raw_pos);
        memcpy(l->win.data + l->win.len, r->raw + r->raw_pos, n);
        r->raw_pos += n;
        l->win.len += n;
    }
    size_t got = 0;
    if (l->win.len < l->target &&
        (rc = reader_read(r, l->win.data + l->win.len,
                          l->target - l->win.len, &got)))
        return rc;
    l->win.len += got;
    l->made = n + got;
    r->done = r->raw_eof && r->raw_pos == r->raw_len;
    l->final = r->done;
    lane_skip_bom(l);
    lane_frame(l, 1);
    return SKIPPR_OK;
}

/* The one error line for a unit that failed (the plugin's own line, if it
 * logged one, comes first and this one is then context). */
static void unit_failed(engine *e, const char *id, uint64_t offset, int rc)
{
    plugin_failed(e->src, "%s: unit %s failed near offset %" PRIu64 ": %s",
                  e->src->label, id, offset, skippr_status_str(rc));
}

/* A unit's format: the source's format option; else, for a unit resumed
 * mid-way, what its ledger record says; else the extension of its name
 * (under .gz or .zst); else SK_FORMAT_AUTO, and lane_sniff decides. */
static void lane_reset_format(lane *l)
{
    l->fmt_error = NULL;
    sk_csv_framer_free(&l->csv);
    sk_csv_framer_init(&l->csv, l->e->src->csv_delim);
    sk_xml_framer_free(&l->xml);
    sk_xml_framer_init(&l->xml);
    l->skip_until = 0;
}

static int lane_format(lane *l, const todo *t)
{
    engine *e = l->e;
    lane_reset_format(l);
    switch (e->src->format) {
    case SK_FORMAT_CSV: l->fmt = SK_FORMAT_CSV; break;
    case SK_FORMAT_XML: l->fmt = SK_FORMAT_XML; break;
    case SK_FORMAT_JSON:
    case SK_FORMAT_JSONL: l->fmt = SK_FORMAT_JSON; break;
    default:
        l->fmt = SK_FORMAT_AUTO;
        if (t->offset > 0) {
            l->fmt = (t->flags & SK_UNIT_CSV)   ? SK_FORMAT_CSV
                     : (t->flags & SK_UNIT_XML) ? SK_FORMAT_XML
                                                : SK_FORMAT_JSON;
            break;
        }
        const char *id = t->id, *dot = strrchr(id, '.');
        size_t end = strlen(id);
        if (dot && (strcmp(dot, ".gz") == 0 || strcmp(dot, ".gzip") == 0 ||
                    strcmp(dot, ".zst") == 0 || strcmp(dot, ".zstd") == 0)) {
            end = (size_t)(dot - id);
            dot = NULL;
            for (size_t i = end; i > 0 && id[i - 1] != '/'; i--)
                if (id[i - 1] == '.') {
                    dot = id + i - 1;
                    break;
                }
        }
        if (!dot)
            break;
        size_t el = end - (size_t)(dot - id);
        if (el == 4 && memcmp(dot, ".csv", 4) == 0)
            l->fmt = SK_FORMAT_CSV;
        else if (el == 4 && memcmp(dot, ".xml", 4) == 0)
            l->fmt = SK_FORMAT_XML;
        else if ((el == 5 && memcmp(dot, ".json", 5) == 0) ||
                 (el == 6 && memcmp(dot, ".jsonl", 6) == 0) ||
                 (el == 7 && memcmp(dot, ".ndjson", 7) == 0))
            l->fmt = SK_FORMAT_JSON;
    }
    return l->fmt == SK_FORMAT_AUTO ? SKIPPR_OK : lane_format_known(l);
}

/* Pipeline thread: open the lane's unit and sniff its compression. */
static int lane_open(lane *l, todo *t)
{
    engine *e = l->e;
    const skippr_source_ops *ops = e->src->plugin->source;
    sk_unit_rec *u = sk_ledger_touch(e->st->ledger, t->id, t->version,
                                     t->size);
    if (!u)
        return SKIPPR_NOMEM;
    u->offset = t->offset;
    u->flags = t->flags & ~SK_UNIT_DONE;
    l->t = t;
    l->u = u;
    reader *r = &l->r;
    uint8_t *raw = r->raw;
    *r = (reader){.ops = ops, .ctx = e->src->ctx, .comp = SK_COMP_NONE,
                  .raw = raw, .max_ratio = e->cfg->max_inflate_ratio};
    int rc = lane_format(l, t);
    if (rc)
        return rc;
    if (t->offset > 0)
        sk_info("%s: resuming unit %s at offset %" PRId64, e->src->label,
                t->id, t->offset);
    int inflated = (t->flags & SK_UNIT_INFLATED) != 0;
    /* A resumed CSV unit needs its header row again, and a resumed XML
     * unit the elements open around its records: both are framed again
     * from their start, and the records before the offset are dropped
     * (skip_until). */
    int again = t->offset > 0 &&
                (l->fmt == SK_FORMAT_XML ||
                 (l->fmt == SK_FORMAT_CSV && !l->csv.have_header));
    int reread = inflated || again;
    int64_t raw_off = reread ? 0 : t->offset;
    l->base = again ? 0 : (uint64_t)t->offset;
    l->first = l->base == 0;
    if (again)
        l->skip_until = (uint64_t)t->offset;
    l->target = WINDOW_BYTES;
    sk_buf_reset(&l->win);
    sk_json_framer_init(&l->fr);
    if (t->offset > 0 && (t->flags & SK_UNIT_IN_ARRAY)) {
        l->fr.in_array = 1;
        l->fr.want_comma = 1;
    }
    skippr_unit unit = {t->id, t->version, t->size};
    rc = ops->open(e->src->ctx, &unit, raw_off, &r->stream);
    if (rc) {
        r->stream = NULL;
        plugin_failed(e->src, "%s: cannot open unit %s at offset %" PRId64
                      ": %s", e->src->label, t->id, raw_off,
                      skippr_status_str(rc));
        return rc;
    }
    /* Compression is detected from the unit's first bytes. */
    if (raw_off == 0) {
        while (!r->raw_eof && r->raw_len < 4) {
            size_t n = 0;
            if ((rc = reader_read(r, r->raw + r->raw_len, 4 - r->raw_len,
                                  &n)))
                goto fail;
            r->raw_len += n;
        }
        r->comp = sk_comp_detect(r->raw, r->raw_len);
        if (r->comp != SK_COMP_NONE) {
            if (!(r->dec = sk_decomp_new(r->comp))) {
                rc = SKIPPR_NOMEM;
                goto fail;
            }
            u->flags |= SK_UNIT_INFLATED;
        }
    }
    /* A resumed compressed unit: skip what is already durable. */
    if (reread && t->offset > 0 && !again) {
        if ((rc = sk_buf_reserve(&l->win, WINDOW_BYTES)))
            goto fail;
        uint64_t skip = (uint64_t)t->offset;
        while (skip > 0) {
            size_t n;
            size_t want = (size_t)SK_MIN(skip, (uint64_t)WINDOW_BYTES);
            if ((rc = reader_fill(r, l->win.data, want, &n)))
                goto fail;
            if (n == 0)
                break;
            skip -= n;
        }
    }
    return SKIPPR_OK;
fail:
    unit_failed(e, t->id, (uint64_t)t->offset, rc);
    return rc;
}

/* Pipeline thread: the unit is finished, or failed; give its stream back. */
static void lane_close(lane *l)
{
    engine *e = l->e;
    if (l->r.stream)
        e->src->plugin->source->close(e->src->ctx, l->r.stream);
    l->r.stream = NULL;
    sk_decomp_free(l->r.dec);
    l->r.dec = NULL;
    sk_csv_framer_free(&l->csv);
    sk_xml_framer_free(&l->xml);
    l->t = NULL;
    l->u = NULL;
}

/* Whether a record of group g (in buf) holds a line feed. */
static int group_spans_lines(const piece *p, const group *g,
                             const uint8_t *buf)
{
    for (uint32_t r = g->first; r != NO_REC; r = p->recs[r].next)
        if (memchr(buf + p->recs[r].start, '\n',
                   p->recs[r].end - p->recs[r].start))
            return 1;
    return 0;
}

/* Pipeline thread: wait for the lane's tasks, then append its records in
 * order. Sets *finished when the unit is done. */
static int lane_apply(lane *l, int *finished)
{
    engine *e = l->e;
    if (e->pool)
        sk_pool_wait(e->pool, &l->g);
    l->busy = 0;
    *finished = 0;
    const uint8_t *buf = l->win.data;
    size_t len = l->win.len;
    const char *unit_id = l->t->id;
    e->bytes_in += l->made;
    e->bytes_since_commit += l->made;
    if (l->r.bomb) {
        sk_error("%s: unit %s decompresses to more than %" PRId64 " times "
                 "its compressed size (%" PRIu64 " bytes from %" PRIu64 "): "
                 "a decompression bomb? It was not copied; raise the "
                 "pipeline's max_inflate_ratio (0: no limit) to copy it",
                 e->src->label, unit_id, e->cfg->max_inflate_ratio,
                 l->r.out_total, l->r.in_total);
        return SKIPPR_RANGE;
    }
    if (l->fmt_error) {
        sk_error("%s: unit %s: %s", e->src->label, unit_id, l->fmt_error);
        return SKIPPR_INVAL;
    }
    size_t expect = 0;
    sk_json_framer cur = l->fr;
    sk_csv_framer ccur = l->csv;
    int need_more = 0;
    int cut_noted = 0; /* a dead letter already gives l->r.error */
    for (size_t i = 0; i < l->npieces; i++) {
        piece *p = &l->pieces[i];
        if (p->from != expect || p->fr_in.in_array != cur.in_array ||
            p->fr_in.want_comma != cur.want_comma) {
            /* The speculative cut was not a record boundary: redo. */
            p->from = expect;
            p->fr_in = cur;
            if (p->from >= p->to && i + 1 < l->npieces)
                continue;
            piece_run(p);
        }
        if (p->csv) /* a header read by the piece is the lane's now */
            l->csv = ccur = p->csv_out;
        if (p->xml)
            l->xml = p->xml_out;
        if (p->failed)
            return SKIPPR_NOMEM;
        for (size_t r = 0; p->ndead && r < p->nrec; r++) {
            rec_out *o = &p->recs[r];
            if (!o->reason)
                continue;
            /* A record cut off by a broken compressed stream says so. */
            const char *why = l->r.error && l->final && o->end == len
                                  ? l->r.error
                                  : o->reason;
            cut_noted |= why == l->r.error;
            int rc = dead_letter(e, unit_id, l->base + o->start,
                                 buf + o->start, o->end - o->start, why);
            if (rc)
                return rc;
        }
        for (size_t gi = 0; gi < p->ngroups; gi++) {
            const group *g = &p->groups[gi];
            const sk_memo_key *k = &p->memo.keys_at[gi];
            const char *key = (const char *)p->memo.keys.data + k->key_off;
            size_t klen = k->key_len;
            sk_slice *s;
            if (p->csv || p->xml) {
                /* Rows under another header go to another slice: the
                 * header's id follows the key after a NUL (the object's
                 * name is the part before it); an XML slice's key also
                 * names its root, for the close tag. */
                char id[300];
                int n = p->csv ? snprintf(id, sizeof id, "csv:%016" PRIx64,
                                          p->csv_out.hdr.id)
                               : snprintf(id, sizeof id, "xml:%016" PRIx64
                                          ":%s", p->xml_out.id,
                                          p->xml_out.root);
                if (n < 0 || (size_t)n >= sizeof id)
                    return SKIPPR_RANGE;
                s = tagged_slice(e, &e->slice_key, key, klen, id,
                                 (size_t)n);
            } else {
                s = sk_state_slice(e->st, key, klen, k->key_hash,
                                   SK_SLICE_DATA);
            }
            if (!s)
                return SKIPPR_NOMEM;
            if ((p->csv || p->xml) && s->records == 0) {
                /* A new CSV slice starts with its header row; a new XML
                 * slice with the declaration and the root's start tag. */
                int rc = p->csv ? sk_state_append(e->st, s,
                                                  p->csv_out.hdr.row,
                                                  p->csv_out.hdr.row_len)
                                : sk_state_append(e->st, s, p->xml_out.head,
                                                  p->xml_out.head_len);
                if (rc)
                    return rc;
            }
            if (e->multiline_check && !p->csv && !p->xml &&
                group_spans_lines(p, g, buf)) {
                /* Records one by one, their CRC computed as appended. */
                for (uint32_t r = g->first; r != NO_REC;
                     r = p->recs[r].next) {
                    const rec_out *o = &p->recs[r];
                    int rc = append_json(e, s, key, klen, buf + o->start,
                                         o->end - o->start, unit_id,
                                         l->base + o->start);
                    if (rc)
                        return rc;
                }
                continue;
            }
            for (uint32_t r = g->first; r != NO_REC; r = p->recs[r].next) {
                const rec_out *o = &p->recs[r];
                int rc = sk_state_append_raw(e->st, s, buf + o->start,
                                             o->end - o->start);
                if (rc)
                    return rc;
            }
            sk_state_fold_crc(s, g->crc, g->xpow);
            e->records += g->nrec;
        }
        expect = p->stop;
        cur = p->fr_out;
        if (p->need_more) {
            need_more = 1;
            break;
        }
    }
    l->fr = cur;
    l->csv = ccur; /* the header, once read, is the lane's */
    size_t consumed = expect;
    int rc;
    if (need_more && consumed == 0 && l->win.len >= l->target) {
        if (l->target < e->win_max) {
            l->target = SK_MIN(l->target * 2, e->win_max);
            return SKIPPR_OK; /* a big record: widen the window */
        }
        /* No record end within the hard window: dead-letter to the next
         * newline, or the whole window. */
        const uint8_t *nl = memchr(buf, '\n', len);
        size_t cut = nl ? (size_t)(nl - buf) : len;
        if ((rc = dead_letter(e, unit_id, l->base, buf, cut,
                              "no record end within the largest window "
                              "(4 x max_record_bytes); bytes up to the "
                              "next newline dead-lettered")))
            return rc;
        consumed = nl ? cut + 1 : cut;
        sk_json_framer_init(&l->fr);
    }
    memmove(l->win.data, l->win.data + consumed, l->win.len - consumed);
    l->win.len -= consumed;
    l->base += consumed;
    if (l->target > WINDOW_BYTES && l->win.len < WINDOW_BYTES)
        l->target = WINDOW_BYTES;
    sk_unit_rec *u = l->u;
    /* Unit progress as of the end of the last whole record. */
    u->offset = (int64_t)SK_MAX(l->base, l->skip_until);
    if (l->fr.in_array)
        u->flags |= SK_UNIT_IN_ARRAY;
    else
        u->flags &= ~SK_UNIT_IN_ARRAY;
    if (l->fmt == SK_FORMAT_CSV)
        u->flags |= SK_UNIT_CSV;
    if (l->fmt == SK_FORMAT_XML)
        u->flags |= SK_UNIT_XML;
    u->dirty = 1;
    if (l->final && need_more && l->win.len > 0) {
        /* A cut-off record at the very end of the unit. */
        if ((rc = dead_letter(e, unit_id, l->base, l->win.data, l->win.len,
                              l->r.error ? l->r.error : "truncated record")))
            return rc;
        cut_noted = l->r.error != NULL;
        l->base += l->win.len;
        l->win.len = 0;
        u->offset = (int64_t)l->base;
    }
    if (!l->final || (need_more && l->win.len > 0))
        return SKIPPR_OK;
    if (l->r.error && l->win.len == 0 && !cut_noted) {
        /* The stream broke between records: the rest cannot be read.
         * An empty dead letter at the break says so where dead letters
         * are counted and kept, not only in the log. */
        sk_warn("%s: unit %s: %s at decompressed offset %" PRIu64
                "; records before it were copied", e->src->label, unit_id,
                l->r.error, l->base);
        if ((rc = dead_letter(e, unit_id, l->base, l->win.data, 0,
                              l->r.error)))
            return rc;
    }
    u->flags |= SK_UNIT_DONE;
    u->dirty = 1;
    if (!l->doc)
        e->units_done++;
    *finished = 1;
    return SKIPPR_OK;
}

/* Copy the units of one listing batch through the lanes. Whichever lane
 * finishes first is applied first, so one slow object does not hold up the
 * others; a unit's own windows are always applied in order. */
static int run_units(engine *e, todo *todo, size_t ntodo)
{
    lane *lanes = e->lanes;
    size_t nl = e->nlanes, next = 0;
    sk_group *waiting[MAX_LANES];
    size_t widx[MAX_LANES];
    int rc = SKIPPR_OK;
    for (;;) {
        /* Give every idle lane a unit and every lane its next window. */
        for (size_t i = 0; i < nl && !rc; i++) {
            lane *l = &lanes[i];
            if (l->busy)
                continue;
            if (!l->t && next < ntodo && !sk_stop_requested)
                rc = lane_open(l, &todo[next++]);
            else if (!l->t)
                continue;
            if (!rc && (rc = lane_read_submit(l)))
                unit_failed(e, l->t->id, l->base, rc);
        }
        if (rc)
            break;
        if (sk_stop_requested) {
            rc = SKIPPR_STOPPED;
            break;
        }
        size_t nw = 0;
        for (size_t i = 0; i < nl; i++)
            if (lanes[i].busy) {
                widx[nw] = i;
                waiting[nw++] = &lanes[i].g;
            }
        if (nw == 0)
            break; /* every unit is done */
        /* Apply a finished lane; while none is, frame a queued one here
         * rather than sleep: this thread is one of the pool's cores. */
        size_t w = 0;
        while (e->pool && !sk_pool_done_any(waiting, nw, &w)) {
            if (!sk_pool_help(e->pool)) {
                w = sk_pool_wait_any(e->pool, waiting, nw);
                break;
            }
        }
        lane *l = &lanes[widx[w]];
        int finished = 0;
        if ((rc = lane_apply(l, &finished))) {
            unit_failed(e, l->t->id, l->base, rc);
            break;
        }
        if (finished) {
            lane_close(l);
            /* Finished units wait in memory for the next compaction, which
             * otherwise comes only with a seal: bound them, at a cost
             * that stays linear (the file is rewritten each time it has
             * doubled at most). */
            sk_ledger *led = e->st->ledger;
            uint64_t held = sk_ledger_recent_count(led);
            if (held >= LEDGER_HELD &&
                held >= sk_ledger_file_count(led) / 2 &&
                (rc = sk_state_compact_ledger(e->st)))
                break;
        }
        if (st_memory_over(e) && (rc = sk_state_flush_blocks(e->st, 1)))
            break;
        if ((rc = maybe_commit(e, 0)))
            break;
        uint64_t now = sk_now_ns();
        if (now - e->last_seal_check_ns >=
            (uint64_t)e->cfg->commit_interval_ms * 1000000ULL) {
            e->last_seal_check_ns = now;
            if ((rc = flush_slices(e, 0)))
                break;
        }
        progress(e, 0);
    }
    /* Tasks point into the lanes: let them finish before anything goes. */
    for (size_t i = 0; i < nl; i++) {
        if (lanes[i].busy && e->pool)
            sk_pool_wait(e->pool, &lanes[i].g);
        lanes[i].busy = 0;
        if (lanes[i].t)
            lane_close(&lanes[i]);
    }
    return rc;
}

/* A zeroed lane's buffers; its window holds up to win_max bytes.
 * lane_free() releases them, also after a failure here. */
static int lane_init(engine *e, lane *l, size_t win_max)
{
    l->e = e;
    sk_buf_init(&l->win, win_max);
    l->r.raw = sk_malloc(RAW_READ);
    l->pieces = sk_calloc(MAX_PIECES, sizeof *l->pieces);
    if (!l->r.raw || !l->pieces)
        return SKIPPR_NOMEM;
    for (int k = 0; k < MAX_PIECES; k++) {
        l->pieces[k].e = e;
        sk_memo_init(&l->pieces[k].memo, e->win_max);
        sk_buf_init(&l->pieces[k].scratch, e->win_max);
    }
    return SKIPPR_OK;
}

static void lane_free(lane *l)
{
    for (int k = 0; l->pieces && k < MAX_PIECES; k++) {
        sk_free(l->pieces[k].recs);
        sk_free(l->pieces[k].groups);
        sk_memo_free(&l->pieces[k].memo);
        sk_buf_free(&l->pieces[k].scratch);
        sk_csv_decoder_free(l->pieces[k].csvdec);
    }
    sk_csv_framer_free(&l->csv);
    sk_xml_framer_free(&l->xml);
    sk_free(l->pieces);
    sk_free(l->r.raw);
    sk_buf_free(&l->win);
}

static int lanes_init(engine *e)
{
    /* LANES_PER_THREAD per thread plus one, so that workers frame while
     * the pipeline thread reads and applies; fewer if windows would not
     * fit the memory budget. */
    size_t n = e->nthreads > 1
                   ? SK_MIN((size_t)e->nthreads * LANES_PER_THREAD + 1,
                            MAX_LANES)
                   : 1;
    size_t per = 2 * WINDOW_BYTES + RAW_READ;
    size_t fit = (size_t)(e->cfg->memory_budget / 2) / per;
    if (n > fit)
        n = fit > 2 ? fit : 2;
    if (e->nthreads == 1)
        n = 1;
    e->lanes = sk_calloc(n, sizeof *e->lanes);
    if (!e->lanes)
        return SKIPPR_NOMEM;
    e->nlanes = n;
    for (size_t i = 0; i < n; i++) {
        int rc = lane_init(e, &e->lanes[i], e->win_max);
        if (rc)
            return rc;
    }
    return SKIPPR_OK;
}

/* Free the lanes of listed units; lanes_init() may make them again. */
static void lanes_free(engine *e)
{
    for (size_t i = 0; i < e->nlanes; i++)
        lane_free(&e->lanes[i]);
    sk_free(e->lanes);
    e->lanes = NULL;
    e->nlanes = 0;
}

/* Between polls of the continuous mode, when every lane is idle: give
 * back what the lanes' buffers grew to (windows, pieces, framers), so that
 * memory follows the work of the last poll rather than the largest unit
 * seen since the start. The lanes are made anew, their buffers empty. */
static int lanes_shed(engine *e)
{
    for (size_t i = 0; i < e->nlanes; i++)
        if (e->lanes[i].t || e->lanes[i].busy)
            return SKIPPR_OK;
    lanes_free(e);
    return lanes_init(e);
}

/* ---- listing ------------------------------------------------------------- */

static void todo_clear(engine *e)
{
    for (size_t i = 0; i < e->ntodo; i++) {
        sk_free(e->todo[i].id);
        sk_free(e->todo[i].version);
    }
    e->ntodo = 0;
}

typedef struct list_ctx {
    engine *e;
    int rc;
} list_ctx;

static int list_cb(void *ud, const skippr_unit *u)
{
    list_ctx *c = ud;
    engine *e = c->e;
    const sk_unit_rec *known = NULL;
    int rc = sk_ledger_lookup(e->st->ledger, u->id, &known);
    if (rc) {
        c->rc = rc;
        return 1;
    }
    char *after = sk_strdup(u->id);
    if (!after) {
        c->rc = SKIPPR_NOMEM;
        return 1;
    }
    sk_free(e->list_after);
    e->list_after = after;
    const char *ver = u->version ? u->version : "";
    int64_t offset = 0;
    uint32_t flags = 0;
    if (known) {
        int same = strcmp(known->version, ver) == 0 && known->size == u->size;
        if (known->flags & SK_UNIT_DONE) {
            if (same) {
                e->skipped_done++;
            } else {
                e->skipped_changed++;
                sk_warn("%s: unit %s changed since it was copied (version "
                        "%s, %" PRId64 " bytes; now %s, %" PRId64 " bytes); "
                        "skipped", e->src->label, u->id, known->version,
                        known->size, ver, u->size);
            }
            return 0;
        }
        if (same) {
            offset = known->offset;
            flags = known->flags;
        } else {
            sk_warn("%s: unit %s changed while partly copied; records up to "
                    "offset %" PRId64 " are kept and reading resumes there",
                    e->src->label, u->id, known->offset);
            offset = known->offset;
            flags = known->flags;
        }
    }
    if (sk_array_grow(&e->todo, e->ntodo, &e->todo_cap, sizeof *e->todo,
                      256)) {
        c->rc = SKIPPR_NOMEM;
        return 1;
    }
    todo *t = &e->todo[e->ntodo];
    t->id = sk_strdup(u->id);
    t->version = sk_strdup(ver);
    if (!t->id || !t->version) {
        sk_free(t->id);
        sk_free(t->version);
        c->rc = SKIPPR_NOMEM;
        return 1;
    }
    t->size = u->size;
    t->offset = offset;
    t->flags = flags;
    e->ntodo++;
    return e->ntodo >= (size_t)e->cfg->list_batch; /* process in batches */
}

/* One pass over the source: list in batches, copy every new unit. */
static int copy_pass(engine *e)
{
    const skippr_source_ops *ops = e->src->plugin->source;
    sk_free(e->list_after);
    e->list_after = NULL;
    for (;;) {
        todo_clear(e);
        list_ctx c = {e, 0};
        /* list_cb replaces e->list_after as units arrive, while the
         * plugin still reads start_after: keep this round's alive. */
        char *from = e->list_after;
        e->list_after = NULL;
        int rc = ops->list(e->src->ctx, from, list_cb, &c);
        if (!e->list_after)
            e->list_after = from;
        else
            sk_free(from);
        if (c.rc)
            return c.rc;
        if (rc) {
            plugin_failed(e->src, "%s: listing failed: %s", e->src->label,
                          skippr_status_str(rc));
            return rc;
        }
        int more = e->ntodo >= (size_t)e->cfg->list_batch;
        if (ops->prefetch && e->ntodo) {
            /* Let the source start fetching the whole batch. */
            skippr_unit *units = sk_calloc(e->ntodo, sizeof *units);
            if (!units)
                return SKIPPR_NOMEM;
            for (size_t i = 0; i < e->ntodo; i++)
                units[i] = (skippr_unit){e->todo[i].id, e->todo[i].version,
                                         e->todo[i].size};
            rc = ops->prefetch(e->src->ctx, units, e->ntodo);
            sk_free(units);
            if (rc)
                sk_warn("%s: prefetch failed (%s); reading one unit at a time",
                        e->src->label, skippr_status_str(rc));
        }
        if ((rc = run_units(e, e->todo, e->ntodo)))
            return rc;
        if (!more)
            return SKIPPR_OK;
    }
}

/* ---- streaming sources ---------------------------------------------------
 *
 * A streaming source (Kafka, MQTT, HTTP push) calls host->emit() from its
 * poll(), one message per record. Each unit's next position lives in the
 * ledger like a file's offset and is made durable by the same group
 * commits; only after a durable commit are positions acked to the source.
 * A message below its unit's durable position was copied already and is
 * dropped, so a source that redelivers (a rebalance, a restart before the
 * ack reached the broker) never duplicates a record. */

/* The engine's record of a unit, looked up (and resumed from the ledger
 * file) on first sight. NULL on allocation or ledger failure (*rc). */
static stream_unit *stream_unit_get(engine *e, const char *id, int *rc)
{
    for (size_t i = 0; i < e->nsunits; i++)
        if (strcmp(e->sunits[i].rec->id, id) == 0)
            return &e->sunits[i];
    const sk_unit_rec *known = NULL;
    if ((*rc = sk_ledger_lookup(e->st->ledger, id, &known)))
        return NULL;
    int64_t offset = known ? known->offset : 0;
    *rc = SKIPPR_NOMEM;
    if (sk_array_grow(&e->sunits, e->nsunits, &e->sunits_cap,
                      sizeof *e->sunits, 16))
        return NULL;
    sk_unit_rec *r = sk_ledger_touch(e->st->ledger, id, "", -1);
    if (!r)
        return NULL;
    if (r->offset < offset)
        r->offset = offset;
    stream_unit *u = &e->sunits[e->nsunits++];
    *u = (stream_unit){r, r->offset};
    *rc = SKIPPR_OK;
    return u;
}

/* A routing field that comes with the message, not from its bytes:
 * $key, $topic, $header.NAME. Returns 0 when path is no such field. */
static int message_field(const skippr_message *m, const char *path,
                         sk_field *f)
{
    *f = (sk_field){SK_FIELD_ABSENT, NULL, 0};
    if (path[0] != '$')
        return 0;
    if (strcmp(path, "$key") == 0) {
        if (m->key && m->key_len)
            *f = (sk_field){SK_FIELD_STRING, m->key, m->key_len};
    } else if (strcmp(path, "$topic") == 0) {
        if (m->topic && *m->topic)
            *f = (sk_field){SK_FIELD_STRING, (const uint8_t *)m->topic,
                            strlen(m->topic)};
    } else if (strncmp(path, "$header.", 8) == 0) {
        for (size_t i = 0; i < m->nheaders; i++) {
            const skippr_header *h = &m->headers[i];
            if (h->name && strcmp(h->name, path + 8) == 0 && h->len) {
                *f = (sk_field){SK_FIELD_STRING, h->value, h->len};
                break;
            }
        }
    }
    return 1;
}

/* One message: a JSON value, routed by its fields and the message's. */
static int stream_record(engine *e, const skippr_message *m)
{
    const uint8_t *buf = m->data;
    size_t len = m->len;
    const char *why = NULL;
    sk_json_record r;
    if (len == 0)
        why = "empty message";
    else if (len > (size_t)e->cfg->max_record_bytes)
        why = "record larger than max_record_bytes";
    else {
        sk_json_framer fr;
        sk_json_framer_init(&fr);
        size_t pos = 0;
        sk_json_rc rc = sk_json_next(&fr, sk_router_json_spec(e->router),
                                     buf, len, &pos, 1, &r);
        while (pos < len && ws(buf[pos]))
            pos++;
        if (rc == SK_JSON_ERROR)
            why = r.reason;
        else if (rc != SK_JSON_RECORD)
            why = "message holds no JSON value";
        else if (pos < len)
            why = "message holds more than one JSON value";
    }
    if (why)
        return dead_letter(e, m->unit, (uint64_t)m->position, buf, len, why);
    sk_field f[SK_PEEK_MAX_PATHS];
    int rc = sk_route_json_fields(e->router, buf, r.values, &e->sscratch, f);
    if (rc)
        return rc;
    for (size_t i = 0; i < e->npaths; i++) {
        sk_field mf;
        if (message_field(m, e->paths[i], &mf))
            f[i] = mf;
    }
    sk_buf_reset(&e->slice_key);
    if ((rc = sk_route_key(e->router, f, &e->slice_key)))
        return rc;
    const char *key = (const char *)e->slice_key.data;
    size_t klen = e->slice_key.len;
    sk_slice *s = sk_state_slice(e->st, key, klen, sk_hash_fast(key, klen),
                                 SK_SLICE_DATA);
    if (!s)
        return SKIPPR_NOMEM;
    return append_json(e, s, key, klen, buf, len, m->unit,
                       (uint64_t)m->position);
}

/* The format a document message names, SK_FORMAT_AUTO for none, or -1
 * for a name the engine does not know. */
static int document_format(const engine *e, const skippr_message *m)
{
    const char *f = m->format;
    if (!f || !*f)
        return e->src->format == SK_FORMAT_JSONL ? SK_FORMAT_JSON
                                                 : (int)e->src->format;
    if (strcmp(f, "json") == 0 || strcmp(f, "jsonl") == 0 ||
        strcmp(f, "ndjson") == 0)
        return SK_FORMAT_JSON;
    if (strcmp(f, "csv") == 0)
        return SK_FORMAT_CSV;
    if (strcmp(f, "xml") == 0)
        return SK_FORMAT_XML;
    return -1;
}

/* A document message (an HTTP body of NDJSON, CSV or XML): framed, peeked
 * and routed by the lane code that copies files, in one piece on this
 * thread. Every record shares the message's position; bad ones are
 * dead-lettered under "<unit>#<position>" at their byte offset. */
static int stream_document(engine *e, const skippr_message *m)
{
    int fmt = document_format(e, m);
    if (fmt < 0) {
        sk_error("%s: a document of unknown format '%s'", e->src->label,
                 m->format);
        return SKIPPR_INVAL;
    }
    if (m->len == 0)
        return SKIPPR_OK; /* nothing to frame, nothing to reject */
    if (m->len > DOC_MAX_BYTES) {
        sk_error("%s: a document of %zu bytes; at most %u are taken",
                 e->src->label, m->len, DOC_MAX_BYTES);
        return SKIPPR_RANGE;
    }
    if (!e->doc_lane) {
        if (!(e->doc_lane = sk_calloc(1, sizeof *e->doc_lane)))
            return SKIPPR_NOMEM;
        int rc = lane_init(e, e->doc_lane, DOC_MAX_BYTES);
        if (rc)
            return rc;
        e->doc_lane->doc = 1;
    }
    lane *l = e->doc_lane;
    char id[600];
    int n = snprintf(id, sizeof id, "%s#%" PRId64, m->unit, m->position);
    if (n < 0 || (size_t)n >= sizeof id)
        return SKIPPR_RANGE;
    todo t = {id, "", (int64_t)m->len, 0, 0};
    lane_reset_format(l);
    l->fmt = fmt;
    int rc = fmt == SK_FORMAT_AUTO ? SKIPPR_OK : lane_format_known(l);
    if (rc)
        return rc;
    e->doc_rec = (sk_unit_rec){0};
    l->t = &t;
    l->u = &e->doc_rec;
    sk_buf_reset(&l->win);
    if ((rc = sk_buf_append(&l->win, m->data, m->len)))
        return rc;
    l->base = 0;
    l->first = 1;
    l->final = 1;
    l->made = m->len;
    l->target = m->len + 1; /* never "widen the window" */
    sk_json_framer_init(&l->fr);
    sk_group_init(&l->g);
    e->doc_msg = m;
    e->doc_dead = 0;
    lane_skip_bom(l);
    lane_frame(l, 0);
    int finished = 0;
    if (l->fmt_error) {
        /* The sender's mistake (CSV for a Kafka sink, say), not the
         * pipeline's: the document is set aside whole. */
        e->bytes_in += m->len;
        e->bytes_since_commit += m->len;
        rc = dead_letter(e, id, 0, m->data, m->len, l->fmt_error);
        finished = 1;
    } else {
        rc = lane_apply(l, &finished);
    }
    e->doc_msg = NULL;
    l->t = NULL;
    l->u = NULL;
    if (!rc && !finished) {
        sk_error("%s: document %s was not framed to its end", e->src->label,
                 id);
        rc = SKIPPR_CORRUPT;
    }
    return rc;
}

static int stream_emit(void *ud, const skippr_message *m)
{
    engine *e = ud;
    if (!m->unit || !*m->unit || m->position < 0 || (!m->data && m->len)) {
        sk_error("%s: emit() without a unit, a position >= 0 or data",
                 e->src->label);
        return SKIPPR_INVAL;
    }
    int rc;
    stream_unit *u = stream_unit_get(e, m->unit, &rc);
    if (!u)
        return rc;
    int doc = m->struct_size >= offsetof(skippr_message, problem_cap) +
                                    sizeof m->problem_cap &&
              (m->flags & SKIPPR_MSG_DOCUMENT);
    if (doc && m->problem && m->problem_cap)
        m->problem[0] = '\0';
    if (m->position < u->rec->offset) {
        e->duplicates++;
        return SKIPPR_OK;
    }
    if ((rc = doc ? stream_document(e, m) : stream_record(e, m)))
        return rc;
    u->rec->offset = m->position + 1;
    u->rec->dirty = 1;
    if (!doc) { /* a document's bytes were counted by lane_apply */
        e->bytes_in += m->len;
        e->bytes_since_commit += m->len;
    }
    return SKIPPR_OK;
}

static int stream_position(void *ud, const char *unit, int64_t *next)
{
    engine *e = ud;
    int rc;
    stream_unit *u = stream_unit_get(e, unit, &rc);
    if (!u)
        return rc;
    /* Durable or not yet: a message emitted in this run is not wanted
     * again either. */
    if (u->rec->offset == 0)
        return SKIPPR_NOENT;
    *next = u->rec->offset;
    return SKIPPR_OK;
}

/* A durable commit, then every unit's new position is acked. */
static int stream_sync(void *ud)
{
    engine *e = ud;
    int rc = sk_state_commit(e->st);
    if (rc)
        return rc;
    e->bytes_since_commit = 0;
    e->last_commit_ns = sk_now_ns();
    const skippr_source_ops *ops = e->src->plugin->source;
    for (size_t i = 0; i < e->nsunits; i++) {
        stream_unit *u = &e->sunits[i];
        if (u->rec->offset <= u->acked)
            continue;
        if ((rc = ops->ack(e->src->ctx, u->rec->id, u->rec->offset - 1))) {
            plugin_failed(e->src, "%s: ack of %s failed: %s", e->src->label,
                          u->rec->id, skippr_status_str(rc));
            return rc;
        }
        u->acked = u->rec->offset;
    }
    return SKIPPR_OK;
}

/* Poll the source until it ends (--once) or a stop is asked for, with
 * durable commits and acks every commit_interval_ms and slices sealed when
 * due. */
static int stream_run(engine *e)
{
    const skippr_source_ops *ops = e->src->plugin->source;
    int rc;
    for (;;) {
        if (sk_stop_requested)
            return SKIPPR_STOPPED;
        rc = ops->poll(e->src->ctx, 100);
        if (rc == SKIPPR_END)
            break;
        if (rc == SKIPPR_STOPPED)
            return rc;
        if (rc) {
            plugin_failed(e->src, "%s: poll failed: %s", e->src->label,
                          skippr_status_str(rc));
            return rc;
        }
        progress(e, 0);
        uint64_t now = sk_now_ns();
        if (now - e->last_commit_ns >=
            (uint64_t)e->cfg->commit_interval_ms * 1000000ULL) {
            if ((rc = stream_sync(e)))
                return rc;
        } else if (st_memory_over(e) &&
                   (rc = sk_state_flush_blocks(e->st, 1))) {
            return rc;
        }
        if (now - e->last_seal_check_ns >= 1000000000ULL) {
            e->last_seal_check_ns = now;
            if ((rc = flush_slices(e, 0)))
                return rc;
            if (++e->seal_checks % 10 == 0)
                sk_release_free_memory();
        }
    }
    return stream_sync(e);
}

/* ---- setup ------------------------------------------------------------ */

static int open_endpoints(engine *e, const sk_yaml_doc *doc)
{
    sk_cfg_err err;
    if (sk_registry_load(&e->reg, doc, e->cfg->plugin_dirs, &err)) {
        sk_error("%s", err.msg);
        return SKIPPR_INVAL;
    }
    const sk_endpoint_cfg *eps[2] = {&e->cfg->source, &e->cfg->sink};
    for (int i = 0; i < 2; i++) {
        const sk_plugin_lib *lib = sk_registry_find(&e->reg, eps[i]->plugin);
        if (!lib || (i == 0 && !lib->desc->source) ||
            (i == 1 && !lib->desc->sink)) {
            char list[512] = "";
            for (size_t k = 0; k < e->reg.n; k++) {
                const skippr_plugin *d = e->reg.libs[k].desc;
                if (i == 0 ? !d->source : !d->sink)
                    continue;
                strncat(list, *list ? ", " : "", sizeof list - strlen(list) - 1);
                strncat(list, d->name, sizeof list - strlen(list) - 1);
            }
            sk_cfg_fail(&err, doc, eps[i]->at, "no %s plugin named '%s' "
                        "(available: %s)", i == 0 ? "source" : "sink",
                        eps[i]->plugin, *list ? list : "none found");
            sk_error("%s", err.msg);
            return SKIPPR_INVAL;
        }
        if (i == 0 && !lib->desc->source->list &&
            !(lib->desc->source->poll && lib->desc->source->ack)) {
            sk_error("%s: the source has neither list() nor poll() and "
                     "ack()", eps[i]->plugin);
            return SKIPPR_INVAL;
        }
        if (i == 0) {
            e->streaming = !lib->desc->source->list;
            e->hooks = (sk_stream_hooks){stream_emit, stream_position,
                                         stream_sync, e};
            int start = SK_START | (e->opts->once ? SK_START_ONCE : 0);
            if (sk_instance_new(lib->desc, 0, doc, eps[i], start,
                                e->streaming ? &e->hooks : NULL,
                                e->cfg->memory_budget, &e->src, &err)) {
                sk_error("%s", err.msg);
                return SKIPPR_INVAL;
            }
            continue;
        }
        /* One sink instance per upload thread; their counters add up in
         * the first one's. */
        e->up = sk_calloc((size_t)e->cfg->upload_concurrency, sizeof *e->up);
        if (!e->up)
            return SKIPPR_NOMEM;
        for (int k = 0; k < e->cfg->upload_concurrency; k++) {
            uploader *u = &e->up[k];
            u->e = e;
            sk_buf_init(&u->out, OUT_BUF + 64);
            sk_buf_init(&u->scratch, SK_WAL_MAX_PAYLOAD + 64);
            e->nup = k + 1;
            if (sk_instance_new(lib->desc, 1, doc, eps[i], SK_START, NULL,
                                e->cfg->memory_budget, &u->sink, &err)) {
                sk_error("%s", err.msg);
                return SKIPPR_INVAL;
            }
            if (k > 0)
                u->sink->counters_to = e->up[0].sink;
        }
        e->sink = e->up[0].sink;
    }
    return SKIPPR_OK;
}

/* Formats: the routing paths (CSV column names too), the data objects'
 * extension, the source's csv_columns; and the pairs not copied yet. */
static int formats_init(engine *e)
{
    e->paths = sk_router_paths(e->router, &e->npaths);
    e->ext = e->sink->format == SK_FORMAT_CSV   ? ".csv"
             : e->sink->format == SK_FORMAT_XML ? ".xml"
                                                : ".jsonl";
    e->multiline_check = strcmp(e->ext, ".jsonl") == 0 &&
                         !sink_takes_records(e->sink);
    e->xml_spec = sk_xml_spec_new(e->paths, e->npaths,
                                  e->src->xml_record_element);
    if (!e->xml_spec) {
        sk_error("transform: a path cannot be read in XML (an '@' segment "
                 "must be the last)");
        return SKIPPR_INVAL;
    }
    sk_buf_init(&e->slice_key, (size_t)1 << 20);
    sk_buf_init(&e->multiline_key, (size_t)1 << 20);
    sk_buf_init(&e->compact, (size_t)e->cfg->max_record_bytes + 1);
    sk_buf_init(&e->sscratch, (size_t)e->cfg->max_record_bytes + 64);
    const skippr_source_ops *sops = e->src->plugin->source;
    int documents = e->streaming &&
                    SKIPPR_OPS_HAS(skippr_source_ops, sops, flags) &&
                    (sops->flags & SKIPPR_SOURCE_DOCUMENTS);
    if (e->streaming && !documents && (e->src->format == SK_FORMAT_CSV ||
                                       e->src->format == SK_FORMAT_XML)) {
        sk_error("%s: this source's messages are JSON records; format %s "
                 "is for files and documents", e->src->label,
                 e->src->format == SK_FORMAT_CSV ? "csv" : "xml");
        return SKIPPR_INVAL;
    }
    const char *why = format_problem(e, e->src->format);
    if (why) {
        sk_error("%s -> %s: %s", e->src->label, e->sink->label, why);
        return SKIPPR_INVAL;
    }
    const char *cols = e->src->csv_columns;
    if (!cols)
        return SKIPPR_OK;
    size_t n = 1;
    for (const char *c = cols; *c; c++)
        n += *c == ',';
    if (n > SK_CSV_MAX_COLUMNS) {
        sk_error("%s: csv_columns names more than %d columns", e->src->label,
                 SK_CSV_MAX_COLUMNS);
        return SKIPPR_INVAL;
    }
    if (!(e->csv_cols = sk_calloc(n, sizeof *e->csv_cols)))
        return SKIPPR_NOMEM;
    const char *p = cols;
    for (size_t i = 0; i < n; i++) {
        const char *c = strchr(p, ',');
        size_t len = c ? (size_t)(c - p) : strlen(p);
        if (!(e->csv_cols[i] = sk_strndup(p, len)))
            return SKIPPR_NOMEM;
        e->ncsv_cols = i + 1;
        p = c ? c + 1 : p + len;
    }
    return SKIPPR_OK;
}

static void engine_free(engine *e)
{
    sk_xml_spec_free(e->xml_spec);
    for (size_t i = 0; i < e->ncsv_cols; i++)
        sk_free(e->csv_cols[i]);
    sk_free(e->csv_cols);
    sk_buf_free(&e->slice_key);
    sk_buf_free(&e->multiline_key);
    sk_buf_free(&e->compact);
    sk_buf_free(&e->sscratch);
    sk_free(e->sunits);
    todo_clear(e);
    sk_free(e->todo);
    sk_free(e->list_after);
    if (e->pool)
        sk_pool_free(e->pool);
    lanes_free(e);
    if (e->doc_lane)
        lane_free(e->doc_lane);
    sk_free(e->doc_lane);
    sk_router_free(e->router);
    sk_instance_free(e->src);
    for (int k = 0; k < e->nup; k++) {
        sk_instance_free(e->up[k].sink);
        sk_buf_free(&e->up[k].out);
        sk_buf_free(&e->up[k].scratch);
    }
    sk_free(e->up);
    sk_registry_close(&e->reg);
    sk_state_close(e->st);
}

int sk_pipeline_run(const sk_yaml_doc *doc, const sk_pipeline_cfg *cfg,
                    const sk_run_opts *opts)
{
    engine e;
    memset(&e, 0, sizeof e);
    e.cfg = cfg;
    e.opts = opts;
    e.start_ns = e.last_commit_ns = e.report_ns = sk_now_ns();
    e.nthreads = cfg->threads > 64 ? 64 : cfg->threads;
    int rc;
    const char *rerr = NULL;
    if ((rc = open_endpoints(&e, doc)))
        goto out;
    sk_route_config rcfg = cfg->route;
    rcfg.lines = e.src->format == SK_FORMAT_JSONL;
    e.router = sk_router_new(&rcfg, &rerr);
    if (!e.router) {
        sk_error("transform: %s", rerr ? rerr : "out of memory");
        rc = SKIPPR_INVAL;
        goto out;
    }
    if ((rc = formats_init(&e)))
        goto out;
    if ((rc = sk_state_open(cfg->state_dir, cfg->workspace, cfg->name, 0,
                            &e.st)))
        goto out;
    e.st->zstd_level = (int)cfg->wal_zstd_level;
    e.win_max = (size_t)cfg->max_record_bytes * 4 + WINDOW_BYTES;
    if ((rc = lanes_init(&e)))
        goto out;
    /* The pipeline thread frames too when it has nothing to apply, so the
     * pool has one worker fewer than the threads asked for. */
    if (e.nthreads > 1 && !(e.pool = sk_pool_new(e.nthreads - 1, 1024))) {
        rc = SKIPPR_NOMEM;
        goto out;
    }
    sk_info("pipeline %s: %s -> %s, %d thread%s, state %s",
            cfg->name, e.src->label, e.sink->label, e.nthreads,
            e.nthreads == 1 ? "" : "s", e.st->dir);

    /* Finish what a previous run sealed but did not confirm. */
    size_t pending = 0;
    for (size_t i = 0; i < e.st->nlive; i++)
        pending += e.st->live[i]->state == SK_SLICE_SEALED;
    if (pending)
        sk_info("recovery: re-writing %zu sealed slice%s", pending,
                pending == 1 ? "" : "s");
    if ((rc = flush_slices(&e, 0)))
        goto out;

    for (;;) {
        rc = e.streaming ? stream_run(&e) : copy_pass(&e);
        if (rc == SKIPPR_STOPPED)
            break;
        if (rc)
            goto out;
        if ((rc = maybe_commit(&e, 1)))
            goto out;
        if (opts->once) {
            if ((rc = flush_slices(&e, 1)))
                goto out;
            break;
        }
        if ((rc = flush_slices(&e, 0)))
            goto out;
        /* Idle until the next poll. */
        if (!e.streaming && (rc = lanes_shed(&e)))
            goto out;
        sk_release_free_memory();
        /* Wait for the next poll, checking for stop and due slices. */
        for (int64_t t = 0; t < cfg->poll_interval_seconds * 10 &&
                            !sk_stop_requested; t++) {
            struct timespec ts = {0, 100000000L};
            nanosleep(&ts, NULL);
            progress(&e, 0);
            if (t % 10 == 9 && (rc = flush_slices(&e, 0)))
                goto out;
        }
        if (sk_stop_requested)
            break;
    }
    if (sk_stop_requested) {
        /* Graceful stop: make what was read durable; open slices stay in
         * the WAL for the next run. */
        rc = sk_state_commit(e.st);
        if (!rc)
            sk_info("stopped on request; progress is saved");
        if (!rc && opts->once)
            rc = SKIPPR_STOPPED;
        goto out;
    }
    rc = SKIPPR_OK;
out:
    if (opts->progress && e.start_ns) {
        progress(&e, 1);
        fputc('\n', stderr);
        sk_log_progress_active = 0;
    }
    if (e.st) {
        double secs = (double)(sk_now_ns() - e.start_ns) / 1e9;
        if (e.streaming)
            sk_info("%s: %" PRIu64 " messages dropped as already copied",
                    e.src->label, e.duplicates);
        sk_info("%s: %" PRIu64 " units copied, %" PRIu64 " already done, "
                "%" PRIu64 " changed and skipped; %" PRIu64 " records, "
                "%" PRIu64 " dead-lettered; %" PRIu64 " objects written; "
                "%.1f MB in %.2f s",
                rc ? "stopped" : "done", e.units_done, e.skipped_done,
                e.skipped_changed, e.records, e.dead, e.objects,
                (double)e.bytes_in / 1e6, secs);
        if (e.multiline_json || e.multiline_compacted)
            sk_info("records spanning lines: %" PRIu64 " in .json objects "
                    "beside the .jsonl ones, %" PRIu64 " compacted "
                    "(multiline_records)", e.multiline_json,
                    e.multiline_compacted);
    }
    if (e.src)
        sk_instance_log_counters(e.src);
    if (e.sink)
        sk_instance_log_counters(e.sink);
    engine_free(&e);
    return rc;
}

int sk_pipeline_status(const sk_pipeline_cfg *cfg)
{
    sk_state *st = NULL;
    int rc = sk_state_open(cfg->state_dir, cfg->workspace, cfg->name, 1, &st);
    if (rc == SKIPPR_NOENT) {
        printf("pipeline %s: never run (no state in %s/%s/%s)\n", cfg->name,
               cfg->state_dir, cfg->workspace, cfg->name);
        return SKIPPR_OK;
    }
    if (rc)
        return rc;
    char lock[4096];
    snprintf(lock, sizeof lock, "%s/lock", st->dir);
    FILE *lf = fopen(lock, "r");
    int running = 0;
    char pid[32] = "";
    if (lf) {
        if (flock(fileno(lf), LOCK_SH | LOCK_NB) != 0) {
            running = 1;
            if (fgets(pid, sizeof pid, lf))
                pid[strcspn(pid, "\n")] = '\0';
        }
        fclose(lf);
    }
    uint64_t done = 0, partial = 0;
    size_t it = 0;
    sk_unit_rec *u;
    while ((u = sk_ledger_recent_next(st->ledger, &it)))
        (u->flags & SK_UNIT_DONE) ? done++ : partial++;
    uint64_t open_n = 0, open_rec = 0, open_bytes = 0, sealed = 0;
    for (size_t i = 0; i < st->nlive; i++) {
        sk_slice *s = st->live[i];
        if (s->state == SK_SLICE_OPEN) {
            open_n++;
            open_rec += s->records;
            open_bytes += s->bytes;
        } else {
            sealed++;
        }
    }
    printf("pipeline:        %s\n", cfg->name);
    printf("state:           %s (id %s)\n", st->dir, st->state_id);
    printf("running:         %s%s%s\n", running ? "yes, pid " : "no",
           running ? pid : "", "");
    printf("units done:      %" PRIu64 " (compacted ledger) + %" PRIu64
           " recent\n", sk_ledger_count(st->ledger) - done - partial, done);
    printf("units partial:   %" PRIu64 "\n", partial);
    printf("slices open:     %" PRIu64 " (%" PRIu64 " records, %" PRIu64
           " bytes buffered)\n", open_n, open_rec, open_bytes);
    printf("slices pending:  %" PRIu64 " sealed, awaiting the sink\n", sealed);
    printf("wal:             %" PRIu64 " bytes\n",
           st->wal ? sk_wal_disk_bytes(st->wal) : 0);
    sk_state_close(st);
    return SKIPPR_OK;
}
