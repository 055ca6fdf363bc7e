/* Where something in a config is, in the words the user wrote: a file's
 * `file:line:col`, or for a pipeline given by flags the flag that set it
 * (`--sink`, `--batch-time-fields`, `--sink-opt part_size`), never a line
 * of the YAML the flags were turned into. */
#include "config/where.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#define WHERE_DEPTH 6

int sk_config_from_flags(const sk_yaml_doc *doc)
{
    return doc && doc->path && strcmp(doc->path, SK_FLAGS_DOC) == 0;
}

/* The keys leading from n to at, into keys (depth of them); 1 if found. */
static int find_path(const sk_ynode *n, const sk_ynode *at,
                     const char **keys, int *depth)
{
    if (n == at)
        return 1;
    if (!n || n->kind != SK_Y_MAP || *depth == WHERE_DEPTH)
        return 0;
    for (size_t i = 0; i < n->n; i++) {
        keys[(*depth)++] = n->keys[i]->value;
        if (n->keys[i] == at || find_path(n->items[i], at, keys, depth))
            return 1;
        (*depth)--;
    }
    return 0;
}

/* "--" and key with '_' as '-', into out. */
static void dashed(const char *key, char *out, size_t cap)
{
    snprintf(out, cap, "--%s", key);
    for (char *p = out; *p; p++)
        *p = *p == '_' ? '-' : *p;
}

/* The flag behind the node at keys[0..depth). */
static void flag_of(const char **keys, int depth, char *out, size_t cap)
{
    int src = depth >= 1 && strcmp(keys[0], "data_sources") == 0;
    int snk = depth >= 1 && strcmp(keys[0], "data_sinks") == 0;
    if ((src || snk) && depth >= 4)
        snprintf(out, cap, "%s %s", src ? "--source-opt" : "--sink-opt",
                 keys[3]);
    else if (src || snk)
        snprintf(out, cap, "%s", src ? "--source" : "--sink");
    else if (depth >= 4 && strcmp(keys[0], "pipelines") == 0 &&
             strcmp(keys[2], "transform") == 0)
        dashed(keys[3], out, cap);
    else if (depth >= 3 && strcmp(keys[0], "pipelines") == 0)
        dashed(keys[2], out, cap);
    else if (depth >= 2 && strcmp(keys[0], "skippr") == 0)
        dashed(keys[1], out, cap);
    else
        snprintf(out, cap, "the flags");
}

void sk_config_where(const sk_yaml_doc *doc, const sk_ynode *at, char *out,
                     size_t cap)
{
    const char *file = doc && doc->path ? doc->path : "config";
    if (!sk_config_from_flags(doc)) {
        if (at)
            snprintf(out, cap, "%s:%d:%d", file, at->line, at->col);
        else
            snprintf(out, cap, "%s", file);
        return;
    }
    const char *keys[WHERE_DEPTH];
    int depth = 0;
    if (at && find_path(doc->root, at, keys, &depth))
        flag_of(keys, depth, out, cap);
    else
        snprintf(out, cap, "the flags");
}

const char *sk_config_ref_name(const sk_yaml_doc *doc, const char *ref)
{
    if (!sk_config_from_flags(doc) || !ref)
        return ref;
    if (strncmp(ref, "data_sources.", 13) == 0)
        return "--source";
    if (strncmp(ref, "data_sinks.", 11) == 0)
        return "--sink";
    return ref;
}

int sk_cfg_fail(sk_cfg_err *err, const sk_yaml_doc *doc, const sk_ynode *at,
                const char *fmt, ...)
{
    char msg[700];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    char where[300];
    sk_config_where(doc, at, where, sizeof where);
    snprintf(err->msg, sizeof err->msg, "%s: %s", where, msg);
    return SKIPPR_INVAL;
}
