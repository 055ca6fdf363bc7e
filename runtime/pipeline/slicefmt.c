/* What a slice's format means for its object: its extension, the
 * conversion it needs for the sink, an XML root's close tag. Read from
 * the slice's tag (state/types.h) and the sink's format.
 *
 * Owns: nothing. Thread: any (pure functions of their arguments).
 */
#include "pipeline/engine.h"

#include <stdio.h>

#include "pipeline/shape.h"

int pl_slice_is_multiline(const sk_slice *s)
{
    return sk_slice_kind_of(s) == SK_SLICE_DATA &&
           sk_slice_tag_of(s)->form == SK_FORM_MULTILINE;
}

/* The extension of slice s's object. */
const char *pl_slice_ext(const engine *e, const sk_slice *s)
{
    if (sk_slice_kind_of(s) == SK_SLICE_DEAD)
        return ".bad";
    return pl_slice_is_multiline(s) ? ".json" : pl_shape_ext(e->shape);
}

/* The conversion a data slice of this form needs for this sink, if any:
 * a CSV slice (its key holds the header's id) to a jsonl sink, or a JSON
 * slice to a csv sink; pl_slice_conv: slice s's. */
sk_conv_kind pl_form_conv(const engine *e, sk_slice_form form)
{
    int sink_csv = e->sink->format == SK_FORMAT_CSV;
    if (form == SK_FORM_CSV && !sink_csv)
        return SK_CONV_CSV_JSONL;
    if (form != SK_FORM_CSV && form != SK_FORM_XML && sink_csv)
        return SK_CONV_JSON_CSV;
    return SK_CONV_NONE;
}

sk_conv_kind pl_slice_conv(const engine *e, const sk_slice *s)
{
    return sk_slice_kind_of(s) == SK_SLICE_DATA
               ? pl_form_conv(e, sk_slice_tag_of(s)->form)
               : SK_CONV_NONE;
}

/* An XML slice's object ends with its root's close tag, which its tag
 * names. 0 if s is none. */
size_t pl_xml_trailer(const sk_slice *s, char *out, size_t cap)
{
    const sk_slice_tag *t = sk_slice_tag_of(s);
    if (sk_slice_kind_of(s) != SK_SLICE_DATA || t->form != SK_FORM_XML ||
        !t->root)
        return 0;
    int n = snprintf(out, cap, "</%.*s>\n", (int)t->root_len, t->root);
    return n > 0 && (size_t)n < cap ? (size_t)n : 0;
}
