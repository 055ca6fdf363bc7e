/* Applying a window: wait for its pieces, redo a piece whose speculative
 * cut was no record boundary, then append records to their slices in input
 * order, dead letters included; then move the unit's durable offset to the
 * end of the last whole record, widen the window for a big record, and
 * finish the unit at its end.
 *
 * Owns: nothing; it moves bytes from a lane's window into slices.
 * Thread: the pipeline thread.
 */
#include "pipeline/engine.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "pipeline/shape.h"
#include "pipeline/verify.h"

/* The unit cannot be copied at all: a decompression bomb, or a format
 * this pipeline cannot take. SKIPPR_OK if it can. */
static int lane_refused(const lane *l)
{
    const engine *e = l->e;
    if (l->r.bomb) {
        sk_error("%s: unit %s decompresses to more than %" PRId64 " times "
                 "its compressed size (%" PRIu64 " bytes from %" PRIu64 "): "
                 "a decompression bomb? It was not copied; raise the "
                 "pipeline's max_inflate_ratio (0: no limit) to copy it",
                 e->src->label, l->t->id, e->cfg->max_inflate_ratio,
                 l->r.out_total, l->r.in_total);
        return SKIPPR_RANGE;
    }
    if (l->fmt_error) {
        sk_error("%s: unit %s: %s", e->src->label, l->t->id, l->fmt_error);
        return SKIPPR_INVAL;
    }
    return SKIPPR_OK;
}

/* The dead letters of piece p, in order. *cut_noted is set when one of
 * them carries the broken compressed stream's error. */
static int apply_dead(lane *l, const piece *p, int *cut_noted)
{
    for (size_t r = 0; p->ndead && r < p->nrec; r++) {
        const rec_out *o = &p->recs[r];
        if (!o->reason)
            continue;
        /* A record cut off by a broken compressed stream says so. */
        const char *why = l->r.error && l->final && o->end == l->win.len
                              ? l->r.error
                              : o->reason;
        *cut_noted |= why == l->r.error;
        int rc = pl_dead_letter(l->e, l->t->id, l->base + o->start,
                                l->win.data + o->start, o->end - o->start,
                                why);
        if (rc)
            return rc;
    }
    return SKIPPR_OK;
}

/* The OPEN slice of group gi of a CSV or XML piece: rows under another
 * header (elements under another root) go to another slice, whose tag
 * names the header's id (and the root, for the close tag). A new slice
 * starts with its header row, or with the declaration and the root's
 * start tag. NULL on failure (*rc). */
static sk_slice *tagged_group_slice(engine *e, const piece *p,
                                    const char *key, size_t klen, int *rc)
{
    sk_slice_tag tag = {.form = p->csv ? SK_FORM_CSV : SK_FORM_XML,
                        .header_id = p->csv ? p->csv_out.hdr.id
                                            : p->xml_out.id,
                        .root = p->csv ? NULL : p->xml_out.root,
                        .root_len = p->csv ? 0 : p->xml_out.root_len};
    *rc = SKIPPR_NOMEM;
    sk_slice *s = sk_state_slice(e->st, key, klen, 0, &tag, SK_SLICE_DATA);
    if (!s)
        return NULL;
    *rc = SKIPPR_OK;
    if (sk_slice_records(s) == 0)
        *rc = p->csv ? pl_append(e, s, p->csv_out.hdr.row,
                                 p->csv_out.hdr.row_len)
                     : pl_append(e, s, p->xml_out.head,
                                 p->xml_out.head_len);
    return *rc ? NULL : s;
}

/* skipprd verify: group gi's records into their partition's digest (the
 * sink's JSON pieces are framed without a key: their partition is their
 * object's folder). It
 * compares bytes, so a source whose records the sink gets converted
 * (JSON to CSV, CSV to JSON lines) cannot be verified. */
