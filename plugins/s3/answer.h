/* Reading S3's XML answers (answer.c). */
#ifndef SK_S3_ANSWER_H
#define SK_S3_ANSWER_H

#include <libxml/tree.h>
#include <stddef.h>

#include "ctx.h"

/* The text of n's first child element called name, into out (cap
 * bytes): out, or NULL (out "") when there is none. */
const char *s3_child_text(xmlNode *n, const char *name, char *out,
                          size_t cap);
/* The text of the first <name> element in body, with the quotes an ETag
 * comes in (plain or as &quot;) left out, into out (cap bytes); "" when
 * there is none or it does not fit. */
void s3_xml_value(const buf *body, const char *name, char *out, size_t cap);
/* The <Code> of an S3 error body, or "". */
void s3_error_code(const buf *b, char *out, size_t cap);
/* Whether body holds an <Error>: S3 may answer a Complete, an
 * UploadPartCopy or a multi-object Delete 200 and put its failure in the
 * body. 1 with the error's <Code> in code (cap bytes, "" when none). */
int s3_error_in_body(const buf *body, char *code, size_t cap);

#endif
