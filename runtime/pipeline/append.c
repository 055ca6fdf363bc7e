/* What goes into a slice: a JSON record (or, when it spans lines and the
 * sink writes .jsonl, where multiline_records says), a dead letter with
 * its metadata, and the slices whose records need their own object (a
 * CSV header's, an XML root's, multi-line JSON), told apart by the slice's
 * tag (state/types.h); a streamed slice's full buffer put to the sink as
 * the state asks (grow.c). What a slice's format means for its object is
 * slicefmt.c's.
 *
 * Owns: nothing; slices belong to the state (state/state.h).
 * Thread: the pipeline thread.
 */
#include "pipeline/engine.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pipeline/verify.h"

#include "pipeline/shape.h"

/* Append one record to s (raw: without the object CRC, as
 * sk_state_append_raw), and put a streamed slice's buffer to the sink
 * when it is full: before the record (SK_STATE_PUT_FIRST) or after it. */
static int append_one(engine *e, sk_slice *s, const void *rec, size_t len,
                      int raw)
{
    for (int tries = 0; tries < 2; tries++) {
        int rc = raw ? sk_state_append_raw(e->st, s, rec, len)
                     : sk_state_append(e->st, s, rec, len);
        if (rc <= 0) /* appended, or a failure */
            return rc;
        int prc = pl_grow_put_one(e, s);
        if (prc || rc == SK_STATE_PUT_NOW)
            return prc;
    }
    /* a put leaves less than a block, which takes any record */
    return SKIPPR_INVAL;
}

int pl_append(engine *e, sk_slice *s, const void *rec, size_t len)
{
    return append_one(e, s, rec, len, 0);
}

int pl_append_raw(engine *e, sk_slice *s, const void *rec, size_t len)
{
    return append_one(e, s, rec, len, 1);
}

static int json_str_append(skippr_buf *b, const char *s, size_t n)
{
    int rc = skippr_buf_putc(b, '"');
    for (size_t i = 0; !rc && i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '"' || c == '\\')
            rc = skippr_buf_printf(b, "\\%c", c);
        else if (c < 0x20 || c == 0x7f)
            rc = skippr_buf_printf(b, "\\u%04x", c);
        else
            rc = skippr_buf_putc(b, c);
    }
    return rc ? rc : skippr_buf_putc(b, '"');
}

int pl_dead_letter(engine *e, const char *unit, uint64_t offset,
                       const uint8_t *bytes, size_t len, const char *reason)
{
    if (e->verify)
        return pl_verify_dead(e->verify, unit, offset, bytes, len);
    sk_slice *s = sk_state_slice(e->st, "_errors", 7, 0, NULL,
                                 SK_SLICE_DEAD);
    if (!s)
        return SKIPPR_NOMEM;
    skippr_buf meta;
    skippr_buf_init(&meta, 1u << 20);
    int rc = skippr_buf_append(&meta, "\"unit\":", 7);
    if (!rc)
        rc = json_str_append(&meta, unit, strlen(unit));
    if (!rc)
        rc = skippr_buf_printf(&meta, ",\"offset\":%" PRIu64 ",\"length\":%zu,"
                           "\"reason\":", offset, len);
    if (!rc)
        rc = json_str_append(&meta, reason, strlen(reason));
    if (!rc)
        rc = pl_append(e, s, meta.data, meta.len);
    if (!rc)
        rc = pl_append(e, s, bytes, len);
    skippr_buf_free(&meta);
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
        e->tally.dead++;
        sk_debug("dead letter: %s at offset %" PRIu64 " (%zu bytes): %s",
                 unit, offset, len, reason);
    }
    return rc;
}

/* A JSON record of partition key[0..klen) (whose .jsonl slice is s) that
 * holds a line feed, so a .jsonl object cannot hold it as one line: put it
 * where multiline_records says. unit and offset name it in a dead letter.
 * Counts it in e->tally.records (or e->tally.dead). */
static int append_multiline(engine *e, sk_slice *s, const char *key,
                            size_t klen, const uint8_t *rec, size_t len,
                            const char *unit, uint64_t offset)
{
    int rc;
    switch (e->cfg->multiline) {
    case SK_MULTILINE_DEAD:
        return pl_dead_letter(e, unit, offset, rec, len,
                           "the record spans lines, which a .jsonl object "
                           "cannot hold (multiline_records: dead_letter)");
    case SK_MULTILINE_COMPACT: {
        const uint8_t *one;
        size_t n;
        if ((rc = pl_shape_compact(e->shape, rec, len, &one, &n)) ||
            (rc = pl_append(e, s, one, n)))
            return rc;
        pl_shape_count_multiline(e->shape, 1);
        e->tally.records++;
        return rc;
    }
    case SK_MULTILINE_JSON:
        break;
    }
    sk_slice_tag ml = {.form = SK_FORM_MULTILINE};
    sk_slice *js = sk_state_slice(e->st, key, klen, 0, &ml, SK_SLICE_DATA);
    if (!js)
        return SKIPPR_NOMEM;
    if (!(rc = pl_append(e, js, rec, len))) {
        pl_shape_count_multiline(e->shape, 0);
        e->tally.records++;
    }
    return rc;
}

/* Append one JSON record to s, or, when it spans lines and the sink
 * writes .jsonl, where multiline_records says. spans: whether the record
 * spans lines, when the framer said so; -1 to look. Counts it. */
int pl_append_json(engine *e, sk_slice *s, const char *key, size_t klen,
                   const uint8_t *rec, size_t len, const char *unit,
                   uint64_t offset, int spans)
{
    if (pl_shape_lines_only(e->shape) &&
        (spans < 0 ? memchr(rec, '\n', len) != NULL : spans))
        return append_multiline(e, s, key, klen, rec, len, unit, offset);
    int rc = pl_append(e, s, rec, len);
    if (!rc)
        e->tally.records++;
    return rc;
}
