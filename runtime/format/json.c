/* JSON framer and peeker: see json.h for the contract.
 *
 * A hand-written validating recursive-descent scanner. Libraries (jansson,
 * simdjson) build trees or lose byte offsets; we need exact record spans plus
 * a handful of values, in one pass, with no allocation. jansson remains the
 * oracle in the differential tests.
 *
 * Hot loops: whitespace skipping and string scanning. Strings are scanned
 * eight bytes at a time (SWAR) until a quote, backslash, control byte or
 * non-ASCII byte shows up; only those take the byte-at-a-time path.
 */
#include "format/json.h"

#include <stdlib.h>
#include <string.h>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "base/common.h"

#include "format/json_impl.h"

/* ---- scanner ---------------------------------------------------------- */

/* Skim mode: where the record's scan stands once its groups settle. */
typedef enum skim_state {
    SKIM_READING = 0, /* some group still wants a value */
    SKIM_SETTLED,     /* all settled: skip the rest of the record */
    SKIM_SKIPPED      /* the rest was skipped: unwind to the record's end */
} skim_state;

typedef struct scan {
    const uint8_t *base;
    const uint8_t *p;
    const uint8_t *end;
    const sk_peek_spec *spec;
    sk_json_value *vals;
    const char *err;
    int incomplete; /* ran off the end of the buffer */
    int final;
    /* skim mode */
    int need;       /* groups not yet settled; < 0: never */
    uint32_t found; /* slots that settled their groups */
    skim_state stop;
    unsigned ws_seen; /* ws_table bits of the whitespace skipped so far */
} scan;

/* Non-zero for JSON whitespace; WS_LF marks the line feed, so that skipping
 * whitespace also tells whether a record spans lines (a raw line feed is
 * valid nowhere else in JSON). */
#define WS_LF 2u
static const uint8_t ws_table[256] = {[' '] = 1, ['\t'] = 1,
                                      ['\n'] = 1 | WS_LF, ['\r'] = 1};

static inline void skip_ws(scan *x)
{
    const uint8_t *p = x->p, *e = x->end;
    unsigned seen = 0;
    while (p < e && ws_table[*p])
        seen |= ws_table[*p++];
    x->ws_seen |= seen;
    x->p = p;
}

#define NEED(x)                                                                \
    do {                                                                       \
        if ((x)->p >= (x)->end) {                                              \
            (x)->incomplete = 1;                                               \
            return -1;                                                         \
        }                                                                      \
    } while (0)

static inline int fail(scan *x, const char *why)
{
    if (!x->err)
        x->err = why;
    return -1;
}

/* Length of the valid UTF-8 sequence at p, 0 if invalid, -1 if cut off by
 * end. Follows RFC 3629 table 3-7 (no overlongs, no surrogates). */
static int utf8_seq(const uint8_t *p, const uint8_t *end)
{
    uint8_t c = p[0];
    int n;
    uint8_t lo = 0x80, hi = 0xBF;
    if (c < 0x80)
        return 1;
    if (c >= 0xC2 && c <= 0xDF)
        n = 2;
    else if (c >= 0xE0 && c <= 0xEF) {
        n = 3;
        if (c == 0xE0)
            lo = 0xA0;
        else if (c == 0xED)
            hi = 0x9F;
    } else if (c >= 0xF0 && c <= 0xF4) {
        n = 4;
        if (c == 0xF0)
            lo = 0x90;
        else if (c == 0xF4)
            hi = 0x8F;
    } else
        return 0;
    for (int i = 1; i < n; i++) {
        if (p + i >= end)
            return -1;
        uint8_t b = p[i];
        if (i == 1 ? (b < lo || b > hi) : (b < 0x80 || b > 0xBF))
            return 0;
    }
    return n;
}

