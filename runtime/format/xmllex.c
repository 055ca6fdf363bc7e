/* XML lexing for the framer: names, markup to skip, start and close tags,
 * and where a bad record's span ends. See xml_impl.h. */
#include <string.h>

#include "format/xml_impl.h"

/* A path segment against an element or attribute name: equal, or equal to
 * the part after the name's prefix. */
int xml_name_eq(const char *seg, size_t sl, const uint8_t *name, size_t n)
{
    if (sl == n && memcmp(seg, name, n) == 0)
        return 1;
    const uint8_t *colon = memchr(name, ':', n);
    if (!colon || memchr(seg, ':', sl))
        return 0;
    size_t local = n - (size_t)(colon + 1 - name);
    return sl == local && memcmp(seg, colon + 1, local) == 0;
}

int xml_starts(const uint8_t *p, size_t avail, const char *s)
{
    size_t n = strlen(s);
    return avail >= n && memcmp(p, s, n) == 0;
}

/* Finds `end` at or after i; returns the index past it, or 0 if absent. */
static size_t find(const uint8_t *buf, size_t len, size_t i, const char *end)
{
    size_t n = strlen(end);
    while (i < len) {
        const uint8_t *p = memchr(buf + i, end[0], len - i);
        if (!p)
            return 0;
        size_t k = (size_t)(p - buf);
        if (len - k < n)
            return 0;
        if (memcmp(p, end, n) == 0)
            return k + n;
        i = k + 1;
    }
    return 0;
}

/* At buf[i] == '<': skips a comment, PI, CDATA section or DOCTYPE. Returns
 * the index past it; 0 if it is none of these; SIZE_MAX if it is cut off. */
size_t xml_skip_markup(const uint8_t *buf, size_t len, size_t i)
{
    size_t avail = len - i;
    /* The end is looked for after the opening: "<!-->" does not close
     * where it opens. */
    const char *end = NULL;
    size_t from = 0;
    if (xml_starts(buf + i, avail, "<!--")) {
        end = "-->";
        from = i + 4;
    } else if (xml_starts(buf + i, avail, "<?")) {
        end = "?>";
        from = i + 2;
    } else if (xml_starts(buf + i, avail, "<![CDATA[")) {
        end = "]]>";
        from = i + 9;
    }
    if (!end && xml_starts(buf + i, avail, "<!")) {
        /* <!DOCTYPE ...> with an internal subset in brackets */
        int sq = 0;
        char quote = 0;
        for (size_t k = i + 2; k < len; k++) {
            uint8_t c = buf[k];
            if (quote) {
                if (c == (uint8_t)quote)
                    quote = 0;
            } else if (c == '"' || c == '\'') {
                quote = (char)c;
            } else if (c == '[') {
                sq++;
            } else if (c == ']') {
                sq--;
            } else if (c == '>' && sq <= 0) {
                return k + 1;
            }
        }
        return SIZE_MAX;
    } else if (avail < 2) {
        return SIZE_MAX; /* "<" at the end: not known yet */
    }
    if (!end)
        return 0;
    size_t e = find(buf, len, from, end);
    return e ? e : SIZE_MAX;
}


/* Parses a start tag at buf[i] == '<'. 0, -1 cut off, -2 malformed. */
int xml_parse_tag(const uint8_t *buf, size_t len, size_t i, tag *t)
{
    size_t k = i + 1;
    t->name_off = k;
    while (k < len && is_name(buf[k]))
        k++;
    if (k >= len)
        return -1;
    t->name_len = k - t->name_off;
    if (t->name_len == 0)
        return -2;
    t->nattrs = 0;
    for (;;) {
        int had_ws = 0;
        while (k < len && is_ws(buf[k])) {
            k++;
            had_ws = 1;
        }
        if (k >= len)
            return -1;
        if (buf[k] == '>') {
            t->end = k + 1;
            t->self_closing = 0;
            return 0;
        }
        if (buf[k] == '/') {
            if (k + 1 >= len)
                return -1;
            if (buf[k + 1] != '>')
                return -2;
            t->end = k + 2;
            t->self_closing = 1;
            return 0;
        }
        if (!had_ws || !is_name(buf[k]))
            return -2;
        size_t an = k;
        while (k < len && is_name(buf[k]))
            k++;
        size_t anl = k - an;
        while (k < len && is_ws(buf[k]))
            k++;
        if (k >= len)
            return -1;
        if (buf[k] != '=')
            return -2;
        k++;
        while (k < len && is_ws(buf[k]))
            k++;
        if (k >= len)
            return -1;
        uint8_t q = buf[k];
        if (q != '"' && q != '\'')
            return -2;
        const uint8_t *e = memchr(buf + k + 1, q, len - k - 1);
        if (!e)
            return -1;
        size_t vo = k + 1, vl = (size_t)(e - buf) - vo;
        if (memchr(buf + vo, '<', vl))
            return -2;
        if (t->nattrs < MAX_ATTRS)
            t->attrs[t->nattrs++] = (attr){an, anl, vo, vl};
        k = vo + vl + 1;
    }
}

/* At buf[i] == '<' and buf[i+1] == '/': the close tag's name and end.
 * 0, -1 cut off, -2 malformed. */
int xml_parse_close(const uint8_t *buf, size_t len, size_t i,
                       size_t *name_off, size_t *name_len, size_t *end)
{
    size_t k = i + 2;
    *name_off = k;
    while (k < len && is_name(buf[k]))
        k++;
    *name_len = k - *name_off;
    while (k < len && is_ws(buf[k]))
        k++;
    if (k >= len)
        return -1;
    if (buf[k] != '>' || *name_len == 0)
        return -2;
    *end = k + 1;
    return 0;
}

/* Error span of a bad record at start: to the next close tag of its own
 * name, else up to the root's close tag, else the end. 0, or -1 to wait
 * for more bytes. */
int xml_resync(const char *root, size_t root_len, const uint8_t *buf,
               size_t len, size_t start, size_t from, const uint8_t *name,
               size_t nl, int final, size_t *end)
{
    for (size_t i = from; i < len;) {
        const uint8_t *p = memchr(buf + i, '<', len - i);
        if (!p)
            break;
        size_t k = (size_t)(p - buf);
        if (k + 1 < len && buf[k + 1] == '/') {
            size_t no, nn, e;
            int rc = xml_parse_close(buf, len, k, &no, &nn, &e);
            if (rc == 0 && nn == nl && memcmp(buf + no, name, nl) == 0) {
                *end = e;
                return 0;
            }
            if (rc == 0 && nn == root_len &&
                memcmp(buf + no, root, nn) == 0 && k > start) {
                *end = k;
                return 0;
            }
        }
        i = k + 1;
    }
    if (!final)
        return -1;
    *end = len;
    return 0;
}
