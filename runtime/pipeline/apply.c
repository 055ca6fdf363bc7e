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
int pl_lane_apply(lane *l, int *finished)
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
            pl_piece_run(p);
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
            int rc = pl_dead_letter(e, unit_id, l->base + o->start,
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
                s = pl_tagged_slice(e, &e->slice_key, key, klen, id,
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
                    int rc = pl_append_json(e, s, key, klen, buf + o->start,
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
        if ((rc = pl_dead_letter(e, unit_id, l->base, buf, cut,
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
        if ((rc = pl_dead_letter(e, unit_id, l->base, l->win.data, l->win.len,
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
        if ((rc = pl_dead_letter(e, unit_id, l->base, l->win.data, 0,
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