int sk_utf8_valid(const uint8_t *s, size_t n)
{
    const uint8_t *p = s, *end = s + n;
    while (p < end) {
        int k = utf8_seq(p, end);
        if (k <= 0)
            return 0;
        p += k;
    }
    return 1;
}

/* Skip ordinary string bytes: stop at a quote, backslash, control byte or
 * non-ASCII byte (or the end). Sixteen bytes at a time with SSE2, which
 * every x86-64 has; eight at a time (SWAR) elsewhere. */
static inline const uint8_t *skip_plain(const uint8_t *p, const uint8_t *end)
{
#if defined(__SSE2__)
    const __m128i quote = _mm_set1_epi8('"');
    const __m128i bslash = _mm_set1_epi8('\\');
    const __m128i space = _mm_set1_epi8(0x20);
    while (end - p >= 16) {
        __m128i v = _mm_loadu_si128((const __m128i *)(const void *)p);
        /* Signed compare: bytes >= 0x80 are negative, so "< 0x20" also
         * catches every non-ASCII byte. */
        __m128i special = _mm_or_si128(
            _mm_or_si128(_mm_cmpeq_epi8(v, quote), _mm_cmpeq_epi8(v, bslash)),
            _mm_cmplt_epi8(v, space));
        unsigned m = (unsigned)_mm_movemask_epi8(special);
        if (m)
            return p + __builtin_ctz(m);
        p += 16;
    }
#endif
    while (end - p >= 8) {
        uint64_t v;
        memcpy(&v, p, 8);
        uint64_t q = v ^ (ONES * '"');
        uint64_t b = v ^ (ONES * '\\');
        uint64_t t = ((q - ONES) & ~q) | ((b - ONES) & ~b) |
                     ((v - ONES * 0x20) & ~v) | v;
        if (t & HIGHS)
            break;
        p += 8;
    }
    while (p < end && *p != '"' && *p != '\\' && *p >= 0x20 && *p < 0x80)
        p++;
    return p;
}

/* x->p is at the opening quote. On success x->p is past the closing quote,
 * raw_off and raw_len give the text between the quotes. */
static inline __attribute__((always_inline)) int
scan_string(scan *x, size_t *raw_off, size_t *raw_len, int *esc)
{
    const uint8_t *p = x->p + 1, *end = x->end;
    const uint8_t *start = p;
    int has_esc = 0;
    for (;;) {
        p = skip_plain(p, end);
        if (p >= end)
            goto cut;
        uint8_t c = *p;
        if (c == '"')
            break;
        if (c == '\\') {
            has_esc = 1;
            if (p + 1 >= end)
                goto cut;
            switch (p[1]) {
            case '"': case '\\': case '/': case 'b': case 'f': case 'n':
            case 'r': case 't':
                p += 2;
                continue;
            case 'u': {
                if (end - p < 6)
                    goto cut;
                long u = hex4(p + 2);
                if (u < 0) {
                    x->p = p;
                    return fail(x, "invalid \\u escape in string");
                }
                p += 6;
                if (u >= 0xDC00 && u <= 0xDFFF) {
                    x->p = p;
                    return fail(x, "lone low surrogate in string");
                }
                if (u >= 0xD800 && u <= 0xDBFF) {
                    if (end - p < 6)
                        goto cut;
                    long lo = (p[0] == '\\' && p[1] == 'u') ? hex4(p + 2) : -1;
                    if (lo < 0xDC00 || lo > 0xDFFF) {
                        x->p = p;
                        return fail(x, "unpaired high surrogate in string");
                    }
                    p += 6;
                }
                continue;
            }
            default:
                x->p = p;
                return fail(x, "invalid escape in string");
            }
        }
        if (c < 0x20) {
            x->p = p;
            return fail(x, "control character in string");
        }
        if (c >= 0x80) {
            int k = utf8_seq(p, end);
            if (k < 0)
                goto cut;
            if (k == 0) {
                x->p = p;
                return fail(x, "invalid UTF-8 in string");
            }
            p += k;
            continue;
        }
        p++;
    }
    *raw_off = (size_t)(start - x->base);
    *raw_len = (size_t)(p - start);
    *esc = has_esc;
    x->p = p + 1;
    return 0;
cut:
    x->p = end;
    x->incomplete = 1;
    return -1;
}