static int verify_group(lane *l, const piece *p, size_t gi)
{
    engine *e = l->e;
    const group *g = &p->groups[gi];
    const char *key = "";
    size_t klen = 0;
    if (pl_verify_side_of(e->verify) == PL_VERIFY_SOURCE) {
        const sk_memo_key *k = &p->memo.keys_at[gi];
        key = (const char *)p->memo.keys.data + k->key_off;
        klen = k->key_len;
    }
    sk_slice_form form = p->csv   ? SK_FORM_CSV
                         : p->xml ? SK_FORM_XML
                                  : SK_FORM_LINES;
    if (pl_verify_side_of(e->verify) == PL_VERIFY_SOURCE &&
        pl_form_conv(e, form) != SK_CONV_NONE) {
        sk_error("verify compares records byte for byte, and this "
                 "pipeline converts %s's records (%s) for %s",
                 l->t->id, form == SK_FORM_CSV ? "CSV to JSON lines"
                                               : "JSON to CSV",
                 e->sink->label);
        return SKIPPR_INVAL;
    }
    return pl_verify_group(e->verify, l->t->id, l->base, key, klen,
                           l->win.data, p->recs, g);
}

/* Append the records of group gi of piece p to their slice: copied bytes
 * and the group's CRC folded in; or, when a JSON record spans lines and
 * the sink writes .jsonl, one by one (pl_append_json). */
static int apply_group(lane *l, const piece *p, size_t gi)
{
    engine *e = l->e;
    if (e->verify)
        return verify_group(l, p, gi);
    const uint8_t *buf = l->win.data;
    const group *g = &p->groups[gi];
    const sk_memo_key *k = &p->memo.keys_at[gi];
    const char *key = (const char *)p->memo.keys.data + k->key_off;
    size_t klen = k->key_len;
    int rc = SKIPPR_NOMEM;
    sk_slice *s = p->csv || p->xml
                      ? tagged_group_slice(e, p, key, klen, &rc)
                      : sk_state_slice(e->st, key, klen, k->key_hash, NULL,
                                       SK_SLICE_DATA);
    if (!s)
        return rc;
    if (pl_shape_lines_only(e->shape) && g->multiline) {
        /* Records one by one, their CRC computed as appended. */
        for (uint32_t r = g->first; r != NO_REC; r = p->recs[r].next) {
            const rec_out *o = &p->recs[r];
            if ((rc = pl_append_json(e, s, key, klen, buf + o->start,
                                     o->end - o->start, l->t->id,
                                     l->base + o->start, o->multiline)))
                return rc;
        }
        return SKIPPR_OK;
    }
    for (uint32_t r = g->first; r != NO_REC; r = p->recs[r].next) {
        const rec_out *o = &p->recs[r];
        if ((rc = pl_append_raw(e, s, buf + o->start, o->end - o->start)))
            return rc;
    }
    sk_state_fold_crc(s, g->crc, g->xpow);
    e->tally.records += g->nrec;
    return SKIPPR_OK;
}

/* The pieces of the window, in order: a piece whose speculative cut was no
 * record boundary is framed again here; then its dead letters and groups
 * are appended. *consumed is where the last whole record ends; *need_more
 * says a record runs past the window. */
static int apply_pieces(lane *l, size_t *consumed, int *need_more,
                        int *cut_noted)
{
    size_t expect = 0;
    sk_json_framer cur = l->fr;
    sk_csv_framer ccur = l->csv;
    int rc = SKIPPR_OK;
    *need_more = 0;
    for (size_t i = 0; i < l->npieces; i++) {
        piece *p = &l->pieces[i];
        if (p->from != expect || p->fr_in.in_array != cur.in_array ||
            p->fr_in.want_comma != cur.want_comma) {
            /* The speculative cut was not a record boundary: redo. */
            p->from = expect;
            p->fr_in = cur;
            if (p->from >= p->to && i + 1 < l->npieces)
                continue;
            pl_piece_run(p);
        }
        if (p->csv) /* a header read by the piece is the lane's now */
            l->csv = ccur = p->csv_out;
        if (p->xml)
            l->xml = p->xml_out;
        if (p->failed)
            return SKIPPR_NOMEM;
        if ((rc = apply_dead(l, p, cut_noted)))
            return rc;
        for (size_t gi = 0; gi < p->ngroups; gi++)
            if ((rc = apply_group(l, p, gi)))
                return rc;
        expect = p->stop;
        cur = p->fr_out;
        if (p->need_more) {
            *need_more = 1;
            break;
        }
    }
    l->fr = cur;
    l->csv = ccur; /* the header, once read, is the lane's */
    *consumed = expect;
    return SKIPPR_OK;
}

/* No whole record in a full window: widen it (*widened), or, at the
 * largest window, dead-letter up to the next newline (or the whole
 * window), which *consumed then covers. */
