/* Reading S3's XML answers: a named value of a body (an UploadId, an
 * ETag), an error body's <Code>, and a child element's text in a parsed
 * tree. See answer.h. */
#include "answer.h"

#include <stdio.h>
#include <string.h>

const char *s3_child_text(xmlNode *n, const char *name, char *out,
                          size_t cap)
{
    for (xmlNode *k = n->children; k; k = k->next) {
        if (k->type == XML_ELEMENT_NODE &&
            strcmp((const char *)k->name, name) == 0) {
            xmlChar *t = xmlNodeGetContent(k);
            snprintf(out, cap, "%s", t ? (const char *)t : "");
            xmlFree(t);
            return out;
        }
    }
    out[0] = '\0';
    return NULL;
}

void s3_xml_value(const buf *body, const char *name, char *out, size_t cap)
{
    char open[64], close[64];
    snprintf(open, sizeof open, "<%s>", name);
    snprintf(close, sizeof close, "</%s>", name);
    *out = '\0';
    const char *s = body->data ? strstr((const char *)body->data, open)
                               : NULL;
    const char *e = s ? strstr(s, close) : NULL;
    if (!e)
        return;
    s += strlen(open);
    size_t n = 0;
    while (s < e) {
        if (*s == '"') {
            s++;
        } else if (strncmp(s, "&quot;", 6) == 0) {
            s += 6;
        } else if (n + 1 < cap) {
            out[n++] = *s++;
        } else {
            *out = '\0';
            return;
        }
    }
    out[n] = '\0';
}

int s3_error_in_body(const buf *body, char *code, size_t cap)
{
    if (!body->data || !strstr((const char *)body->data, "<Error>"))
        return 0;
    s3_error_code(body, code, cap);
    return 1;
}

void s3_error_code(const buf *b, char *out, size_t cap)
{
    out[0] = '\0';
    const char *s = b->data ? strstr((const char *)b->data, "<Code>") : NULL;
    if (!s)
        return;
    s += 6;
    const char *e = strstr(s, "</Code>");
    if (e)
        snprintf(out, cap, "%.*s", (int)(e - s), s);
}