static inline int is_digit(uint8_t c) { return c >= '0' && c <= '9'; }

static int scan_number(scan *x)
{
    const uint8_t *p = x->p, *end = x->end;
    if (*p == '-')
        p++;
    if (p >= end)
        goto cut;
    if (*p == '0') {
        p++;
    } else if (*p >= '1' && *p <= '9') {
        while (p < end && is_digit(*p))
            p++;
    } else {
        x->p = p;
        return fail(x, "invalid number");
    }
    if (p < end && *p == '.') {
        p++;
        if (p >= end)
            goto cut;
        if (!is_digit(*p)) {
            x->p = p;
            return fail(x, "invalid number: no digit after '.'");
        }
        while (p < end && is_digit(*p))
            p++;
    }
    if (p < end && (*p == 'e' || *p == 'E')) {
        p++;
        if (p < end && (*p == '+' || *p == '-'))
            p++;
        if (p >= end)
            goto cut;
        if (!is_digit(*p)) {
            x->p = p;
            return fail(x, "invalid number: bad exponent");
        }
        while (p < end && is_digit(*p))
            p++;
    }
    /* A number that touches the end of a partial buffer may go on. */
    if (p >= end && !x->final)
        goto cut;
    x->p = p;
    return 0;
cut:
    x->p = end;
    x->incomplete = 1;
    return -1;
}

static int scan_literal(scan *x, const char *word, size_t n)
{
    size_t avail = (size_t)(x->end - x->p);
    size_t cmp = avail < n ? avail : n;
    if (memcmp(x->p, word, cmp) != 0)
        return fail(x, "invalid literal");
    if (avail < n) {
        x->p = x->end;
        x->incomplete = 1;
        return -1;
    }
    x->p += n;
    return 0;
}

static int scan_value(scan *x, int node, int depth, sk_json_value *cap);

/* Skim mode: skip to the end of the container that closes the `open`
 * containers enclosing x->p (open 0: x->p is at a '{' or '[' and that
 * container is skipped). Outside any string. Only strings (with escapes)
 * and brackets are tracked; nothing is validated or decoded. 64 bytes per
 * step: quote, backslash and bracket masks, escaped quotes removed, string
 * interiors found by a prefix XOR of the quotes, and brackets counted as a
 * whole unless the count may reach zero in this block. */
static int skip_structure(scan *x, int64_t open)
{
    const uint8_t *from = x->p, *p = x->p, *end = x->end;
    uint64_t in_str = 0;  /* all ones: the previous block ended in a string */
    uint64_t esc_in = 0;  /* bit 0: the first byte is escaped */
    uint8_t tail[64];
    while (p < end) {
        const uint8_t *blk = p;
        size_t avail = (size_t)(end - p);
        if (avail < 64) {
            memset(tail, ' ', sizeof tail);
            memcpy(tail, p, avail);
            blk = tail;
        }
        block_masks m;
        classify64(blk, &m);
        uint64_t esc = esc_in, esc_next = 0;
        if (m.bslash | esc_in) {
            uint64_t b = m.bslash;
            while (b) {
                int i = __builtin_ctzll(b);
                b &= b - 1;
                if (esc >> i & 1)
                    continue; /* an escaped backslash */
                if (i == 63)
                    esc_next = 1;
                else
                    esc |= 1ULL << (i + 1);
            }
        }
        uint64_t quotes = m.quote & ~esc;
        uint64_t str = prefix_xor(quotes) ^ in_str;
        uint64_t op = m.open & ~str, cl = m.close & ~str;
        int nc = sparse_count(cl);
        if (nc < open) {
            open += sparse_count(op) - nc;
        } else {
            uint64_t all = op | cl;
            while (all) {
                int i = __builtin_ctzll(all);
                all &= all - 1;
                open += (op >> i & 1) ? 1 : -1;
                if (open == 0) {
                    if ((size_t)i >= avail)
                        break;
                    x->p = p + i + 1;
                    /* skimmed bytes are not classified: look for a line
                     * feed only while none is known */
                    if (!(x->ws_seen & WS_LF) &&
                        memchr(from, '\n', (size_t)(x->p - from)))
                        x->ws_seen |= WS_LF;
                    return 0;
                }
            }
        }
        in_str = (uint64_t)0 - (str >> 63);
        esc_in = esc_next;
        p += avail < 64 ? avail : 64;
    }
    x->p = end;
    x->incomplete = 1;
    return -1;
}