static int apply_no_record(lane *l, size_t *consumed, int *widened)
{
    engine *e = l->e;
    const uint8_t *buf = l->win.data;
    size_t len = l->win.len;
    *widened = 0;
    if (l->target < l->widest) {
        l->target = SK_MIN(l->target * 2, l->widest);
        *widened = 1; /* a big record: widen the window */
        return SKIPPR_OK;
    }
    const uint8_t *nl = memchr(buf, '\n', len);
    size_t cut = nl ? (size_t)(nl - buf) : len;
    int rc = pl_dead_letter(e, l->t->id, l->base, buf, cut,
                            "no record end within the largest window "
                            "(4 x max_record_bytes); bytes up to the "
                            "next newline dead-lettered");
    if (rc)
        return rc;
    *consumed = nl ? cut + 1 : cut;
    sk_json_framer_init(&l->fr);
    return SKIPPR_OK;
}

/* Drop the consumed bytes from the window and move the unit's progress to
 * the end of the last whole record, with what resuming needs to know. */
static void lane_advance(lane *l, size_t consumed)
{
    memmove(l->win.data, l->win.data + consumed, l->win.len - consumed);
    l->win.len -= consumed;
    l->base += consumed;
    if (l->target > WINDOW_BYTES && l->win.len < WINDOW_BYTES)
        l->target = WINDOW_BYTES;
    /* Unit progress as of the end of the last whole record. */
    uint32_t set = l->fr.in_array ? SK_UNIT_IN_ARRAY : 0;
    if (l->fmt == SK_FORMAT_CSV)
        set |= SK_UNIT_CSV;
    if (l->fmt == SK_FORMAT_XML)
        set |= SK_UNIT_XML;
    sk_unit_progress(l->u, (int64_t)SK_MAX(l->base, l->skip_until), set,
                     SK_UNIT_IN_ARRAY);
}

/* The window held the unit's last byte: a record cut off at the very end
 * is dead-lettered, a stream that broke between records says so, and the
 * unit is done (*finished). */
static int lane_finish(lane *l, int need_more, int cut_noted, int *finished)
{
    engine *e = l->e;
    sk_unit_rec *u = l->u;
    int rc;
    if (need_more && l->win.len > 0) {
        /* A cut-off record at the very end of the unit. */
        if ((rc = pl_dead_letter(e, l->t->id, l->base, l->win.data,
                                 l->win.len, l->r.error ? l->r.error
                                                        : "truncated record")))
            return rc;
        cut_noted = l->r.error != NULL;
        l->base += l->win.len;
        l->win.len = 0;
        sk_unit_progress(u, (int64_t)l->base, 0, 0);
    }
    if (l->r.error && l->win.len == 0 && !cut_noted) {
        /* The stream broke between records: the rest cannot be read.
         * An empty dead letter at the break says so where dead letters
         * are counted and kept, not only in the log. */
        sk_warn("%s: unit %s: %s at decompressed offset %" PRIu64
                "; records before it were copied", e->src->label, l->t->id,
                l->r.error, l->base);
        if ((rc = pl_dead_letter(e, l->t->id, l->base, l->win.data, 0,
                                 l->r.error)))
            return rc;
    }
    sk_unit_progress(u, sk_unit_offset(u), SK_UNIT_DONE, 0);
    if (!l->doc)
        e->tally.units++;
    *finished = 1;
    return SKIPPR_OK;
}

/* Pipeline thread: wait for the lane's tasks, then append its records in
 * order. Sets *finished when the unit is done. */
int pl_lane_apply(lane *l, int *finished)
{
    engine *e = l->e;
    if (e->pool)
        sk_pool_wait(e->pool, &l->g);
    l->busy = 0;
    *finished = 0;
    e->tally.bytes_in += l->made;
    e->bytes_since_commit += l->made;
    int rc = lane_refused(l);
    if (rc)
        return rc;
    size_t consumed;
    int need_more, cut_noted = 0; /* a dead letter already gives r.error */
    if ((rc = apply_pieces(l, &consumed, &need_more, &cut_noted)))
        return rc;
    if (need_more && consumed == 0 && l->win.len >= l->target) {
        int widened;
        if ((rc = apply_no_record(l, &consumed, &widened)) || widened)
            return rc;
    }
    lane_advance(l, consumed);
    if (!l->final)
        return SKIPPR_OK;
    return lane_finish(l, need_more, cut_noted, finished);
}
