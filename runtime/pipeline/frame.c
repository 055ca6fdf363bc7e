/* Framing tasks: a window of one unit's decompressed bytes, cut into
 * pieces, is framed into records, each record's routing fields peeked and
 * its partition key built (JSON, CSV rows or XML elements). A piece keeps
 * each record's span and groups records by partition key, with the CRC of
 * each group's output, so the pipeline thread only copies bytes. For
 * skipprd verify a group keeps its records' digest instead of a CRC, and
 * the sink's JSON objects are framed without peeking (their partition is
 * their folder).
 *
 * Owns: nothing beyond the piece it is given (the lane owns pieces).
 * Thread: pool workers; inline on the pipeline thread when a speculative
 * cut is redone (apply.c) or for a compressed window or a document.
 */
#include "pipeline/engine.h"


#include "base/crc32c.h"
#include "pipeline/shape.h"
#include "pipeline/verify.h"

static int push_rec(piece *p, const rec_out *r)
{
    if (p->nrec >= NO_REC ||
        skippr_array_grow(&p->recs, p->nrec, &p->cap, sizeof *p->recs, 1024))
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
    rec_out o = {start, end, reason, NO_REC, 0};
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

/* Add the record just pushed to group id; multiline: it spans lines. */
static int group_add(piece *p, uint32_t id, const uint8_t *rec, size_t len,
                     int multiline)
{
    uint32_t idx = (uint32_t)(p->nrec - 1);
    if (id == p->ngroups) {
        if (skippr_array_grow(&p->groups, p->ngroups, &p->gcap,
                              sizeof *p->groups, 64))
            return SKIPPR_NOMEM;
        p->groups[p->ngroups++] = (group){.first = idx, .last = idx};
    } else {
        p->recs[p->groups[id].last].next = idx;
        p->groups[id].last = idx;
    }
    group *g = &p->groups[id];
    g->nrec++;
    p->recs[idx].multiline = multiline != 0;
    g->multiline |= multiline != 0;
    g->out_bytes += len + 1;
    if (p->e->verify) /* hashed here, in parallel; nothing is written */
        sk_digest_add(&g->digest, sk_record_hash_of(rec, len), len);
    else
        g->crc = sk_crc32c(sk_crc32c(g->crc, rec, len), "\n", 1);
    return SKIPPR_OK;
}

/* Routes the record just kept, [start, end), by fields f[0..npaths) that
 * its values were decoded into: a string field without a pointer lies in
 * scratch at at[i] (scratch may have moved while later values were
 * decoded). dec is
 * the decoding's result: SKIPPR_CORRUPT dead-letters the record with
 * `undecodable`. Returns -1 when the piece failed, else 0. */
static int piece_route(piece *p, sk_field *f, size_t npaths,
                       const size_t *at, int dec, size_t start, size_t end,
                       const char *undecodable)
{
    engine *e = p->e;
    if (dec == SKIPPR_CORRUPT) {
        p->recs[p->nrec - 1].reason = undecodable;
        p->ndead++;
        return 0;
    }
    for (size_t i = 0; i < npaths && !dec; i++)
        if (f[i].kind == SK_FIELD_STRING && !f[i].p)
            f[i].p = p->scratch.data + at[i];
    uint32_t id;
    if (dec || sk_route_memo_fields(e->router, &p->memo, f, &id) ||
        group_add(p, id, p->buf + start, end - start, 0)) {
        p->failed = 1;
        return -1;
    }
    return 0;
}

/* pl_piece_run for a CSV unit: rows instead of JSON values; the picked
 * cells are decoded (libcsv, for quoted ones) into fields. The header row
 * is taken by the framer and is no record. */
static void piece_run_csv(piece *p)
{
    engine *e = p->e;
    sk_csv_framer fr = p->csv_in;
    size_t pos = p->from;
    sk_csv_record r;
    int header_utf8 = -1; /* not checked yet */
    size_t npaths;
    const char *const *paths = pl_shape_paths(e->shape, &npaths);
    for (;;) {
        sk_csv_rc rc = sk_csv_next(&fr, paths, npaths, p->buf, p->len,
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
        skippr_buf_reset(&p->scratch);
        int bad = 0;
        for (size_t i = 0; i < npaths && !bad; i++) {
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
        if (piece_route(p, f, npaths, at, bad, r.start, r.end,
                        "a routing cell cannot be decoded"))
            break;
    }
    p->stop = pos;
    p->csv_out = fr;
}

/* pl_piece_run for an XML unit: records are elements (xmlpeek.c); with
 * validate: true libxml2 parses each one, and a malformed one is
 * dead-lettered. */
static void piece_run_xml(piece *p)
{
    engine *e = p->e;
    sk_xml_framer fr = p->xml_in;
    size_t pos = p->from;
    sk_xml_record r;
    const sk_xml_spec *spec = pl_shape_xml(e->shape);
    size_t npaths;
    pl_shape_paths(e->shape, &npaths);
    for (;;) {
        sk_xml_rc rc = sk_xml_next(&fr, spec, p->buf, p->len, &pos,
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
        skippr_buf_reset(&p->scratch);
        int bad = 0;
        for (size_t i = 0; i < npaths && !bad; i++) {
            f[i] = (sk_field){SK_FIELD_ABSENT, NULL, 0};
            if (!r.values[i].kind)
                continue;
            at[i] = p->scratch.len;
            bad = sk_xml_value_text(p->buf, &r.values[i], &p->scratch);
            if (!bad && p->scratch.len > at[i])
                f[i] = (sk_field){SK_FIELD_STRING, NULL, p->scratch.len - at[i]};
        }
        if (piece_route(p, f, npaths, at, bad, r.start, r.end,
                        "a routing value cannot be decoded"))
            break;
    }
    p->stop = pos;
    p->xml_out = fr;
}

/* What joins each group's CRC onto its slice's (a verify has none). */
static void join_crcs(piece *p)
{
    for (size_t i = 0; !p->e->verify && i < p->ngroups; i++)
        p->groups[i].xpow = sk_crc32c_xpow(p->groups[i].out_bytes);
}

/* Frame, peek and route records starting in [from, to). Runs on a worker
 * (or inline on the pipeline thread for a re-run). */
/* Whether p is framed bare, without peeking or routing: a verify's read
 * of the sink, whose records' partition is their object's folder. */
static int bare(const piece *p)
{
    return p->e->verify && pl_verify_side_of(p->e->verify) == PL_VERIFY_SINK;
}

void pl_piece_run(piece *p)
{
    engine *e = p->e;
    int no_key = bare(p);
    const sk_peek_spec *spec = no_key ? NULL
                                      : sk_router_json_spec(e->router);
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
        join_crcs(p);
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
        uint32_t id = 0; /* bare: the piece's one group, with no key */
        if ((!no_key && sk_route_memo(e->router, &p->memo, p->buf, r.values,
                                      &p->scratch, &id)) ||
            group_add(p, id, p->buf + r.start, r.end - r.start,
                      r.multiline)) {
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
    join_crcs(p);
    p->stop = pos;
    p->fr_out = fr;
}

void pl_piece_task(sk_task *t)
{
    piece *p = (piece *)((char *)t - offsetof(piece, task));
    pl_piece_run(p);
}
