/* CSV framing and peeking (RFC 4180).
 *
 * Records. One record is one row's bytes, without its terminator (LF, CRLF
 * or a lone CR). A cell may be quoted; a quoted cell may hold the
 * delimiter, doubled quotes and line breaks. The delimiter is one byte:
 * ',', ';', tab or '|'. Blank lines between rows are skipped. A leading
 * UTF-8 BOM is the caller's to skip (sk_json_skip_bom() serves).
 *
 * Header. The first row of a unit names the columns, unless the columns
 * were configured (sk_csv_framer_set_columns: files without a header row).
 * Routing paths are column names. The header row's bytes identify the
 * slice a row goes to, so rows under different headers never share an
 * output object, and each object starts with its own header.
 *
 * Spans come from this scanner; the cells that routing picks, and the
 * header's names, are decoded by libcsv.
 *
 * Errors. A row whose cell count differs from the header's, a quote that
 * never closes, or text after a closing quote is reported with a span from
 * the row's first byte to its end (for an unclosed quote: to the end of
 * the row's first line), and scanning resumes after it, so the rest of the
 * unit still copies.
 */
#ifndef SK_CSVPEEK_H
#define SK_CSVPEEK_H

#include <stddef.h>
#include <stdint.h>

#include "base/common.h"
#include "format/json.h" /* SK_PEEK_MAX_PATHS */

#define SK_CSV_MAX_COLUMNS 65536

/* A unit's columns: where each routing path's column is. */
typedef struct sk_csv_header {
    uint8_t *row;   /* the header row's bytes, owned; synthesized from the
                     * configured names when the files have no header */
    size_t row_len;
    uint64_t id;    /* sk_hash64 of row: part of the slice's identity */
    size_t ncols;
    int32_t col_of[SK_PEEK_MAX_PATHS]; /* column of path i, or -1 */
    uint8_t *wanted; /* ncols flags: some path reads this column (owned) */
} sk_csv_header;

/* Framing state of one unit. Owns its header; sk_csv_framer_free(). */
typedef struct sk_csv_framer {
    uint8_t delim;
    int fixed;      /* columns configured: every row is a data row */
    int have_header;
    sk_csv_header hdr;
} sk_csv_framer;

typedef enum sk_csv_rc {
    SK_CSV_RECORD = 1,    /* a data row: start/end and cells are set */
    SK_CSV_END = 2,       /* nothing but blank lines left */
    SK_CSV_NEED_MORE = 3, /* a row starts at start but is cut off */
    SK_CSV_ERROR = 4,     /* invalid row: start/end span it, see reason */
    SK_CSV_HEADER = 5,    /* the unit's header row: the framer took it */
    SK_CSV_NOMEM = 6      /* the header could not be stored */
} sk_csv_rc;

typedef struct sk_csv_cell {
    size_t off, len; /* raw span in the buffer, quotes included */
    int present;     /* the row has this path's column */
} sk_csv_cell;

typedef struct sk_csv_record {
    size_t start, end;  /* [start, end), without the terminator */
    const char *reason; /* static string, for SK_CSV_ERROR */
    sk_csv_cell cells[SK_PEEK_MAX_PATHS];
} sk_csv_record;

/* delim: ',', ';', '\t' or '|'. */
void sk_csv_framer_init(sk_csv_framer *f, uint8_t delim);
void sk_csv_framer_free(sk_csv_framer *f);

/* For files without a header row: the columns are names[0..n), and the
 * header written at the top of each output object is made from them
 * (quoted where RFC 4180 needs it). paths are the routing paths. Returns
 * SKIPPR_OK, SKIPPR_NOMEM or SKIPPR_INVAL (no names, too many). */
int sk_csv_framer_set_columns(sk_csv_framer *f, const char *const *names,
                              size_t n, const char *const *paths,
                              size_t npaths);

/* The next row at or after *pos in buf[0..len). final: no bytes follow
 * buf. paths (npaths of them) are the routing paths, matched against the
 * header's names. On SK_CSV_RECORD, SK_CSV_ERROR and SK_CSV_HEADER *pos
 * moves past the row and its terminator; on SK_CSV_NEED_MORE it stays at
 * the row's start. A header row that cannot be read is an error, and the
 * next row is tried as the header. Allocates only to store a header. */
sk_csv_rc sk_csv_next(sk_csv_framer *f, const char *const *paths, size_t npaths,
                const uint8_t *buf, size_t len, size_t *pos, int final,
                sk_csv_record *out);

/* Decodes one raw cell (quoted or not) with libcsv. */
typedef struct sk_csv_decoder sk_csv_decoder;

/* Caller owns the result: sk_csv_decoder_free(). NULL: out of memory. */
sk_csv_decoder *sk_csv_decoder_new(uint8_t delim);
void sk_csv_decoder_free(sk_csv_decoder *d);

/* Appends the cell's decoded text to out. SKIPPR_OK, SKIPPR_NOMEM, or
 * SKIPPR_CORRUPT when the bytes are not one cell. */
int sk_csv_decode_cell(sk_csv_decoder *d, const uint8_t *raw, size_t n,
                       skippr_buf *out);

/* Parses a delimiter option: ",", ";", "|", "tab" or a tab character.
 * Returns the byte, or 0 if it is not one of these. */
uint8_t sk_csv_delim_parse(const char *s);

#endif