/* Skim mode on newline-delimited input: every group is settled, and the
 * record ends with its line, so the rest is found with memchr instead of
 * the structural scan. x->p goes just past the line's last non-blank byte,
 * which must close the record. */
static int skip_line(scan *x)
{
    const uint8_t *nl = memchr(x->p, '\n', (size_t)(x->end - x->p));
    const uint8_t *e = nl ? nl : x->end;
    if (!nl && !x->final) {
        x->p = x->end;
        x->incomplete = 1;
        return -1;
    }
    while (e > x->p && ws_table[e[-1]])
        e--;
    if (e == x->p || e[-1] != '}') {
        x->p = e;
        return fail(x, "format: jsonl, but the line does not end its "
                       "record");
    }
    x->p = e;
    return 0;
}

/* Skim mode: a value was captured for a path; settle its groups. */
static inline void settle(scan *x, const sk_json_value *cap, uint8_t type)
{
    size_t slot = (size_t)(cap - x->vals);
    const sk_peek_spec *s = x->spec;
    if (!s->settles[slot] || (x->found >> slot & 1))
        return;
    if (s->settle_kind[slot] == SK_SETTLE_SCALAR &&
        !(type == SK_JSON_NUMBER || type == SK_JSON_TRUE ||
          type == SK_JSON_FALSE || (type == SK_JSON_STRING && cap->len > 0)))
        return;
    x->found |= 1u << slot;
    x->need -= s->settles[slot];
    if (x->need == 0)
        x->stop = SKIM_SETTLED;
}

/* Looks up a member name among node's children, decoding escapes first. */
static int member_child(scan *x, int node, size_t off, size_t len, int esc)
{
    const uint8_t *name = x->base + off;
    uint8_t tmp[1024];
    if (esc) {
        if (len > sizeof tmp)
            return -1; /* no configured segment is that long */
        len = sk_json_unescape(name, len, tmp);
        name = tmp;
    }
    return spec_child(x->spec, node, name, len);
}

static int scan_object(scan *x, int node, int depth)
{
    x->p++; /* '{' */
    skip_ws(x);
    NEED(x);
    if (*x->p == '}') {
        x->p++;
        return 0;
    }
    for (;;) {
        if (*x->p != '"')
            return fail(x, "expected a string as object key");
        size_t koff, klen;
        int kesc;
        if (scan_string(x, &koff, &klen, &kesc))
            return -1;
        skip_ws(x);
        NEED(x);
        if (*x->p != ':')
            return fail(x, "expected ':' after object key");
        x->p++;
        skip_ws(x);
        NEED(x);
        int child = -1;
        if (node >= 0 && x->spec->nodes[node].first_child >= 0)
            child = member_child(x, node, koff, klen, kesc);
        sk_json_value *cap = NULL;
        if (child >= 0 && x->spec->nodes[child].slot >= 0)
            cap = &x->vals[x->spec->nodes[child].slot];
        if (scan_value(x, child, depth + 1, cap))
            return -1;
        if (x->stop != SKIM_READING) {
            /* Every group is settled: the rest of the record is skipped. */
            if (x->stop == SKIM_SETTLED) {
                x->stop = SKIM_SKIPPED;
                return x->spec->lines ? skip_line(x)
                                      : skip_structure(x, depth);
            }
            return 0;
        }
        skip_ws(x);
        NEED(x);
        if (*x->p == ',') {
            x->p++;
            skip_ws(x);
            NEED(x);
            continue;
        }
        if (*x->p == '}') {
            x->p++;
            return 0;
        }
        return fail(x, "expected ',' or '}' in object");
    }
}

