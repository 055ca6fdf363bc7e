/* Streaming sources (Kafka, MQTT, HTTP push) call host->emit() from their
 * poll(), one message per record or one document of many. Each unit's next
 * position lives in the ledger like a file's offset and is made durable by
 * the same group commits; only after a durable commit are positions acked
 * to the source. A message below its unit's durable position was copied
 * already and is dropped, so a source that redelivers (a rebalance, a
 * restart before the ack reached the broker) never duplicates a record.
 *
 * Owns: the run's pl_streamer: its units, the document lane, the hooks.
 * Thread: the pipeline thread (emit() is called from the source's poll()).
 */
#include "pipeline/stream.h"

#include "pipeline/engine.h"
#include "pipeline/report.h"
#include "pipeline/shape.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

/* A streaming source's unit (a topic-partition) as the engine tracks it. */
typedef struct stream_unit {
    sk_unit_rec *rec;  /* the ledger's (never finished, so never freed
                        * before the engine); its offset is the next
                        * position, its id the unit's */
    int64_t acked;     /* offset already acked to the source */
} stream_unit;

struct pl_streamer {
    sk_stream_hooks hooks;    /* what the source's host calls reach */
    stream_unit *units;
    size_t n, cap;
    skippr_buf scratch;           /* decoded field values of one message */
    skippr_buf key;               /* a message's partition */
    uint64_t duplicates;      /* messages dropped as already durable */
    lane *doc_lane;           /* frames documents (SKIPPR_MSG_DOCUMENT) */
    sk_unit_rec *doc_rec;     /* the doc lane's scratch unit record */
};

static int stream_emit(void *ud, const skippr_message *m);
static int stream_position(void *ud, const char *unit, int64_t *next);
static int stream_sync(void *ud);

pl_streamer *pl_streamer_new(struct engine *e)
{
    pl_streamer *s = sk_calloc(1, sizeof *s);
    if (!s)
        return NULL;
    s->hooks = (sk_stream_hooks){.emit = stream_emit,
                                 .position = stream_position,
                                 .sync = stream_sync,
                                 .ud = e};
    if (!(s->doc_rec = sk_unit_new())) {
        sk_free(s);
        return NULL;
    }
    skippr_buf_init(&s->scratch, (size_t)e->cfg->max_record_bytes + 64);
    skippr_buf_init(&s->key, (size_t)1 << 20);
    return s;
}

void pl_streamer_free(pl_streamer *s)
{
    if (!s)
        return;
    skippr_buf_free(&s->scratch);
    skippr_buf_free(&s->key);
    sk_free(s->units);
    if (s->doc_lane)
        pl_lane_free(s->doc_lane);
    sk_free(s->doc_lane);
    sk_unit_free(s->doc_rec);
    sk_free(s);
}

const sk_stream_hooks *pl_streamer_hooks(const pl_streamer *s)
{
    return &s->hooks;
}

uint64_t pl_streamer_duplicates(const pl_streamer *s)
{
    return s->duplicates;
}

/* The engine's record of a unit, looked up (and resumed from the ledger
 * file) on first sight. NULL on allocation or ledger failure (*rc). */
static stream_unit *stream_unit_get(engine *e, const char *id, int *rc)
{
    for (size_t i = 0; i < e->stream->n; i++)
        if (strcmp(sk_unit_id(e->stream->units[i].rec), id) == 0)
            return &e->stream->units[i];
    const sk_unit_rec *known = NULL;
    if ((*rc = sk_ledger_lookup(sk_state_ledger(e->st), id, &known)))
        return NULL;
    int64_t offset = known ? sk_unit_offset(known) : 0;
    *rc = SKIPPR_NOMEM;
    if (skippr_array_grow(&e->stream->units, e->stream->n, &e->stream->cap,
                          sizeof *e->stream->units, 16))
        return NULL;
    sk_unit_rec *r = sk_ledger_touch(sk_state_ledger(e->st), id, "", -1);
    if (!r)
        return NULL;
    if (sk_unit_offset(r) < offset)
        sk_unit_set(r, offset, sk_unit_flags(r));
    stream_unit *u = &e->stream->units[e->stream->n++];
    *u = (stream_unit){r, sk_unit_offset(r)};
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
        return pl_dead_letter(e, m->unit, (uint64_t)m->position, buf, len, why);
    sk_field f[SK_PEEK_MAX_PATHS];
    int rc = sk_route_json_fields(e->router, buf, r.values, &e->stream->scratch, f);
    if (rc)
        return rc;
    size_t npaths;
    const char *const *paths = pl_shape_paths(e->shape, &npaths);
    for (size_t i = 0; i < npaths; i++) {
        sk_field mf;
        if (message_field(m, paths[i], &mf))
            f[i] = mf;
    }
    skippr_buf *kb = &e->stream->key;
    skippr_buf_reset(kb);
    if ((rc = sk_route_key(e->router, f, kb)))
        return rc;
    const char *key = (const char *)kb->data;
    size_t klen = kb->len;
    sk_slice *s = sk_state_slice(e->st, key, klen, sk_hash_fast(key, klen),
                                 NULL, SK_SLICE_DATA);
    if (!s)
        return SKIPPR_NOMEM;
    return pl_append_json(e, s, key, klen, buf, len, m->unit,
                          (uint64_t)m->position, -1);
}

