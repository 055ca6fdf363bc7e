/* XML framing and peeking.
 *
 * Records. A record is an element named by `xml_record_element` (at any
 * depth under the root; nested elements of the same name belong to the
 * record that holds them), or, without that option, each child element of
 * the root. Its bytes run from its '<' to the '>' that closes it. Text,
 * comments and processing instructions between records are not records.
 *
 * Header. The document's XML declaration (if any) and the root's start
 * tag, byte for byte, are the unit's header: an output object starts with
 * them, so namespace declarations survive, and ends with the root's close
 * tag. The header's hash is part of the slice's identity.
 *
 * Peeking. Paths are dotted: child elements by name (`detail.tenant_id`)
 * and attributes with '@' (`@type`, `detail.@id`), relative to the record
 * element; a prefixed name matches a path segment without the prefix too.
 * A value is an attribute's value or a leaf element's text; the first
 * occurrence counts, and an element with child elements is no scalar.
 * libxml2 decodes values that hold entities, character references, CDATA
 * or comments; plain text is only trimmed.
 *
 * Errors. A record whose elements do not nest (a close tag that does not
 * match, or none before the data ends) is an error span from its start to
 * the next close tag of its own name (else to the root's close tag, else to
 * the end), and scanning resumes after it.
 */
#ifndef SK_XMLPEEK_H
#define SK_XMLPEEK_H

#include <stddef.h>
#include <stdint.h>

#include "base/common.h"
#include "format/xmlrec.h"

#define SK_XML_NAMES 4096 /* bytes of ancestor names kept between records */

/* Compiles the routing paths. record_element: NULL or "" for the root's
 * children. Caller owns the result: sk_xml_spec_free(). NULL: out of
 * memory or a bad path. */
sk_xml_spec *sk_xml_spec_new(const char *const *paths, size_t n,
                             const char *record_element);
void sk_xml_spec_free(sk_xml_spec *s);

/* Where the framer is in a unit. */
typedef enum sk_xml_state {
    SK_XML_PROLOG = 0, /* before the root's start tag (a zeroed framer) */
    SK_XML_IN_ROOT,    /* between records, inside the root */
    SK_XML_AFTER_ROOT  /* the root closed, or an error ended the unit */
} sk_xml_state;

/* Framing state of one unit. Owns its header; sk_xml_framer_free(). */
typedef struct sk_xml_framer {
    sk_xml_state state;
    uint8_t *head;     /* declaration (if any), newline, root start tag */
    size_t head_len;
    uint64_t id;       /* sk_hash64 of head */
    size_t decl_off, decl_len; /* the declaration, while in the prolog */
    int have_decl;
    char root[256];    /* the root's name */
    size_t root_len;
    /* elements open between the root and the next record */
    int depth;
    uint16_t anc_len[SK_XML_MAX_DEPTH];
    char anc[SK_XML_NAMES];
    size_t anc_used;
} sk_xml_framer;

void sk_xml_framer_init(sk_xml_framer *f);
void sk_xml_framer_free(sk_xml_framer *f);

/* The next record (or the header) at or after *pos in buf[0..len); final:
 * no bytes follow. On RECORD, ERROR and HEADER *pos moves past what was
 * read; on NEED_MORE it is where scanning resumes. Allocates only for the
 * header. */
sk_xml_rc sk_xml_next(sk_xml_framer *f, const sk_xml_spec *spec,
                      const uint8_t *buf, size_t len, size_t *pos, int final,
                      sk_xml_record *out);

/* Appends value v's text, decoded (libxml2 where needed) and trimmed, to
 * out. SKIPPR_OK, SKIPPR_NOMEM, or SKIPPR_CORRUPT if it does not decode. */
int sk_xml_value_text(const uint8_t *buf, const sk_xml_value *v, skippr_buf *out);

/* 1 if libxml2 parses the record as well-formed inside the header's root
 * start tag (validate: true). */
int sk_xml_record_valid(const sk_xml_framer *f, const uint8_t *rec,
                        size_t len);

#endif
