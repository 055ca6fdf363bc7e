/* Conversions on purpose, when a slice's records and the sink's format
 * differ (DESIGN section 4):
 *
 * json -> csv. One column per top-level key; the header is the union of
 * the slice's keys in first-seen order, so the converter first learns from
 * every record (sk_conv_learn), then writes. A string cell is the decoded
 * string, a number keeps its lexeme, true and false are themselves, null
 * and a missing key are empty, and a nested object or array is compact
 * JSON made by removing the whitespace outside strings from its raw bytes.
 * Cells are quoted per RFC 4180 when they hold a comma, a quote, CR or LF.
 *
 * csv -> jsonl. A CSV slice's first record is its header row. Each later
 * row becomes one JSON object of string values, keyed by the header's
 * names in order (a repeated name gets a suffix: "a", "a_2"), made by
 * jansson.
 *
 * The output is a pure function of the slice's records, so a seal can
 * measure it (size and CRC) and a later delivery, even after a restart,
 * writes exactly those bytes.
 */
#ifndef SK_CONVERT_H
#define SK_CONVERT_H

#include <stddef.h>
#include <stdint.h>

#include "base/common.h"

typedef enum sk_conv_kind {
    SK_CONV_NONE = 0,
    SK_CONV_JSON_CSV,
    SK_CONV_CSV_JSONL
} sk_conv_kind;

typedef struct sk_conv sk_conv;

/* delim: the CSV source's delimiter (csv -> jsonl). Caller owns the
 * result: sk_conv_free(). NULL: out of memory. */
sk_conv *sk_conv_new(sk_conv_kind kind, uint8_t delim);
void sk_conv_free(sk_conv *c);

/* Whether sk_conv_learn must see every record before output starts. */
int sk_conv_needs_learning(const sk_conv *c);

/* json -> csv: note the record's top-level keys. SKIPPR_CORRUPT (and a
 * reason in *why) if the record is not a JSON object. */
int sk_conv_learn(sk_conv *c, const uint8_t *rec, size_t len,
                  const char **why);

/* Appends to out what the object starts with (json -> csv: the header
 * row). Call once, after learning and before the first record. */
int sk_conv_begin(sk_conv *c, skippr_buf *out);

/* Appends record rec's output (with its line end; nothing for a CSV
 * slice's header row) to out. SKIPPR_CORRUPT, with *why set, if the
 * record cannot be converted. */
int sk_conv_record(sk_conv *c, const uint8_t *rec, size_t len, skippr_buf *out,
                   const char **why);

#endif
