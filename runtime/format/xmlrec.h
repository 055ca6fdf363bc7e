/* What the XML framer reports: its return codes and a record's span and
 * picked values. Shared by xmlpeek.h (the framer) and the files behind it
 * (xml_impl.h), so that those need not include the framer. */
#ifndef SK_XMLREC_H
#define SK_XMLREC_H

#include <stddef.h>
#include <stdint.h>

#include "format/json.h" /* SK_PEEK_MAX_PATHS */

#define SK_XML_MAX_DEPTH 256

/* The compiled routing paths (xmlpeek.h: sk_xml_spec_new). */
typedef struct sk_xml_spec sk_xml_spec;

typedef enum sk_xml_rc {
    SK_XML_RECORD = 1,    /* start/end and values are set */
    SK_XML_END = 2,       /* nothing but closing markup left */
    SK_XML_NEED_MORE = 3, /* scanning resumes at *pos with more bytes */
    SK_XML_ERROR = 4,     /* invalid bytes: start/end span them */
    SK_XML_HEADER = 5,    /* the root's start tag was read */
    SK_XML_NOMEM = 6
} sk_xml_rc;

/* A picked value: a raw span of the buffer. kind 0: absent; 1: an
 * attribute's value (between its quotes); 2: a leaf element's content. */
typedef struct sk_xml_value {
    uint8_t kind;
    size_t off, len;
} sk_xml_value;

typedef struct sk_xml_record {
    size_t start, end;
    const char *reason;
    sk_xml_value values[SK_PEEK_MAX_PATHS];
} sk_xml_record;

#endif