/* The format a document message names, SK_FORMAT_AUTO for none, or -1
 * for a name the engine does not know. */
static int document_format(const engine *e, const skippr_message *m)
{
    const char *f = m->format;
    if (!f || !*f)
        return e->src->format == SK_FORMAT_JSONL ? SK_FORMAT_JSON
                                                 : (int)e->src->format;
    int fmt = sk_format_parse(f);
    return fmt == SK_FORMAT_JSONL  ? SK_FORMAT_JSON
           : fmt == SK_FORMAT_AUTO ? -1 /* a document names its format */
                                   : fmt;
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
    if (!e->stream->doc_lane) {
        if (!(e->stream->doc_lane = sk_calloc(1, sizeof *e->stream->doc_lane)))
            return SKIPPR_NOMEM;
        int rc = pl_lane_init(e, e->stream->doc_lane, DOC_MAX_BYTES);
        if (rc)
            return rc;
        e->stream->doc_lane->doc = 1;
    }
    lane *l = e->stream->doc_lane;
    char id[600];
    int n = snprintf(id, sizeof id, "%s#%" PRId64, m->unit, m->position);
    if (n < 0 || (size_t)n >= sizeof id)
        return SKIPPR_RANGE;
    todo t = {.id = id, .version = "", .size = (int64_t)m->len};
    pl_lane_reset_format(l);
    l->fmt = fmt;
    int rc = fmt == SK_FORMAT_AUTO ? SKIPPR_OK : pl_lane_format_known(l);
    if (rc)
        return rc;
    sk_unit_set(e->stream->doc_rec, 0, 0);
    l->t = &t;
    l->u = e->stream->doc_rec;
    skippr_buf_reset(&l->win);
    if ((rc = skippr_buf_append(&l->win, m->data, m->len)))
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
    pl_lane_skip_bom(l);
    pl_lane_frame(l, 0);
    int finished = 0;
    if (l->fmt_error) {
        /* The sender's mistake (CSV for a Kafka sink, say), not the
         * pipeline's: the document is set aside whole. */
        e->tally.bytes_in += m->len;
        e->bytes_since_commit += m->len;
        rc = pl_dead_letter(e, id, 0, m->data, m->len, l->fmt_error);
        finished = 1;
    } else {
        rc = pl_lane_apply(l, &finished);
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
    if (m->position < sk_unit_offset(u->rec)) {
        e->stream->duplicates++;
        return SKIPPR_OK;
    }
    if ((rc = doc ? stream_document(e, m) : stream_record(e, m)))
        return rc;
    sk_unit_progress(u->rec, m->position + 1, 0, 0);
    if (!doc) { /* a document's bytes were counted by pl_lane_apply */
        e->tally.bytes_in += m->len;
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
    if (sk_unit_offset(u->rec) == 0)
        return SKIPPR_NOENT;
    *next = sk_unit_offset(u->rec);
    return SKIPPR_OK;
}

/* A durable commit, then every unit's new position is acked. */
static int stream_sync(void *ud)
{
    engine *e = ud;
    int rc = pl_commit(e, 1);
    if (rc)
        return rc;
    e->bytes_since_commit = 0;
    e->last_commit_ns = sk_now_ns();
    const skippr_source_ops *ops = e->src->plugin->source;
    for (size_t i = 0; i < e->stream->n; i++) {
        stream_unit *u = &e->stream->units[i];
        int64_t next = sk_unit_offset(u->rec);
        if (next <= u->acked)
            continue;
        if ((rc = ops->ack(e->src->ctx, sk_unit_id(u->rec), next - 1))) {
            plugin_failed(e->src, "%s: ack of %s failed: %s", e->src->label,
                          sk_unit_id(u->rec), skippr_status_str(rc));
            return rc;
        }
        u->acked = next;
    }
    return SKIPPR_OK;
}

/* Poll the source until it ends (--once) or a stop is asked for, with
 * durable commits and acks every commit_interval_ms and slices sealed when
 * due. */
int pl_stream_run(engine *e)
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
        pl_progress(e, 0);
        uint64_t now = sk_now_ns();
        if (now - e->last_commit_ns >=
            (uint64_t)e->cfg->commit_interval_ms * 1000000ULL) {
            if ((rc = stream_sync(e)))
                return rc;
        } else if (pl_st_memory_over(e) &&
                   (rc = pl_flush(e, 1))) {
            return rc;
        }
        if (now - e->last_seal_check_ns >= 1000000000ULL) {
            e->last_seal_check_ns = now;
            if ((rc = pl_flush_slices(e, 0)))
                return rc;
            if (++e->seal_checks % 10 == 0) {
                /* a stream runs for days: what a burst left goes back */
                sk_state_release_idle(e->st);
                sk_release_free_memory();
            }
        }
    }
    return stream_sync(e);
}
