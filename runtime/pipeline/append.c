/* What goes into a slice: a JSON record (or, when it spans lines and the
 * sink writes .jsonl, where multiline_records says), a dead letter with
 * its metadata, and the slices whose records need their own object (a
 * CSV header's, an XML root's, multi-line JSON), told apart by a tag after
 * a NUL in the slice key. Also what a slice's format means for its object:
 * its extension, its conversion for the sink, an XML root's close tag.
 *
 * Owns: nothing; slices belong to the state (state/state.h).
 * Thread: the pipeline thread; the format helpers are pure and are also
 * called from upload threads.
 */
#include "pipeline/engine.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

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

int pl_dead_letter(engine *e, const char *unit, uint64_t offset,
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
sk_slice *pl_tagged_slice(engine *e, sk_buf *b, const char *key,
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

int pl_slice_is_multiline(const sk_slice *s)
{
    size_t name = strnlen(s->key, s->key_len);
    size_t tl = sizeof MULTILINE_TAG - 1;
    return s->kind == SK_SLICE_DATA && s->key_len == name + 1 + tl &&
           memcmp(s->key + name + 1, MULTILINE_TAG, tl) == 0;
}

/* The extension of slice s's object. */
const char *pl_slice_ext(const engine *e, const sk_slice *s)
{
    if (s->kind == SK_SLICE_DEAD)
        return ".bad";
    return pl_slice_is_multiline(s) ? ".json" : e->ext;
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
        return pl_dead_letter(e, unit, offset, rec, len,
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
    sk_slice *js = pl_tagged_slice(e, &e->multiline_key, key, klen,
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
int pl_append_json(engine *e, sk_slice *s, const char *key, size_t klen,
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

/* The format of a data slice's records, from the tag pl_lane_apply puts in
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

/* The conversion slice s needs for this sink, if any: a CSV slice (its
 * key holds the header's id) to a jsonl sink, or a JSON slice to a csv
 * sink. */
sk_conv_kind pl_slice_conv(const engine *e, const sk_slice *s)
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
size_t pl_xml_trailer(const sk_slice *s, char *out, size_t cap)
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
