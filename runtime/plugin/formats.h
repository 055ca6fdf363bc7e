/* Record formats by name, and which pairs a copy can make (formats.c). */
#ifndef SK_PLUGIN_FORMATS_H
#define SK_PLUGIN_FORMATS_H


typedef enum sk_format {
    SK_FORMAT_AUTO = 0,
    SK_FORMAT_JSON,  /* any JSON framing; output: one record per line */
    SK_FORMAT_JSONL, /* source only: one record per line, nothing else */
    SK_FORMAT_CSV,   /* RFC 4180 rows under a header row (csvpeek.h) */
    SK_FORMAT_XML,   /* elements under a root (xmlpeek.h) */
} sk_format;

/* The format a name gives: "json", "jsonl" or "ndjson" (SK_FORMAT_JSONL:
 * one record per line), "csv", "xml", and "auto". -1 for any other name.
 * The one parser of format names (the format option, a document's). */
int sk_format_parse(const char *name);

/* NULL if records of format src can be written as format sink by a
 * pipeline with this validate setting (src SK_FORMAT_AUTO: not known until
 * each unit is read); else why not, a static string. */
const char *sk_format_pair_problem(sk_format src, sk_format sink,
                                   int validate);

#endif
