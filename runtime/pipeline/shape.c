/* What records look like on both ends (shape.h): made once from the
 * router, the source and the sink; then read by the framing tasks and
 * the pipeline thread.
 *
 * Owns: its struct, the XML spec, the column names, the compacting
 * buffer. Thread: read-only once made, but for the multiline counts and
 * the compacting buffer (the pipeline thread).
 */
#include "pipeline/shape.h"

#include <string.h>

#include "base/common.h"
#include "format/csvpeek.h"
#include "format/jsontext.h"

struct pl_shape {
    const char *const *paths; /* the router's */
    size_t npaths;
    sk_xml_spec *xml_spec;
    char **csv_cols; /* NULL: the files have a header row */
    size_t ncsv_cols;
    const char *ext;
    int lines_only;  /* the sink writes .jsonl objects */
    uint64_t multiline_json, multiline_compacted;
    skippr_buf compact; /* one compacted record */
};

/* The source's csv_columns, split at commas into sh->csv_cols. */
static int split_columns(pl_shape *sh, const sk_instance *src)
{
    const char *cols = src->csv_columns;
    if (!cols)
        return SKIPPR_OK;
    size_t n = 1;
    for (const char *c = cols; *c; c++)
        n += *c == ',';
    if (n > SK_CSV_MAX_COLUMNS) {
        sk_error("%s: csv_columns names more than %d columns", src->label,
                 SK_CSV_MAX_COLUMNS);
        return SKIPPR_INVAL;
    }
    if (!(sh->csv_cols = sk_calloc(n, sizeof *sh->csv_cols)))
        return SKIPPR_NOMEM;
    const char *p = cols;
    for (size_t i = 0; i < n; i++) {
        const char *c = strchr(p, ',');
        size_t len = c ? (size_t)(c - p) : strlen(p);
        if (!(sh->csv_cols[i] = sk_strndup(p, len)))
            return SKIPPR_NOMEM;
        sh->ncsv_cols = i + 1;
        p = c ? c + 1 : p + len;
    }
    return SKIPPR_OK;
}

int pl_shape_new(const sk_router *r, const sk_instance *src,
                 const sk_instance *sink, int takes_records,
                 size_t max_record_bytes, pl_shape **out)
{
    *out = NULL;
    pl_shape *sh = sk_calloc(1, sizeof *sh);
    if (!sh) {
        sk_error("out of memory");
        return SKIPPR_NOMEM;
    }
    sh->paths = sk_router_paths(r, &sh->npaths);
    sh->ext = sink->format == SK_FORMAT_CSV   ? ".csv"
              : sink->format == SK_FORMAT_XML ? ".xml"
                                              : ".jsonl";
    sh->lines_only = strcmp(sh->ext, ".jsonl") == 0 && !takes_records;
    skippr_buf_init(&sh->compact, max_record_bytes + 1);
    int rc = SKIPPR_OK;
    sh->xml_spec = sk_xml_spec_new(sh->paths, sh->npaths,
                                   src->xml_record_element);
    if (!sh->xml_spec) {
        sk_error("transform: a path cannot be read in XML (an '@' segment "
                 "must be the last)");
        rc = SKIPPR_INVAL;
    } else if ((rc = split_columns(sh, src)) == SKIPPR_NOMEM) {
        sk_error("out of memory");
    }
    if (rc) {
        pl_shape_free(sh);
        return rc;
    }
    *out = sh;
    return SKIPPR_OK;
}

void pl_shape_free(pl_shape *sh)
{
    if (!sh)
        return;
    sk_xml_spec_free(sh->xml_spec);
    for (size_t i = 0; i < sh->ncsv_cols; i++)
        sk_free(sh->csv_cols[i]);
    sk_free(sh->csv_cols);
    skippr_buf_free(&sh->compact);
    sk_free(sh);
}

const char *const *pl_shape_paths(const pl_shape *sh, size_t *n)
{
    *n = sh->npaths;
    return sh->paths;
}

const sk_xml_spec *pl_shape_xml(const pl_shape *sh)
{
    return sh->xml_spec;
}

const char *const *pl_shape_csv_columns(const pl_shape *sh, size_t *n)
{
    *n = sh->ncsv_cols;
    return (const char *const *)sh->csv_cols;
}

const char *pl_shape_ext(const pl_shape *sh)
{
    return sh->ext;
}

int pl_shape_lines_only(const pl_shape *sh)
{
    return sh->lines_only;
}

int pl_shape_compact(pl_shape *sh, const uint8_t *rec, size_t len,
                     const uint8_t **out, size_t *out_len)
{
    skippr_buf_reset(&sh->compact);
    int rc = skippr_buf_reserve(&sh->compact, len);
    if (rc)
        return rc;
    *out_len = sk_json_compact(rec, len, sh->compact.data);
    *out = sh->compact.data;
    return SKIPPR_OK;
}

void pl_shape_count_multiline(pl_shape *sh, int compacted)
{
    if (compacted)
        sh->multiline_compacted++;
    else
        sh->multiline_json++;
}

void pl_shape_multiline_counts(const pl_shape *sh, uint64_t *json,
                               uint64_t *compacted)
{
    *json = sh->multiline_json;
    *compacted = sh->multiline_compacted;
}
