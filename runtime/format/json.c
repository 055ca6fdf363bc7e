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

/* ---- for jsonframe.c (json_impl.h) ---------------------------------- */

int json_scan_record(scan *x, int root)
{
    return scan_value(x, root, 1, NULL);
}

int json_scan_member(scan *x, sk_json_member *m, sk_json_value *cap)
{
    if (x->p >= x->end || *x->p != '"')
        return -1;
    if (scan_string(x, &m->name_off, &m->name_len, &m->name_escapes))
        return -1;
    skip_ws(x);
    if (x->p >= x->end || *x->p != ':')
        return -1;
    x->p++;
    skip_ws(x);
    if (x->p >= x->end || scan_value(x, -1, 2, cap))
        return -1;
    m->value = *cap;
    return 0;
}
