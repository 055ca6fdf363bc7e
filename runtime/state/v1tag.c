/* Version 1 of the WAL's SLICE frame kept a data slice's tag as text after
 * a NUL in its key: "csv:<id>", "xml:<id>:<root>" or "json:multiline",
 * with <id> in 16 hex digits. A state folder written then is read through
 * this file, and every frame written since is typed (wal.c, SLICE). Only
 * replay.c calls it.
 *
 * Owns: nothing; *t's root points into the text.
 */
#include "state/slice.h"

#include <stdlib.h>
#include <string.h>

#define V1_CSV "csv:"
#define V1_XML "xml:"
#define V1_MULTILINE "json:multiline"
#define V1_KIND_LEN 4 /* "csv:", "xml:" */
#define V1_ID_DIGITS 16

static int tag_from_text(const char *text, size_t len, sk_slice_tag *t)
{
    *t = (sk_slice_tag){.form = SK_FORM_LINES};
    if (len == sizeof V1_MULTILINE - 1 &&
        memcmp(text, V1_MULTILINE, len) == 0) {
        t->form = SK_FORM_MULTILINE;
        return 0;
    }
    if (len < V1_KIND_LEN + V1_ID_DIGITS)
        return -1;
    if (memcmp(text, V1_CSV, V1_KIND_LEN) == 0)
        t->form = SK_FORM_CSV;
    else if (memcmp(text, V1_XML, V1_KIND_LEN) == 0)
        t->form = SK_FORM_XML;
    else
        return -1;
    char hex[V1_ID_DIGITS + 1], *end;
    memcpy(hex, text + V1_KIND_LEN, V1_ID_DIGITS);
    hex[V1_ID_DIGITS] = '\0';
    t->header_id = strtoull(hex, &end, 16);
    if (end != hex + V1_ID_DIGITS)
        return -1;
    size_t root_at = V1_KIND_LEN + V1_ID_DIGITS + 1; /* past "<id>:" */
    if (t->form == SK_FORM_XML) {
        if (len < root_at || text[root_at - 1] != ':' ||
            len - root_at > SK_SLICE_ROOT_MAX)
            return -1;
        t->root = text + root_at;
        t->root_len = len - root_at;
    } else if (len != V1_KIND_LEN + V1_ID_DIGITS) {
        return -1;
    }
    return 0;
}

int st_v1_key(const char *key, size_t klen, size_t *nlen, sk_slice_tag *t)
{
    *nlen = strnlen(key, klen);
    if (*nlen == klen) {
        *t = (sk_slice_tag){.form = SK_FORM_LINES};
        return 0;
    }
    return tag_from_text(key + *nlen + 1, klen - *nlen - 1, t);
}
