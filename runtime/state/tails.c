/* A parted slice's bytes that no part holds yet (streamed.c): the TAIL frames
 * and staging pieces that hold them, recorded and retired in order of
 * object offset, and read back for the next part. Below streamed.c, which
 * decides when they are written. */
#include "state/tails.h"
#include "state/state_impl.h"

#include <inttypes.h>
#include <string.h>

#include "state/slice.h"

int st_add_tail(sk_slice *s, sk_wal_pos pos, uint64_t off)
{
    if (skippr_array_grow(&s->tail_off, s->nblocks, &s->tail_cap,
                          sizeof *s->tail_off, 8))
        return SKIPPR_NOMEM;
    int rc = st_add_block(s, pos);
    if (!rc)
        s->tail_off[s->nblocks - 1] = off;
    return rc;
}

void st_drop_tails(sk_slice *s, uint64_t upto)
{
    size_t k = 0;
    while (k < s->nblocks && s->tail_off[k] < upto)
        k++;
    if (!k)
        return;
    memmove(s->blocks, s->blocks + k, (s->nblocks - k) * sizeof *s->blocks);
    memmove(s->tail_off, s->tail_off + k,
            (s->nblocks - k) * sizeof *s->tail_off);
    s->nblocks -= k;
    s->first_seg = s->nblocks ? SK_MIN(s->blocks[0].seg, s->announce_seg)
                              : s->announce_seg;
}

/* Append the part of piece [off, off + len) that lies in [from, upto),
 * whose bytes p holds, to out. */
static int take_range(skippr_buf *out, const uint8_t *p, uint64_t off,
                      uint64_t len, uint64_t from, uint64_t upto)
{
    uint64_t a = SK_MAX(from, off), b = SK_MIN(upto, off + len);
    return a < b ? skippr_buf_append(out, p + (a - off), (size_t)(b - a))
                 : SKIPPR_OK;
}

int sk_state_read_tail(sk_state *st, const sk_slice *s, uint64_t from,
                       uint64_t upto, skippr_buf *out, skippr_buf *f)
{
    uint64_t at = s->pushed + s->staged; /* where the next frame starts */
    int rc = from < at || from > upto || upto > at + s->walled
                 ? SKIPPR_CORRUPT
                 : SKIPPR_OK;
    for (size_t i = 0; i < s->nblocks && at < upto && !rc; i++) {
        int type = 0;
        rc = sk_wal_read(st->wal, s->blocks[i], f, &type);
        if (!rc && (type != SK_WAL_TAIL || f->len < 16 ||
                    sk_get_u64(f->data) != s->id ||
                    sk_get_u64(f->data + 8) != at))
            rc = SKIPPR_CORRUPT;
        if (!rc) {
            rc = take_range(out, f->data + 16, at, f->len - 16, from, upto);
            at += f->len - 16;
        }
    }
    if (!rc && at < upto)
        rc = SKIPPR_CORRUPT;
    if (rc == SKIPPR_CORRUPT)
        sk_error("WAL corrupt: the TAIL frames of slice %" PRIu64 " do not "
                 "make up its bytes %" PRIu64 " to %" PRIu64 " (%zu frames)",
                 s->id, from, upto, s->nblocks);
    return rc;
}

size_t sk_state_npieces(const sk_slice *s)
{
    return s->nstaged;
}

sk_stage_piece sk_state_piece(const sk_slice *s, size_t i)
{
    return (sk_stage_piece){s->stage_off[i], s->stage_len[i],
                            s->stage_tag[i]};
}

int st_add_stage(sk_slice *s, uint64_t off, uint64_t len, uint64_t tag)
{
    uint64_t **arr[] = {&s->stage_off, &s->stage_len, &s->stage_tag};
    size_t cap = s->stage_cap;
    for (size_t k = 0; k < 3; k++) {
        cap = s->stage_cap;
        if (skippr_array_grow(arr[k], s->nstaged, &cap, sizeof(uint64_t), 4))
            return SKIPPR_NOMEM;
    }
    s->stage_cap = cap;
    s->stage_off[s->nstaged] = off;
    s->stage_tag[s->nstaged] = tag;
    s->stage_len[s->nstaged++] = len;
    s->staged += len;
    s->staged_ever = 1;
    return SKIPPR_OK;
}

void st_drop_stages(sk_slice *s, uint64_t upto)
{
    size_t k = 0;
    while (k < s->nstaged && s->stage_off[k] < upto)
        s->staged -= s->stage_len[k++];
    if (!k)
        return;
    memmove(s->stage_off, s->stage_off + k,
            (s->nstaged - k) * sizeof *s->stage_off);
    memmove(s->stage_len, s->stage_len + k,
            (s->nstaged - k) * sizeof *s->stage_len);
    memmove(s->stage_tag, s->stage_tag + k,
            (s->nstaged - k) * sizeof *s->stage_tag);
    s->nstaged -= k;
}

int sk_state_note(sk_slice *s, const char *note, size_t n)
{
    if (n > SK_NOTES_MAX - s->notes.len)
        return SKIPPR_RANGE;
    return skippr_buf_append(&s->notes, note, n);
}

void sk_state_assume_pieces(sk_state *st)
{
    for (size_t i = 0; i < st->nlive; i++)
        if (st->live[i]->streamed)
            st->live[i]->staged_ever = 1;
}
