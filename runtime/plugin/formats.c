/* Record formats by name, and the pairs a copy can make (formats.h). */
#include "plugin/formats.h"

#include <string.h>

#include "base/macros.h"

int sk_format_parse(const char *name)
{
    static const struct {
        const char *name;
        sk_format format;
    } names[] = {{"auto", SK_FORMAT_AUTO}, {"json", SK_FORMAT_JSON},
                 {"jsonl", SK_FORMAT_JSONL}, {"ndjson", SK_FORMAT_JSONL},
                 {"csv", SK_FORMAT_CSV}, {"xml", SK_FORMAT_XML}};
    for (size_t i = 0; i < SK_ARRAY_LEN(names); i++)
        if (strcmp(name, names[i].name) == 0)
            return (int)names[i].format;
    return -1;
}

const char *sk_format_pair_problem(sk_format src, sk_format sink,
                                   int validate)
{
    /* Copies: json -> jsonl, csv -> csv, xml -> xml. Conversions: csv ->
     * jsonl, and json -> csv, which reads every record whole. */
    if ((src == SK_FORMAT_XML) != (sink == SK_FORMAT_XML) &&
        (src != SK_FORMAT_AUTO || sink != SK_FORMAT_XML))
        return "xml is copied only to an xml sink, and an xml sink takes "
               "only xml; supported pairs: json -> jsonl, csv -> csv, "
               "csv -> jsonl, json -> csv, xml -> xml";
    if (src != SK_FORMAT_CSV && src != SK_FORMAT_AUTO &&
        sink == SK_FORMAT_CSV && !validate)
        return "json -> csv conversion needs validate: true (every record "
               "is read as a whole object); supported pairs: json -> jsonl, "
               "csv -> csv, csv -> jsonl, json -> csv";
    return NULL;
}
