/* The options the engine reads on every source and sink (commonopts.h). */
#include "plugin/commonopts.h"

#include <string.h>

const skippr_option sk_common_source_options[] = {
    {"format", SKIPPR_OPT_STRING, "auto", 0, 0,
     "Record format: auto (by the object's extension, else by its first "
     "byte), json, jsonl (one record per line), csv or xml."},
    {"csv_delimiter", SKIPPR_OPT_STRING, ",", 0, 0,
     "CSV cell delimiter: ',', ';', '|' or tab."},
    {"csv_columns", SKIPPR_OPT_STRING, NULL, 0, 0,
     "CSV column names, comma-separated, for files without a header row "
     "(every row is then data)."},
    {"xml_record_element", SKIPPR_OPT_STRING, NULL, 0, 0,
     "XML: the name of the elements that are records, at any depth "
     "(default: each child of the root)."},
    {NULL, 0, NULL, 0, 0, NULL}};

const skippr_option sk_common_sink_options[] = {
    {"format", SKIPPR_OPT_STRING, "jsonl", 0, 0,
     "Output format: jsonl (each record's exact bytes, then a newline) or "
     "csv (the source's header row, then each row's exact bytes and a "
     "newline) or xml (the source's declaration and root start tag, each "
     "record's exact bytes and a newline, the root's close tag)."},
    {NULL, 0, NULL, 0, 0, NULL}};

int sk_common_option_applies(const skippr_plugin *p, int is_sink,
                             const char *name)
{
    if (is_sink || strcmp(name, "format") == 0)
        return 1;
    /* CSV and XML come from files and objects, or from a streaming source
     * that emits documents; the others emit JSON messages. */
    const skippr_source_ops *src = p->source;
    int documents = SKIPPR_OPS_HAS(skippr_source_ops, src, flags) &&
                    (src->flags & SKIPPR_SOURCE_DOCUMENTS);
    return src->list != NULL || documents;
}