static int scan_array(scan *x, int depth)
{
    x->p++; /* '[' */
    skip_ws(x);
    NEED(x);
    if (*x->p == ']') {
        x->p++;
        return 0;
    }
    for (;;) {
        if (scan_value(x, -1, depth + 1, NULL))
            return -1;
        skip_ws(x);
        NEED(x);
        if (*x->p == ',') {
            x->p++;
            skip_ws(x);
            NEED(x);
            continue;
        }
        if (*x->p == ']') {
            x->p++;
            return 0;
        }
        return fail(x, "expected ',' or ']' in array");
    }
}

/* x->p is at the value's first byte (within bounds). node is the trie node
 * this value sits at (-1 when no path goes through it); cap, if not NULL,
 * receives the value's type and span. */
static int scan_value(scan *x, int node, int depth, sk_json_value *cap)
{
    if (depth > SK_JSON_MAX_DEPTH)
        return fail(x, "nesting deeper than 512 levels");
    const uint8_t *start = x->p;
    uint8_t type;
    int rc;
    size_t soff = 0, slen = 0;
    int esc = 0;
    switch (*x->p) {
    case '{':
        type = SK_JSON_OBJECT;
        if (x->spec && x->spec->skim &&
            (node < 0 || x->spec->nodes[node].first_child < 0))
            rc = skip_structure(x, 0); /* no path enters it */
        else
            rc = scan_object(x, node, depth);
        break;
    case '[':
        type = SK_JSON_ARRAY;
        if (x->spec && x->spec->skim)
            rc = skip_structure(x, 0); /* paths never enter arrays */
        else
            rc = scan_array(x, depth);
        break;
    case '"':
        type = SK_JSON_STRING;
        rc = scan_string(x, &soff, &slen, &esc);
        break;
    case 't':
        type = SK_JSON_TRUE;
        rc = scan_literal(x, "true", 4);
        break;
    case 'f':
        type = SK_JSON_FALSE;
        rc = scan_literal(x, "false", 5);
        break;
    case 'n':
        type = SK_JSON_NULL;
        rc = scan_literal(x, "null", 4);
        break;
    default:
        if (*x->p == '-' || is_digit(*x->p)) {
            type = SK_JSON_NUMBER;
            rc = scan_number(x);
        } else {
            return fail(x, "unexpected byte where a value should start");
        }
    }
    if (rc)
        return rc;
    if (cap) {
        cap->type = type;
        cap->has_escapes = (uint8_t)esc;
        if (type == SK_JSON_STRING) {
            cap->off = soff;
            cap->len = slen;
        } else {
            cap->off = (size_t)(start - x->base);
            cap->len = (size_t)(x->p - start);
        }
        if (x->need > 0)
            settle(x, cap, type);
    }
    return 0;
}

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
    if (x.p < x.end && *x.p == '}') {
        x.p++;
        skip_ws(&x);
        return x.p == x.end ? 0 : -1;
    }
    for (;;) {
        if (x.p >= x.end || *x.p != '"')
            return -1;
        sk_json_member m;
        if (scan_string(&x, &m.name_off, &m.name_len, &m.name_escapes))
            return -1;
        skip_ws(&x);
        if (x.p >= x.end || *x.p != ':')
            return -1;
        x.p++;
        skip_ws(&x);
        if (x.p >= x.end || scan_value(&x, -1, 2, &cap))
            return -1;
        m.value = cap;
        int rc = fn(ud, &m);
        if (rc)
            return rc;
        skip_ws(&x);
        if (x.p >= x.end)
            return -1;
        if (*x.p == ',') {
            x.p++;
            skip_ws(&x);
            continue;
        }
        if (*x.p != '}')
            return -1;
        x.p++;
        skip_ws(&x);
        return x.p == x.end ? 0 : -1;
    }
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

