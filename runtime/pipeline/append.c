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
#include <stdlib.h>
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

/* A slice tag in text, as it follows the NUL in a slice's key (the WAL
 * keeps these bytes, so their form stays): "csv:<id>", "xml:<id>:<root>",
 * "json:multiline", with <id> in TAG_ID_DIGITS hex digits. */
#define TAG_CSV "csv:"
#define TAG_XML "xml:"
#define TAG_MULTILINE "json:multiline"
#define TAG_KIND_LEN 4  /* "csv:", "xml:" */
#define TAG_ID_DIGITS 16

/* tag as text into out[cap]; its length, or 0 when it does not fit. */
static size_t tag_write(const slice_tag *tag, char *out, size_t cap)
{
    int n;
    if (tag->format == SK_FORMAT_CSV)
        n = snprintf(out, cap, TAG_CSV "%0*" PRIx64, TAG_ID_DIGITS,
                     tag->header_id);
    else if (tag->format == SK_FORMAT_XML)
        n = snprintf(out, cap, TAG_XML "%0*" PRIx64 ":%.*s", TAG_ID_DIGITS,
                     tag->header_id, (int)tag->root_len, tag->root);
    else
        n = snprintf(out, cap, "%s", tag->multiline ? TAG_MULTILINE : "");
    return n > 0 && (size_t)n < cap ? (size_t)n : 0;
}

void pl_slice_tag(const sk_slice *s, slice_tag *t)
{
    *t = (slice_tag){.format = SK_FORMAT_JSON};
    if (s->kind != SK_SLICE_DATA || s->name_len >= s->key_len)
        return; /* no tag: plain JSON */
    const char *tag = s->key + s->name_len + 1;
    size_t len = s->key_len - s->name_len - 1;
    if (len == sizeof TAG_MULTILINE - 1 &&
        memcmp(tag, TAG_MULTILINE, len) == 0) {
        t->multiline = 1;
        return;
    }
    if (len < TAG_KIND_LEN + TAG_ID_DIGITS)
        return;
    if (memcmp(tag, TAG_CSV, TAG_KIND_LEN) == 0)
        t->format = SK_FORMAT_CSV;
    else if (memcmp(tag, TAG_XML, TAG_KIND_LEN) == 0)
        t->format = SK_FORMAT_XML;
    else
        return;
    char hex[TAG_ID_DIGITS + 1];
    memcpy(hex, tag + TAG_KIND_LEN, TAG_ID_DIGITS);
    hex[TAG_ID_DIGITS] = '\0';
    t->header_id = strtoull(hex, NULL, 16);
    size_t root_at = TAG_KIND_LEN + TAG_ID_DIGITS + 1; /* past "<id>:" */
    if (t->format == SK_FORMAT_XML && len >= root_at) {
        t->root = tag + root_at;
        t->root_len = len - root_at;
    }
}

/* The OPEN data slice of partition key[0..klen) with tag: its key, built
 * in b (which key must not point into), is the partition, a NUL and the
 * tag's text. NULL on failure. */
sk_slice *pl_tagged_slice(engine *e, sk_buf *b, const char *key,
                          size_t klen, const slice_tag *tag)
{
    char text[300];
    size_t tlen = tag_write(tag, text, sizeof text);
    sk_buf_reset(b);
    if (!tlen || sk_buf_append(b, key, klen) || sk_buf_putc(b, 0) ||
        sk_buf_append(b, text, tlen))
        return NULL;
    const char *k = (const char *)b->data;
    return sk_state_slice(e->st, k, b->len, sk_hash_fast(k, b->len),
                          SK_SLICE_DATA);
}

int pl_slice_is_multiline(const sk_slice *s)
{
    slice_tag t;
    pl_slice_tag(s, &t);
    return t.multiline;
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
    slice_tag ml = {.format = SK_FORMAT_JSON, .multiline = 1};
    sk_slice *js = pl_tagged_slice(e, &e->multiline_key, key, klen, &ml);
    if (!js)
        return SKIPPR_NOMEM;
    if (!(rc = sk_state_append(e->st, js, rec, len))) {
        e->multiline_json++;
        e->records++;
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
    if (e->multiline_check &&
        (spans < 0 ? memchr(rec, '\n', len) != NULL : spans))
        return append_multiline(e, s, key, klen, rec, len, unit, offset);
    int rc = sk_state_append(e->st, s, rec, len);
    if (!rc)
        e->records++;
    return rc;
}

/* The conversion slice s needs for this sink, if any: a CSV slice (its
 * key holds the header's id) to a jsonl sink, or a JSON slice to a csv
 * sink. */
sk_conv_kind pl_slice_conv(const engine *e, const sk_slice *s)
{
    if (s->kind != SK_SLICE_DATA)
        return SK_CONV_NONE;
    slice_tag t;
    pl_slice_tag(s, &t);
    sk_format fmt = t.format;
    int sink_csv = e->sink->format == SK_FORMAT_CSV;
    if (fmt == SK_FORMAT_CSV && !sink_csv)
        return SK_CONV_CSV_JSONL;
    if (fmt == SK_FORMAT_JSON && sink_csv)
        return SK_CONV_JSON_CSV;
    return SK_CONV_NONE;
}

/* An XML slice's object ends with its root's close tag, which its tag
 * names. 0 if s is none. */
size_t pl_xml_trailer(const sk_slice *s, char *out, size_t cap)
{
    slice_tag t;
    pl_slice_tag(s, &t);
    if (t.format != SK_FORMAT_XML || !t.root)
        return 0;
    int n = snprintf(out, cap, "</%.*s>\n", (int)t.root_len, t.root);
    return n > 0 && (size_t)n < cap ? (size_t)n : 0;
}
