/* What records look like on both ends (shape.c): the routing paths by
 * the source's format (JSON paths and CSV column names, the compiled XML
 * paths), the source's csv_columns, the data objects' extension, and the
 * multiline_records rule for JSON records that hold a line feed when the
 * sink writes .jsonl objects, with its counts.
 *
 * Owns: its struct, the XML spec, the column names and the compacting
 * buffer; the paths are the router's. pipeline.c makes and frees it.
 * Thread: made before the pool starts and read-only after, but for the
 * multiline counts and the compacting buffer (the pipeline thread).
 */
#ifndef SK_PIPELINE_SHAPE_H
#define SK_PIPELINE_SHAPE_H

#include <stddef.h>
#include <stdint.h>

#include "format/xmlpeek.h"
#include "plugin/instance.h"
#include "route/route.h"

typedef struct pl_shape pl_shape;

/* The shape of a run from router r, source src and sink (takes_records:
 * the sink is given one record a call, so no object holds lines);
 * max_record_bytes bounds the compacting buffer. SKIPPR_OK with *out the
 * caller's (pl_shape_free); else an error line was logged. */
int pl_shape_new(const sk_router *r, const sk_instance *src,
                 const sk_instance *sink, int takes_records,
                 size_t max_record_bytes, pl_shape **out);
void pl_shape_free(pl_shape *sh);

/* The routing paths (the router's), n of them. */
const char *const *pl_shape_paths(const pl_shape *sh, size_t *n);
/* The routing paths compiled for XML records. */
const sk_xml_spec *pl_shape_xml(const pl_shape *sh);
/* The source's csv_columns (n of them), or NULL when its files have a
 * header row. */
const char *const *pl_shape_csv_columns(const pl_shape *sh, size_t *n);
/* The data objects' extension: ".jsonl", ".csv" or ".xml". */
const char *pl_shape_ext(const pl_shape *sh);
/* Non-zero when a JSON record that spans lines cannot be one line of its
 * object: the sink writes .jsonl objects. */
int pl_shape_lines_only(const pl_shape *sh);

/* Record rec[0..len) compacted to one line (sk_json_compact) into
 * (*out)[0..*out_len), valid until the next call. SKIPPR_OK, or the
 * buffer's failure (out of memory, longer than max_record_bytes). */
int pl_shape_compact(pl_shape *sh, const uint8_t *rec, size_t len,
                     const uint8_t **out, size_t *out_len);
/* Count one record that spans lines: put in a .json object, or compacted. */
void pl_shape_count_multiline(pl_shape *sh, int compacted);
void pl_shape_multiline_counts(const pl_shape *sh, uint64_t *json,
                               uint64_t *compacted);

#endif
