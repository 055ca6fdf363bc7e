/* JSON framing and peeking.
 *
 * The framer finds exact record spans in a buffer and, in the same single
 * pass, picks the values of a few dotted paths ("detail.tenant_id"). It
 * validates every record fully (structure, number grammar, escapes, UTF-8),
 * because an invalid record must be dead-lettered, not copied; but it never
 * builds a tree and never allocates.
 *
 * Records. One record is one top-level JSON value. A top-level array is
 * unwrapped once: its elements are the records. Records may be separated by
 * newlines (JSONL), CRLF, blank lines, any other whitespace or nothing at all
 * (Firehose concatenation), and may span many lines (pretty-printed). A
 * leading UTF-8 BOM is skipped by sk_json_skip_bom(). A record's bytes run
 * from its first byte to its last.
 *
 * Errors. An invalid record is reported with a span from its first byte up
 * to the next line that starts with '{' or '[' (inside a top-level array:
 * up to the newline after the error), trailing whitespace excluded, and the
 * framer resumes there. Every non-whitespace byte therefore ends up either
 * in a record or in an error span, and one truncated JSONL line never takes
 * the good line after it along.
 */
#ifndef SK_JSON_H
#define SK_JSON_H

#include <stddef.h>
#include <stdint.h>

#include "format/jsonspec.h" /* sk_peek_spec: the paths to pick */
#include "format/jsontext.h" /* sk_json_unescape, sk_json_compact */

#define SK_JSON_MAX_DEPTH 512

typedef enum sk_json_type {
    SK_JSON_NONE = 0, /* path not present in this record */
    SK_JSON_STRING,
    SK_JSON_NUMBER,
    SK_JSON_TRUE,
    SK_JSON_FALSE,
    SK_JSON_NULL,
    SK_JSON_OBJECT,
    SK_JSON_ARRAY
} sk_json_type;

/* A picked value: a span of the input buffer. For strings the span is the
 * raw text between the quotes; has_escapes says whether it must be decoded
 * (sk_json_unescape) before use. */
typedef struct sk_json_value {
    uint8_t type;
    uint8_t has_escapes;
    size_t off; /* absolute offset in the buffer */
    size_t len;
} sk_json_value;

typedef enum sk_json_rc {
    SK_JSON_RECORD = 1,    /* a record: start/end and values are set */
    SK_JSON_END = 2,       /* only whitespace left */
    SK_JSON_NEED_MORE = 3, /* a record starts at start but is cut off */
    SK_JSON_ERROR = 4      /* invalid bytes: start/end span them, see reason */
} sk_json_rc;

typedef struct sk_json_framer {
    int in_array;   /* inside an unwrapped top-level array */
    int want_comma; /* inside that array, after an element */
} sk_json_framer;

typedef struct sk_json_record {
    size_t start, end; /* [start, end) */
    int multiline;      /* SK_JSON_RECORD: the span holds a line feed */
    const char *reason; /* static string, for SK_JSON_ERROR */
    sk_json_value values[SK_PEEK_MAX_PATHS];
} sk_json_record;

static inline void sk_json_framer_init(sk_json_framer *f)
{
    f->in_array = 0;
    f->want_comma = 0;
}

/* Frame the next record at or after *pos in buf[0..len). final says whether
 * the buffer holds the unit's last byte. On RECORD and ERROR, *pos moves past
 * the span; on END it moves to len; on NEED_MORE it is the record's start,
 * where the caller resumes once it has more bytes. spec may be NULL. */
sk_json_rc sk_json_next(sk_json_framer *f, const sk_peek_spec *spec,
                        const uint8_t *buf, size_t len, size_t *pos, int final,
                        sk_json_record *out);

/* Offset of the first byte after a UTF-8 BOM, if buf starts with one. */
size_t sk_json_skip_bom(const uint8_t *buf, size_t len);

/* One member of an object: its name's raw text (without quotes; decode it
 * with sk_json_unescape if has_escapes) and its value (for a string the raw
 * text between the quotes, else the whole lexeme or container). */
typedef struct sk_json_member {
    size_t name_off, name_len;
    int name_escapes;
    sk_json_value value;
} sk_json_member;

/* Calls fn for each member of the JSON object rec[0..len), in order, with
 * offsets into rec. Stops when fn returns non-zero and returns that.
 * Returns -1 if rec is not one valid JSON object (whitespace around it is
 * allowed). Never allocates. */
typedef int (*sk_json_member_fn)(void *ud, const sk_json_member *m);
int sk_json_members(const uint8_t *rec, size_t len, sk_json_member_fn fn,
                    void *ud);

/* Validate UTF-8 (no overlongs, surrogates or code points past U+10FFFF).
 * Returns 1 if valid. */
int sk_utf8_valid(const uint8_t *s, size_t n);

#endif
