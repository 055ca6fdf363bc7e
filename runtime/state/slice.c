/* A slice and the live list: made, found, freed; its blocks, its open
 * block through the state's pool, its SLICE and DONE frames (slice.h).
 *
 * Thread: the pipeline thread, like the rest of the state.
 */
#include "state/slice.h"
#include "state/state_impl.h"

#include <stdint.h>
#include <string.h>

#include "base/common.h"

void st_slice_free(sk_slice *s)
{
    if (!s)
        return;
    sk_free(s->key);
    sk_free(s->blocks);
    sk_free(s->tail_off);
    sk_free(s->stage_off);
    sk_free(s->stage_len);
    sk_free(s->stage_tag);
    skippr_buf_free(&s->open_block);
    skippr_buf_free(&s->notes);
    sk_free(s->object_key);
    sk_free(s);
}

/* The open-slice map's key of partition name[0..nlen) with tag, into b:
 * the name and a NUL (not counted) for SK_FORM_LINES; else the name, a
 * NUL, the form, the header id (8 bytes, little-endian) and the root. It
 * is only ever compared, never read back: the tag's fields are the
 * slice's identity. */
static int ident_build(skippr_buf *b, const char *name, size_t nlen,
                       const sk_slice_tag *tag, size_t *len)
{
    skippr_buf_reset(b);
    int rc = skippr_buf_append(b, name, nlen);
    if (!rc)
        rc = skippr_buf_putc(b, 0);
    *len = nlen;
    if (rc || !tag || tag->form == SK_FORM_LINES)
        return rc;
    uint8_t f[1 + 8];
    f[0] = (uint8_t)tag->form;
    sk_put_u64(f + 1, tag->header_id);
    rc = skippr_buf_append(b, f, sizeof f);
    if (!rc && tag->root_len)
        rc = skippr_buf_append(b, tag->root, tag->root_len);
    *len = b->len;
    return rc;
}

uint64_t st_ident(sk_state *st, const char *name, size_t nlen,
                  const sk_slice_tag *tag, const char **ident, size_t *len)
{
    if (ident_build(&st->ident, name, nlen, tag, len))
        return (*ident = NULL), 0;
    *ident = (const char *)st->ident.data;
    return sk_hash_fast(*ident, *len);
}

int st_slice_name(sk_slice *s, const char *name, size_t nlen,
                  const sk_slice_tag *tag)
{
    skippr_buf b;
    size_t len;
    skippr_buf_init(&b, (size_t)1 << 20);
    int rc = ident_build(&b, name, nlen, tag, &len);
    if (rc) {
        skippr_buf_free(&b);
        return rc;
    }
    sk_free(s->key);
    s->key = (char *)b.data; /* the buffer's bytes become the slice's */
    s->key_len = nlen;
    s->ident_len = len;
    s->key_hash = sk_hash_fast(s->key, len);
    s->tag = tag ? *tag : (sk_slice_tag){.form = SK_FORM_LINES};
    s->tag.root = NULL;
    if (tag && tag->form != SK_FORM_LINES && tag->root_len)
        s->tag.root = s->key + nlen + 1 + 1 + 8;
    return SKIPPR_OK;
}

sk_slice *st_slice_new(uint64_t id, const char *name, size_t nlen,
                       const sk_slice_tag *tag, uint8_t kind,
                       int64_t opened_at)
{
    sk_slice *s = sk_calloc(1, sizeof *s);
    if (!s)
        return NULL;
    if (st_slice_name(s, name, nlen, tag)) {
        sk_free(s);
        return NULL;
    }
    s->id = id;
    s->kind = kind;
    s->opened_at = opened_at;
    s->first_seg = UINT64_MAX;
    skippr_buf_init(&s->open_block, SK_WAL_MAX_PAYLOAD - 64);
    skippr_buf_init(&s->notes, SK_NOTES_MAX);
    return s;
}

int st_live_add(sk_state *st, sk_slice *s)
{
    if (skippr_array_grow(&st->live, st->nlive, &st->live_cap, sizeof *st->live,
                          64))
        return SKIPPR_NOMEM;
    st->live[st->nlive++] = s;
    return SKIPPR_OK;
}

void st_live_remove(sk_state *st, sk_slice *s)
{
    for (size_t i = 0; i < st->nlive; i++) {
        if (st->live[i] == s) {
            st->live[i] = st->live[--st->nlive];
            return;
        }
    }
}

sk_slice *st_live_find(const sk_state *st, uint64_t id)
{
    for (size_t i = 0; i < st->nlive; i++)
        if (st->live[i]->id == id)
            return st->live[i];
    return NULL;
}

int st_add_block(sk_slice *s, sk_wal_pos pos)
{
    if (skippr_array_grow(&s->blocks, s->nblocks, &s->blocks_cap,
                          sizeof *s->blocks, 8))
        return SKIPPR_NOMEM;
    s->blocks[s->nblocks++] = pos;
    if (pos.seg < s->first_seg)
        s->first_seg = pos.seg;
    return SKIPPR_OK;
}

/* Give s's open-block buffer back (to the pool); it must be empty. */
void st_release_block(sk_state *st, sk_slice *s)
{
    st->open_block_cap -= s->open_block.cap;
    sk_bufpool_release(&st->pool, &s->open_block, st->open_block_cap);
}

int st_block_reserve(sk_state *st, sk_slice *s, size_t cap)
{
    size_t cap0 = s->open_block.cap;
    int rc = sk_bufpool_reserve(&st->pool, &s->open_block, cap,
                                st->open_block_cap - cap0);
    st->open_block_cap += s->open_block.cap - cap0;
    return rc;
}

/* The SLICE frame of s: its id, name, kind, age and tag. */
int st_announce(sk_state *st, sk_slice *s)
{
    uint8_t h[8 + 4], t[9], g[1 + 8 + 4];
    sk_put_u64(h, s->id);
    sk_put_u32(h + 8, (uint32_t)s->key_len);
    t[0] = (uint8_t)(s->kind | (s->streamed ? SK_SLICE_STREAMED : 0) |
                     (s->staged_ever ? SK_SLICE_STAGED : 0));
    sk_put_u64(t + 1, (uint64_t)s->opened_at);
    g[0] = (uint8_t)s->tag.form;
    sk_put_u64(g + 1, s->tag.header_id);
    sk_put_u32(g + 9, (uint32_t)s->tag.root_len);
    sk_iov parts[] = {{h, sizeof h}, {s->key, s->key_len}, {t, sizeof t},
                      {g, sizeof g}, {s->tag.root, s->tag.root_len}};
    sk_wal_pos pos;
    int rc = sk_wal_append(st->wal, SK_WAL_SLICE, parts, 5, &pos);
    if (rc)
        return rc;
    if (s->streamed)
        /* a restatement: older segments are needed only for its tail */
        s->first_seg = s->nblocks ? SK_MIN(s->blocks[0].seg, pos.seg)
                                  : pos.seg;
    else if (pos.seg < s->first_seg)
        s->first_seg = pos.seg;
    s->announce_seg = pos.seg;
    s->announced = 1;
    return SKIPPR_OK;
}

int st_write_done(sk_state *st, uint64_t id)
{
    uint8_t b[8];
    sk_put_u64(b, id);
    sk_iov part = {b, sizeof b};
    return sk_wal_append(st->wal, SK_WAL_DONE, &part, 1, NULL);
}