sk_json_rc sk_json_next(sk_json_framer *f, const sk_peek_spec *spec,
                        const uint8_t *buf, size_t len, size_t *pos, int final,
                        sk_json_record *out)
{
    size_t i = *pos;
    for (;;) {
        while (i < len && ws_table[buf[i]])
            i++;
        if (i >= len) {
            *pos = len;
            return SK_JSON_END;
        }
        uint8_t c = buf[i];
        if (f->in_array) {
            if (c == ']') {
                f->in_array = f->want_comma = 0;
                i++;
                continue;
            }
            if (c == ',') {
                /* Also tolerated after a resync, where the comma that
                 * followed a dead-lettered element starts the line. */
                f->want_comma = 0;
                i++;
                continue;
            }
            if (f->want_comma)
                goto bad_here;
        } else if (c == '[') {
            f->in_array = 1;
            f->want_comma = 0;
            i++;
            continue;
        }
        break;
    }

    scan x = {.base = buf, .p = buf + i, .end = buf + len, .spec = spec,
              .vals = out->values, .final = final,
              .need = spec && spec->skim ? spec->need : -1};
    size_t nvals = sk_peek_spec_count(spec);
    for (size_t k = 0; k < nvals; k++)
        out->values[k].type = SK_JSON_NONE;
    int root = spec ? 0 : -1;
    if (scan_value(&x, root, 1, NULL) == 0) {
        out->start = i;
        out->end = (size_t)(x.p - buf);
        out->multiline = (x.ws_seen & WS_LF) != 0;
        *pos = out->end;
        if (f->in_array)
            f->want_comma = 1;
        return SK_JSON_RECORD;
    }
    if (x.incomplete && !final) {
        *pos = i;
        out->start = i;
        return SK_JSON_NEED_MORE;
    }
    out->reason = x.err ? x.err : "truncated record";
    {
        /* Resync. Outside an array the next record is taken to start at a
         * line beginning with '{' or '[': that keeps one truncated JSONL
         * line from swallowing the good line after it, and keeps a broken
         * pretty-printed record in one piece. Inside an array, elements
         * are indented, so the span runs to the newline after the error. */
        size_t e = x.p ? (size_t)(x.p - buf) : i;
        if (e < i)
            e = i;
        size_t stop, resume;
        int found = resync_span(f->in_array, buf, len, i, e, &stop, &resume);
        if (!found && !final) {
            *pos = i;
            out->start = i;
            return SK_JSON_NEED_MORE;
        }
        while (stop > i + 1 && ws_table[buf[stop - 1]])
            stop--; /* trailing whitespace is not part of the bad bytes */
        out->start = i;
        out->end = stop > i ? stop : i + 1;
        *pos = resume;
        if (f->in_array)
            f->want_comma = 0;
        return SK_JSON_ERROR;
    }

bad_here:;
    /* In an array, after an element, something other than ',' or ']'. */
    const uint8_t *nl = memchr(buf + i, '\n', len - i);
    if (!nl && !final) {
        *pos = i;
        out->start = i;
        return SK_JSON_NEED_MORE;
    }
    out->start = i;
    out->end = nl ? (size_t)(nl - buf) : len;
    out->reason = "expected ',' or ']' between top-level array elements";
    *pos = nl ? (size_t)(nl - buf) + 1 : len;
    f->want_comma = 0;
    return SK_JSON_ERROR;
}
