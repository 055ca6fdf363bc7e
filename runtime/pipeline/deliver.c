/* Delivery: one sealed slice written as one object (and a dead-letter
 * slice's .meta.jsonl sidecar), read back from the WAL record by record,
 * converted where the sink's format differs, checked against the size and
 * CRC it was sealed with, committed through the sink plugin, with retries
 * and backoff. object_check() before each attempt makes a rewrite after a
 * lost answer a no-op.
 *
 * Owns: the writer on its stack; the uploader's buffers are its thread's.
 * Thread: an upload thread (seal.c starts them); touches nothing shared
 * but the WAL's files, read-only.
 */
#include "pipeline/engine.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/crc32c.h"
#include "base/fault.h"
#include "pipeline/retrynews.h"

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
    skippr_buf_reset(&u->out);
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
    return skippr_buf_append(&u->out, p, n);
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
    if (w->records_mode && w->mode != WRITE_DEAD_META) {
        if (w->mode == WRITE_DEAD_DATA && (w->n++ % 2) == 0)
            return SKIPPR_OK; /* a dead letter's meta: the sidecar's */
        return write_one(w, rec, len);
    }
    if (w->conv) {
        skippr_buf_reset(w->conv_out);
        if ((rc = sk_conv_record(w->conv, rec, len, w->conv_out,
                                 &w->conv_why)))
            return rc;
        return w->conv_out->len
                   ? writer_put(w, w->conv_out->data, w->conv_out->len)
                   : SKIPPR_OK;
    }
    if (w->mode == WRITE_ALL && !w->count_only) {
        /* The common case, a data record that fits the buffer: one copy. */
        skippr_buf *out = &w->u->out;
        if (out->cap - out->len > len && out->len + len + 1 <= OUT_BUF) {
            memcpy(out->data + out->len, rec, len);
            out->data[out->len + len] = '\n';
            out->len += len + 1;
            w->bytes += len + 1;
            return SKIPPR_OK;
        }
    }
    if (w->mode != WRITE_ALL) {
        int is_meta = (w->n++ % 2) == 0;
        if (w->mode == WRITE_DEAD_DATA && is_meta)
            return SKIPPR_OK;
        if (w->mode == WRITE_DEAD_META) {
            if (!is_meta) {
                w->data_off += len + 1;
                return SKIPPR_OK;
            }
            char head[64];
            int hn = snprintf(head, sizeof head, "{\"object_offset\":%" PRIu64
                              ",", w->data_off);
            if (w->records_mode) {
                /* The meta line is one record: build it first. */
                skippr_buf line;
                skippr_buf_init(&line, (size_t)hn + len + 2);
                rc = skippr_buf_append(&line, head, (size_t)hn);
                if (!rc)
                    rc = skippr_buf_append(&line, rec, len);
                if (!rc)
                    rc = skippr_buf_append(&line, "}", 1);
                if (!rc)
                    rc = write_one(w, line.data, line.len);
                skippr_buf_free(&line);
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

static int learn_record(void *ud, const uint8_t *rec, size_t len)
{
    writer *w = ud;
    return sk_conv_learn(w->conv, rec, len, &w->conv_why);
}

/* Writes slice s, converted, through w (a real or a count-only writer):
 * for json -> csv a first pass learns the header. */
int pl_write_converted(engine *e, sk_slice *s, sk_conv_kind kind,
                           writer *w, skippr_buf *scratch)
{
    skippr_buf out;
    skippr_buf_init(&out, (size_t)SK_WAL_MAX_PAYLOAD * 8);
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
                 sk_slice_id(s), sk_slice_key(s), w->conv_why);
    w->conv = NULL;
    w->conv_out = NULL;
    sk_conv_free(c);
    skippr_buf_free(&out);
    return rc;
}

/* A sink that takes records, not files (Kafka, MQTT, HTTP). */
int pl_sink_takes_records(const sk_instance *sink)
{
    const skippr_sink_ops *ops = sink->plugin->sink;
    return SKIPPR_OPS_HAS(skippr_sink_ops, ops, flags) &&
           (ops->flags & SKIPPR_SINK_RECORDS);
}

/* Write one object with retries: the records of s that mode picks. */
/* Before an attempt at writing info's object (a failed one may still have
 * landed: a commit whose answer was lost): SKIPPR_OK when it is complete
 * already, SKIPPR_NOENT to write it, SKIPPR_RETRY to ask again, or the
 * sink's error. */
static int check_landed(uploader *u, const skippr_object_info *info,
                        int attempt)
{
    sk_instance *sink = u->sink;
    const skippr_sink_ops *ops = sink->plugin->sink;
    int rc = ops->object_check ? ops->object_check(sink->ctx, info)
                               : SKIPPR_NOENT;
    if (rc == SKIPPR_OK) {
        sk_info("object %s already complete (slice %s); not rewritten",
                info->key, info->slice_id);
    } else if (rc == SKIPPR_CHANGED) {
        sk_warn("object %s exists with other content; rewriting it with "
                "slice %s", info->key, info->slice_id);
        rc = SKIPPR_NOENT;
    } else if (rc == SKIPPR_RETRY) {
        pl_retry_say(u->e->retry, attempt + 1, "%s: cannot tell whether %s "
                     "was written (attempt %d of %d); asking again",
                     sink->label, info->key, attempt + 1, MAX_ATTEMPTS);
    } else if (rc != SKIPPR_NOENT) {
        plugin_failed(sink, "%s: checking %s failed: %s", sink->label,
                      info->key, skippr_status_str(rc));
    }
    return rc;
}

/* One attempt at writing slice s as info's object: open, every record
 * (converted, and an XML slice's trailer, when mode is WRITE_ALL), a
 * check of the bytes and CRC sealed, commit. *mismatch: the records
 * re-read differ from what was sealed (SKIPPR_CORRUPT, no retry). */
static int write_object(uploader *u, sk_slice *s,
                        const skippr_object_info *info, write_mode mode,
                        int *mismatch)
{
    engine *e = u->e;
    sk_instance *sink = u->sink;
    const skippr_sink_ops *ops = sink->plugin->sink;
    writer w = {.u = u, .mode = mode,
                .records_mode = pl_sink_takes_records(sink)};
    skippr_buf_reset(&u->out);
    int rc = skippr_buf_reserve(&u->out, OUT_BUF);
    if (rc || (rc = ops->object_open(sink->ctx, info, &w.h)))
        return rc;
    sk_conv_kind ck = mode == WRITE_ALL ? pl_slice_conv(e, s) : SK_CONV_NONE;
    rc = ck != SK_CONV_NONE
             ? pl_write_converted(e, s, ck, &w, &u->scratch)
             : sk_state_foreach_record(e->st, s, &u->scratch, write_record,
                                       &w);
    char tail[300];
    size_t tl = mode == WRITE_ALL ? pl_xml_trailer(s, tail, sizeof tail) : 0;
    if (!rc && tl)
        rc = writer_put(&w, tail, tl);
    if (!rc)
        rc = writer_flush(&w);
    if (!rc && (w.bytes != info->size || w.crc != info->crc32c)) {
        sk_error("slice %s: re-read %" PRIu64 " bytes with CRC %08x, "
                 "sealed as %" PRIu64 " bytes with CRC %08x",
                 info->slice_id, w.bytes, w.crc, info->size, info->crc32c);
        *mismatch = 1;
        rc = SKIPPR_CORRUPT;
    }
    if (rc) {
        ops->object_abort(sink->ctx, w.h);
        return rc;
    }
    sk_crashpoint("sink_commit");
    return ops->object_commit(sink->ctx, w.h);
}

static int put_object(uploader *u, sk_slice *s, const char *key,
                      const char *slice_id, uint64_t size, uint32_t crc,
                      write_mode mode, const char *ctype)
{
    engine *e = u->e;
    sk_instance *sink = u->sink;
    /* The partition's namespace is its first folder. */
    char ns[SK_SEGMENT_MAX + 1];
    size_t nsl = strcspn(sk_slice_key(s), "/");
    snprintf(ns, sizeof ns, "%.*s", (int)SK_MIN(nsl, SK_SEGMENT_MAX),
             sk_slice_key(s));
    skippr_object_info info = {.key = key,
                               .slice_id = slice_id,
                               .size = size,
                               .crc32c = crc,
                               .content_type = ctype,
                               .partition = sk_slice_key(s),
                               .namespace_name = ns,
                               .records = sk_slice_records(s)};
    for (int attempt = 0; attempt < MAX_ATTEMPTS; attempt++) {
        if (attempt) {
            if (sk_stop_requested)
                return SKIPPR_STOPPED;
            if (pl_sink_failing(e->retry))
                return SKIPPR_FATAL; /* another slice gave up: the run ends */
            skippr_backoff_sleep(&u->backoff, attempt);
        }
        int rc = check_landed(u, &info, attempt), mismatch = 0;
        if (rc == SKIPPR_RETRY)
            continue;
        if (rc != SKIPPR_NOENT)
            return rc; /* complete already, or the check failed */
        rc = write_object(u, s, &info, mode, &mismatch);
        if (rc == SKIPPR_OK || mismatch)
            return rc;
        if (rc != SKIPPR_RETRY) {
            pl_sink_gave_up(e->retry, sink, "%s: writing %s failed: %s",
                            sink->label, key, skippr_status_str(rc));
            return rc;
        }
        pl_retry_say(e->retry, attempt + 1,
                     "%s: writing %s failed (attempt %d of %d); retrying",
                     sink->label, key, attempt + 1, MAX_ATTEMPTS);
    }
    pl_sink_gave_up(e->retry, sink, "%s: giving up on %s after %d attempts",
                    sink->label, key, MAX_ATTEMPTS);
    return SKIPPR_FATAL;
}

/* Write slice s's object (and, for dead letters, its sidecar) with u.
 * Runs on an upload thread: touches nothing shared but the WAL's files,
 * read-only. The caller records DONE. */
int pl_upload_one(uploader *u, sk_slice *s)
{
    engine *e = u->e;
    char slice_id[40];
    snprintf(slice_id, sizeof slice_id, "%s-%010" PRIu64, sk_state_id(e->st),
             sk_slice_id(s));
    int rc;
    if (sk_slice_kind_of(s) == SK_SLICE_DEAD) {
        rc = put_object(u, s, sk_slice_object_key(s), slice_id,
                        sk_slice_object_bytes(s), sk_slice_object_crc(s),
                        WRITE_DEAD_DATA, "application/octet-stream");
        if (rc)
            return rc;
        /* The sidecar: one JSON line per dead letter. */
        writer w = {.u = u, .mode = WRITE_DEAD_META, .count_only = 1};
        rc = sk_state_foreach_record(e->st, s, &u->scratch, write_record, &w);
        if (rc)
            return rc;
        char *mkey = sk_asprintf("%s.meta.jsonl", sk_slice_object_key(s));
        char mid[48];
        snprintf(mid, sizeof mid, "%s-meta", slice_id);
        if (!mkey)
            return SKIPPR_NOMEM;
        rc = put_object(u, s, mkey, mid, w.bytes, w.crc, WRITE_DEAD_META,
                        "application/x-ndjson");
        sk_free(mkey);
    } else {
        rc = put_object(u, s, sk_slice_object_key(s), slice_id,
                        sk_slice_object_bytes(s), sk_slice_object_crc(s),
                        WRITE_ALL,
                        e->sink->format == SK_FORMAT_CSV   ? "text/csv"
                        : e->sink->format == SK_FORMAT_XML ? "application/xml"
                        : pl_slice_is_multiline(s)         ? "application/json"
                                                   : "application/x-ndjson");
    }
    return rc;
}
