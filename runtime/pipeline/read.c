/* Reading units: open a unit at its resume offset, detect compression
 * from its first bytes and its format from the source's option, its
 * ledger record, its name or its first byte; then, each round, read the
 * next bytes into the lane's window and hand it to the pool (decompressed
 * there when compressed) to be framed (frame.c).
 *
 * Owns: each lane's reader (stream, decompressor, raw buffer) while its
 * unit is open.
 * Thread: the pipeline thread makes every source call; decompression and
 * framing run as pool tasks.
 */
#include "pipeline/engine.h"

#include <inttypes.h>
#include <string.h>
#include <unistd.h>

#include "base/fault.h"
#include "pipeline/retrynews.h"
#include "pipeline/shape.h"

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
            r->bomb = 1; /* pl_lane_apply fails the unit */
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

static void run_task(engine *e, sk_task *t, sk_group *g)
{
    if (e->pool)
        sk_pool_submit(e->pool, t, g);
    else
        t->fn(t);
}

/* Skip a UTF-8 BOM at the start of the unit. */
void pl_lane_skip_bom(lane *l)
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
const char *pl_format_problem(const engine *e, int fmt)
{
    if (pl_sink_takes_records(e->sink) &&
        (fmt == SK_FORMAT_CSV || fmt == SK_FORMAT_XML ||
         e->sink->format != SK_FORMAT_JSON))
        return "a record sink (Kafka, MQTT, HTTP) takes JSON records, one "
               "per message; CSV and XML need a file or S3 sink";
    return sk_format_pair_problem((sk_format)fmt, e->sink->format,
                                  !e->cfg->route.skim);
}

/* The unit's format is known: whether this sink can take it, and a CSV
 * unit's configured columns. SKIPPR_OK or SKIPPR_NOMEM. */
int pl_lane_format_known(lane *l)
{
    engine *e = l->e;
    l->fmt_error = pl_format_problem(e, l->fmt);
    size_t ncols, npaths;
    const char *const *cols = pl_shape_csv_columns(e->shape, &ncols);
    const char *const *paths = pl_shape_paths(e->shape, &npaths);
    if (l->fmt == SK_FORMAT_CSV && cols)
        return sk_csv_framer_set_columns(&l->csv, cols, ncols, paths,
                                         npaths);
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
    if (pl_lane_format_known(l))
        l->fmt_error = "out of memory";
}

/* Split the window into pieces at line starts (speculative cuts, checked
 * when applied) and run them. */
void pl_lane_frame(lane *l, int may_split)
{
    engine *e = l->e;
    const uint8_t *buf = l->win.data;
    size_t len = l->win.len;
    if (l->fmt == SK_FORMAT_AUTO)
        lane_sniff(l);
    if (l->fmt_error)
        len = 0; /* pl_lane_apply fails the unit */
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
        p->task.fn = pl_piece_task;
        if (may_split)
            run_task(e, &p->task, &l->g);
        else
            pl_piece_run(p);
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
    pl_lane_skip_bom(l);
    pl_lane_frame(l, 0);
}

/* Pipeline thread: read the next bytes of the lane's unit, then hand the
 * window to the pool. */
int pl_lane_read_submit(lane *l)
{
    engine *e = l->e;
    reader *r = &l->r;
    int rc = skippr_buf_reserve(&l->win, l->target - SK_MIN(l->target,
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
    pl_lane_skip_bom(l);
    pl_lane_frame(l, 1);
    return SKIPPR_OK;
}

/* The one error line for a unit that failed (the plugin's own line, if it
 * logged one, comes first and this one is then context). */
void pl_unit_failed(engine *e, const char *id, uint64_t offset, int rc)
{
    if (pl_sink_failing(e->retry)) { /* the sink's error line says why */
        sk_log(SKIPPR_LOG_INFO, "%s: unit %s stopped near offset %" PRIu64
               " as the sink failed", e->src->label, id, offset);
        return;
    }
    plugin_failed(e->src, "%s: unit %s failed near offset %" PRIu64 ": %s",
                  e->src->label, id, offset, skippr_status_str(rc));
}

/* A unit's format: the source's format option; else, for a unit resumed
 * mid-way, what its ledger record says; else the extension of its name
 * (under .gz or .zst); else SK_FORMAT_AUTO, and lane_sniff decides. */
void pl_lane_reset_format(lane *l)
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
    pl_lane_reset_format(l);
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
    return l->fmt == SK_FORMAT_AUTO ? SKIPPR_OK : pl_lane_format_known(l);
}

/* Compression is detected from a unit's first bytes (read into r->raw);
 * a compressed unit is marked inflated in its record u. */
static int detect_compression(reader *r, sk_unit_rec *u)
{
    int rc;
    while (!r->raw_eof && r->raw_len < 4) {
        size_t n = 0;
        if ((rc = reader_read(r, r->raw + r->raw_len, 4 - r->raw_len, &n)))
            return rc;
        r->raw_len += n;
    }
    r->comp = sk_comp_detect(r->raw, r->raw_len);
    if (r->comp != SK_COMP_NONE) {
        if (!(r->dec = sk_decomp_new(r->comp)))
            return SKIPPR_NOMEM;
        sk_unit_set(u, sk_unit_offset(u), sk_unit_flags(u) | SK_UNIT_INFLATED);
    }
    return SKIPPR_OK;
}

/* A resumed compressed unit, read again from its start: skip the first
 * skip bytes of its inflated stream, which are already durable. */
static int skip_inflated(lane *l, uint64_t skip)
{
    int rc = skippr_buf_reserve(&l->win, WINDOW_BYTES);
    while (!rc && skip > 0) {
        size_t n;
        size_t want = (size_t)SK_MIN(skip, (uint64_t)WINDOW_BYTES);
        if ((rc = reader_fill(&l->r, l->win.data, want, &n)) || n == 0)
            break;
        skip -= n;
    }
    return rc;
}

/* Pipeline thread: open the lane's unit and sniff its compression. */
int pl_lane_open(lane *l, todo *t)
{
    engine *e = l->e;
    const skippr_source_ops *ops = e->src->plugin->source;
    sk_unit_rec *u;
    if (e->verify) /* read whole, recorded nowhere */
        u = l->scratch ? l->scratch : (l->scratch = sk_unit_new());
    else
        u = sk_ledger_touch(sk_state_ledger(e->st), t->id, t->version,
                            t->size);
    if (!u)
        return SKIPPR_NOMEM;
    sk_unit_set(u, t->offset, t->flags & ~SK_UNIT_DONE);
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
    skippr_buf_reset(&l->win);
    sk_json_framer_init(&l->fr);
    if (t->offset > 0 && (t->flags & SK_UNIT_IN_ARRAY)) {
        l->fr.in_array = 1;
        l->fr.want_comma = 1;
    }
    skippr_unit unit = {t->id, t->version, t->size, 0};
    rc = ops->open(e->src->ctx, &unit, raw_off, &r->stream);
    if (rc) {
        r->stream = NULL;
        plugin_failed(e->src, "%s: cannot open unit %s at offset %" PRId64
                      ": %s", e->src->label, t->id, raw_off,
                      skippr_status_str(rc));
        return rc;
    }
    if ((raw_off == 0 && (rc = detect_compression(r, u))) ||
        (reread && t->offset > 0 && !again &&
         (rc = skip_inflated(l, (uint64_t)t->offset)))) {
        pl_unit_failed(e, t->id, (uint64_t)t->offset, rc);
        return rc;
    }
    return SKIPPR_OK;
}

/* Pipeline thread: the unit is finished, or failed; give its stream back. */
void pl_lane_close(lane *l)
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
