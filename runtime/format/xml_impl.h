/* The XML framer's private parts, shared by xmlpeek.c (the framer: the
 * prolog, the way down to the records, the header), xmllex.c (tags and
 * markup) and xmlwalk.c (one record's elements and the values its paths
 * find). xmlpeek.h does not include it; nothing outside these three does.
 */
#ifndef SKIPPR_FORMAT_XML_IMPL_H
#define SKIPPR_FORMAT_XML_IMPL_H

#include <stddef.h>
#include <stdint.h>

#include "base/common.h"
#include "format/xmlrec.h"

#define MAX_SEGS 16
#define MAX_ATTRS 64

#define MAX_SEGS 16
#define MAX_ATTRS 64

struct sk_xml_spec {
    size_t npaths;
    int nseg[SK_PEEK_MAX_PATHS];
    int attr[SK_PEEK_MAX_PATHS]; /* the last segment is @name */
    const char *seg[SK_PEEK_MAX_PATHS][MAX_SEGS]; /* into text, no '@' */
    size_t seglen[SK_PEEK_MAX_PATHS][MAX_SEGS];
    char *text;
    char *rec; /* record element name, or NULL */
    size_t rec_len;
};

static inline int is_ws(uint8_t c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

static inline int is_name(uint8_t c)
{
    return c >= 0x80 || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
           (c >= '0' && c <= '9') || c == '_' || c == ':' || c == '.' ||
           c == '-';
}

typedef struct attr {
    size_t name_off, name_len, val_off, val_len;
} attr;

typedef struct tag {
    size_t name_off, name_len;
    size_t end;      /* past the '>' */
    int self_closing;
    attr attrs[MAX_ATTRS];
    int nattrs;      /* the first MAX_ATTRS */
} tag;

/* ---- xmllex.c -------------------------------------------------------------- */

/* A path segment against an element or attribute name: equal, or equal to
 * the part after the name's prefix. */
int xml_name_eq(const char *seg, size_t sl, const uint8_t *name, size_t n);
/* p (avail bytes) starts with the text s. */
int xml_starts(const uint8_t *p, size_t avail, const char *s);
/* At buf[i] == '<': skips a comment, PI, CDATA section or DOCTYPE. The
 * index past it; 0 when buf[i] starts none; SIZE_MAX when its end is not
 * in buf yet. */
size_t xml_skip_markup(const uint8_t *buf, size_t len, size_t i);
/* A start tag at buf[i] == '<' into *t. 0, -1 cut off, -2 malformed. */
int xml_parse_tag(const uint8_t *buf, size_t len, size_t i, tag *t);
/* At buf[i] == '<' and buf[i+1] == '/': the close tag's name
 * buf[*name_off, +*name_len) and the index past it. 0, -1, -2 as above. */
int xml_parse_close(const uint8_t *buf, size_t len, size_t i,
                    size_t *name_off, size_t *name_len, size_t *end);
/* Error span of a bad record at start: to the next close tag of its own
 * name, else up to the root's close tag, else the end. 0, or -1 to wait
 * for more bytes. */
int xml_resync(const char *root, size_t root_len, const uint8_t *buf,
               size_t len, size_t start, size_t from, const uint8_t *name,
               size_t nl, int final, size_t *end);

/* ---- xmlwalk.c ------------------------------------------------------------- */

/* A record from buf[start] == '<' into *out (spans into buf; nothing
 * allocated that outlives the call). RECORD (*pos past it), NEED_MORE
 * (*pos left at start), NOMEM, or ERROR: out->reason says why, and *pos
 * is where the walk found it (the caller finds where the error's span
 * ends). */
sk_xml_rc xml_scan_record(const sk_xml_spec *s, const uint8_t *buf,
                          size_t len, size_t start, int final, size_t *pos,
                          sk_xml_record *out);

#endif
