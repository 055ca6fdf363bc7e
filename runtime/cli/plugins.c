/* `skipprd plugins`: the plugins found and their options, as
 * text or JSON (--json), and the engine's own options. */
#include <jansson.h>
#include <stdio.h>

#include "base/common.h"
#include "cli/commands.h"
#include "config/options.h"
#include "plugin/loader.h"

/* An options table; with p (the engine's common options), only those
 * that mean something for p's source or sink. */
static void print_options(const skippr_option *o, const skippr_plugin *p,
                          int is_sink)
{
    for (; o && o->name; o++)
        if (!p || sk_common_option_applies(p, is_sink, o->name))
            printf("    %-22s %-7s %s%s%s%s\n", o->name,
               o->type == SKIPPR_OPT_INT      ? "int"
               : o->type == SKIPPR_OPT_BOOL   ? "bool"
               : o->type == SKIPPR_OPT_PREFIX ? "map"
                                              : "string",
               o->doc ? o->doc : "", (o->required & SKIPPR_OPT_REQUIRED) ? " (required)" : "",
               o->default_value ? " Default: " : "",
               o->default_value ? o->default_value : "");
}

static const char *opt_type_name(skippr_opt_type t)
{
    return t == SKIPPR_OPT_INT      ? "int"
           : t == SKIPPR_OPT_BOOL   ? "bool"
           : t == SKIPPR_OPT_PREFIX ? "map"
           : t == SKIPPR_OPT_SECRET ? "secret"
                                    : "string";
}

/* Append an options table to arr; common marks the engine's options that
 * every source or sink takes. Returns 0, or -1 when out of memory. */
static int json_options(json_t *arr, const skippr_option *o, int common,
                        const skippr_plugin *p, int is_sink)
{
    for (; o && o->name; o++) {
        if (common && !sk_common_option_applies(p, is_sink, o->name))
            continue;
        json_t *j = json_pack("{s:s, s:s, s:s?, s:b, s:s, s:b}", "name",
                              o->name, "type", opt_type_name(o->type),
                              "default", o->default_value, "required",
                              (o->required & SKIPPR_OPT_REQUIRED) != 0,
                              "doc", o->doc ? o->doc : "",
                              "common", common);
        if (!j || json_array_append_new(arr, j))
            return -1;
    }
    return 0;
}

/* The engine's own keys (config/options.h), for docs/CONFIG.md. */
static json_t *engine_options_json(void)
{
    static const char *const sections[] = {"skippr", "pipeline",
                                           "transform"};
    static const char *const types[] = {"int", "size", "choice", "string",
                                        "list", "ref", "map"};
    json_t *arr = json_array();
    for (const sk_engine_option *o = sk_engine_options; arr && o->name; o++) {
        json_t *choices = json_array();
        for (size_t k = 0; choices && o->choices && o->choices[k]; k++)
            if (json_array_append_new(choices, json_string(o->choices[k])))
                break;
        json_t *j = !choices ? NULL
                             : json_pack("{s:s, s:s, s:s, s:s?, s:o, s:s}",
                                         "name", o->name, "section",
                                         sections[o->section], "type",
                                         types[o->type], "default", o->def,
                                         "choices", choices, "doc", o->doc);
        if (!j || json_array_append_new(arr, j)) {
            json_decref(arr);
            return NULL;
        }
    }
    return arr;
}

/* skipprd plugins --json: every plugin's descriptor and options tables as
 * one JSON document on stdout, in the registry's order. */
static int print_plugins_json(const sk_registry *reg)
{
    json_t *plugins = json_array();
    int bad = !plugins;
    for (size_t i = 0; !bad && i < reg->n; i++) {
        const skippr_plugin *d = reg->libs[i].desc;
        json_t *p = json_pack("{s:s, s:s, s:s, s:s}", "name", d->name,
                              "version", d->version ? d->version : "",
                              "description",
                              d->description ? d->description : "", "path",
                              reg->libs[i].path);
        const skippr_option *own[2] = {
            d->source ? d->source->options : NULL,
            d->sink ? d->sink->options : NULL};
        const skippr_option *common[2] = {sk_common_source_options,
                                          sk_common_sink_options};
        const char *role[2] = {"source", "sink"};
        int has[2] = {d->source != NULL, d->sink != NULL};
        bad = !p || json_array_append_new(plugins, p);
        for (int r = 0; r < 2 && !bad; r++) {
            if (!has[r])
                continue;
            json_t *opts = json_array();
            bad = !opts || json_object_set_new(p, role[r], opts) ||
                  json_options(opts, own[r], 0, d, r) ||
                  json_options(opts, common[r], 1, d, r);
        }
    }
    json_t *engine = bad ? NULL : engine_options_json();
    json_t *doc = !engine ? NULL
                          : json_pack("{s:s, s:i, s:o, s:o}", "skipprd",
                                      SKIPPR_VERSION_STRING, "abi",
                                      (int)SKIPPR_ABI_VERSION, "plugins",
                                      plugins, "engine", engine);
    if (!doc) {
        json_decref(plugins);
        sk_error("out of memory");
        return 1;
    }
    int rc = json_dumpf(doc, stdout, JSON_INDENT(1)) ? 1 : 0;
    putchar('\n');
    json_decref(doc);
    return rc;
}

int sk_cli_plugins(const sk_yaml_doc *doc, int as_json)
{
    sk_registry reg;
    sk_cfg_err err;
    const sk_ynode *dirs = NULL;
    if (doc)
        dirs = sk_ymap_get(sk_ymap_get(doc->root, "skippr"), "plugin_dirs");
    if (sk_registry_load(&reg, doc, dirs, &err)) {
        sk_error("%s", err.msg);
        return 1;
    }
    if (as_json) {
        int rc = print_plugins_json(&reg);
        sk_registry_close(&reg);
        return rc;
    }
    if (reg.n == 0)
        printf("no plugins found\n");
    for (size_t i = 0; i < reg.n; i++) {
        const skippr_plugin *d = reg.libs[i].desc;
        printf("%s %s (%s%s%s)\n  %s\n  %s\n", d->name,
               d->version ? d->version : "", d->source ? "source" : "",
               d->source && d->sink ? ", " : "", d->sink ? "sink" : "",
               d->description ? d->description : "", reg.libs[i].path);
        if (d->source) {
            printf("  source options:\n");
            print_options(d->source->options, NULL, 0);
            print_options(sk_common_source_options, d, 0);
        }
        if (d->sink) {
            printf("  sink options:\n");
            print_options(d->sink->options, NULL, 1);
            print_options(sk_common_sink_options, d, 1);
        }
    }
    sk_registry_close(&reg);
    return 0;
}

/* Make (and with reach, start and probe) the instance of ep: its format
 * into *fmt. 0, or 1 with the problem said on one line. */
