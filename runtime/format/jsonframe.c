/* JSON framing: records one after another (JSON lines, concatenated or
 * pretty-printed values, or the elements of top-level arrays), the error
 * span of a bad record and where the next one starts, and an object's
 * members one by one. The scanner that reads one value is json.c's. See
 * json.h for the contract.
 */
#include "format/json.h"

#include <string.h>

#include "format/json_impl.h"

int sk_json_members(const uint8_t *rec, size_t len, sk_json_member_fn fn,
                    void *ud)
{
    sk_json_value cap;
    scan x = {.base = rec, .p = rec, .end = rec + len, .vals = &cap,
              .final = 1, .need = -1};
    skip_ws(&x);
    if (x.p >= x.end || *x.p != '{')
        return -1;
    x.p++;
    skip_ws(&x);
    int more = !(x.p < x.end && *x.p == '}');
    while (more) {
        sk_json_member m;
        if (json_scan_member(&x, &m, &cap))
            return -1;
        int rc = fn(ud, &m);
        if (rc)
            return rc;
        skip_ws(&x);
        if (x.p >= x.end || (*x.p != ',' && *x.p != '}'))
            return -1;
        more = *x.p == ',';
        if (more) {
            x.p++;
            skip_ws(&x);
        }
    }
    x.p++; /* the '}' */
    skip_ws(&x);
    return x.p == x.end ? 0 : -1;
}

size_t sk_json_skip_bom(const uint8_t *buf, size_t len)
{
    if (len >= 3 && buf[0] == 0xEF && buf[1] == 0xBB && buf[2] == 0xBF)
        return 3;
    return 0;
}

/* Where a bad record ends (*stop) and the next one starts (*resume), for
 * a record starting at i whose error is at e. Outside an array the next
 * record is taken to start at a line beginning with '{' or '['; inside
 * one, at the line after the error. 0 when that line start is not in
 * buf yet (both are then len). */
static int resync_span(int in_array, const uint8_t *buf, size_t len,
                       size_t i, size_t e, size_t *stop, size_t *resume)
{
    *stop = *resume = len;
    if (in_array) {
        const uint8_t *nl = e < len ? memchr(buf + e, '\n', len - e) : NULL;
        if (!nl)
            return 0;
        *stop = (size_t)(nl - buf);
        *resume = *stop + 1;
        return 1;
    }
    size_t k = i;
    const uint8_t *nl;
    while (k < len && (nl = memchr(buf + k, '\n', len - k))) {
        size_t at = (size_t)(nl - buf);
        if (at + 1 >= len)
            return 0; /* the next byte is not here yet */
        if (buf[at + 1] == '{' || buf[at + 1] == '[') {
            *stop = at;
            *resume = at + 1;
            return 1;
        }
        k = at + 1;
    }
    return 0;
}

/* Whitespace and a top-level array's punctuation from *i: *i moves to the
 * next record's first byte (len: none). 1 when, in an array, an element
 * follows the last without a comma. */
static int skip_between(sk_json_framer *f, const uint8_t *buf, size_t len,
                        size_t *i)
{
    for (;;) {
        while (*i < len && ws_table[buf[*i]])
            (*i)++;
        if (*i >= len)
            return 0;
        uint8_t c = buf[*i];
        if (f->in_array && (c == ']' || c == ',')) {
            /* A comma is also tolerated after a resync, where the comma
             * that followed a dead-lettered element starts the line. */
            if (c == ']')
                f->in_array = 0;
            f->want_comma = 0;
            (*i)++;
        } else if (f->in_array) {
            return f->want_comma;
        } else if (c == '[') {
            f->in_array = 1;
            f->want_comma = 0;
            (*i)++;
        } else {
            return 0;
        }
    }
}

/* NEED_MORE for the record at i. */
static sk_json_rc need_more(size_t i, size_t *pos, sk_json_record *out)
{
    *pos = i;
    out->start = i;
    return SK_JSON_NEED_MORE;
}

/* The record at i failed at e: its error span, and *pos where the next
 * one starts. Outside an array the next record is taken to start at a
 * line beginning with '{' or '[': that keeps one truncated JSONL line from
 * swallowing the good line after it, and keeps a broken pretty-printed
 * record in one piece. Inside an array, elements are indented, so the
 * span runs to the newline after the error. */
static sk_json_rc bad_record(sk_json_framer *f, const uint8_t *buf,
                             size_t len, size_t i, size_t e, int final,
                             size_t *pos, sk_json_record *out)
{
    size_t stop, resume;
    int found = resync_span(f->in_array, buf, len, i, e < i ? i : e, &stop,
                            &resume);
    if (!found && !final)
        return need_more(i, pos, out);
    while (stop > i + 1 && ws_table[buf[stop - 1]])
        stop--; /* trailing whitespace is not part of the bad bytes */
    out->start = i;
    out->end = stop > i ? stop : i + 1;
    *pos = resume;
    if (f->in_array)
        f->want_comma = 0;
    return SK_JSON_ERROR;
}

/* In an array, after an element, something other than ',' or ']' at i:
 * an error to the end of its line. */
static sk_json_rc bad_between(sk_json_framer *f, const uint8_t *buf,
                              size_t len, size_t i, int final, size_t *pos,
                              sk_json_record *out)
{
    const uint8_t *nl = memchr(buf + i, '\n', len - i);
    if (!nl && !final)
        return need_more(i, pos, out);
    out->start = i;
    out->end = nl ? (size_t)(nl - buf) : len;
    out->reason = "expected ',' or ']' between top-level array elements";
    *pos = nl ? (size_t)(nl - buf) + 1 : len;
    f->want_comma = 0;
    return SK_JSON_ERROR;
}

sk_json_rc sk_json_next(sk_json_framer *f, const sk_peek_spec *spec,
                        const uint8_t *buf, size_t len, size_t *pos, int final,
                        sk_json_record *out)
{
    size_t i = *pos;
    if (skip_between(f, buf, len, &i))
        return bad_between(f, buf, len, i, final, pos, out);
    if (i >= len) {
        *pos = len;
        return SK_JSON_END;
    }
    scan x = {.base = buf, .p = buf + i, .end = buf + len, .spec = spec,
              .vals = out->values, .final = final,
              .need = spec && spec->skim ? spec->need : -1};
    size_t nvals = sk_peek_spec_count(spec);
    for (size_t k = 0; k < nvals; k++)
        out->values[k].type = SK_JSON_NONE;
    if (json_scan_record(&x, spec ? 0 : -1) == 0) {
        out->start = i;
        out->end = (size_t)(x.p - buf);
        out->multiline = (x.ws_seen & WS_LF) != 0;
        *pos = out->end;
        if (f->in_array)
            f->want_comma = 1;
        return SK_JSON_RECORD;
    }
    if (x.incomplete && !final)
        return need_more(i, pos, out);
    out->reason = x.err ? x.err : "truncated record";
    return bad_record(f, buf, len, i, x.p ? (size_t)(x.p - buf) : i, final,
                      pos, out);
}
