#include "config/config.h"

#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <yaml.h>

#include "config/where.h"

#include "base/common.h"
#include "config/options.h"

/* Refuse keys of map that are not in allowed (NULL-terminated). */
static int check_keys(const sk_yaml_doc *doc, const sk_ynode *map,
                      const char *const *allowed, const char *what,
                      sk_cfg_err *err)
{
    for (size_t i = 0; i < map->n; i++) {
        int ok = 0;
        for (size_t k = 0; allowed[k]; k++)
            if (strcmp(map->keys[i]->value, allowed[k]) == 0)
                ok = 1;
        if (!ok) {
            char list[512] = "";
            for (size_t k = 0; allowed[k]; k++)
                sk_list_add(list, sizeof list, allowed[k]);
            return sk_cfg_fail(err, doc, map->keys[i],
                               "unknown key '%s' in %s (known: %s)",
                               map->keys[i]->value, what, list);
        }
    }
    return SKIPPR_OK;
}

/* Refuse keys of map that the options table does not give section. */
static int check_section_keys(const sk_yaml_doc *doc, const sk_ynode *map,
                              sk_eopt_section section, const char *what,
                              sk_cfg_err *err)
{
    const char *allowed[64];
    size_t n = 0;
    for (const sk_engine_option *o = sk_engine_options; o->name; o++)
        if (o->section == section && n + 1 < sizeof allowed / sizeof *allowed)
            allowed[n++] = o->name;
    allowed[n] = NULL;
    return check_keys(doc, map, allowed, what, err);
}

static int want_scalar(const sk_yaml_doc *doc, const sk_ynode *n,
                       const char *what, sk_cfg_err *err)
{
    if (n && n->kind != SK_Y_SCALAR)
        return sk_cfg_fail(err, doc, n, "%s must be a single value", what);
    return SKIPPR_OK;
}

static int get_int(const sk_yaml_doc *doc, const sk_ynode *map,
                   const char *key, int64_t lo, int64_t hi, int is_size,
                   int64_t *out, sk_cfg_err *err)
{
    const sk_ynode *n = sk_ymap_get(map, key);
    if (!n)
        return SKIPPR_OK;
    if (want_scalar(doc, n, key, err))
        return SKIPPR_INVAL;
    int64_t v;
    char *end;
    errno = 0;
    if (is_size) {
        if (sk_parse_size(n->value, &v))
            return sk_cfg_fail(err, doc, n, "%s: '%s' is not a size (e.g. "
                               "1073741824, 512MiB, 1GiB)", key, n->value);
    } else {
        long long ll = strtoll(n->value, &end, 10);
        if (end == n->value || *end || errno)
            return sk_cfg_fail(err, doc, n, "%s: '%s' is not an integer", key,
                               n->value);
        v = ll;
    }
    if (v < lo || v > hi)
        return sk_cfg_fail(err, doc, n, "%s: %lld is out of range [%lld, %lld]",
                           key, (long long)v, (long long)lo, (long long)hi);
    *out = v;
    return SKIPPR_OK;
}

static const char *get_str(const sk_ynode *map, const char *key)
{
    const sk_ynode *n = sk_ymap_get(map, key);
    return n && n->kind == SK_Y_SCALAR ? n->value : NULL;
}

static int resolve_endpoint(const sk_yaml_doc *doc, const sk_ynode *pipe,
                            const char *field, const char *section,
                            sk_endpoint_cfg *ep, sk_cfg_err *err)
{
    const sk_ynode *ref = sk_ymap_get(pipe, field);
    if (!ref)
        return sk_cfg_fail(err, doc, pipe, "pipeline needs '%s: %s.NAME'",
                           field, section);
    if (want_scalar(doc, ref, field, err))
        return SKIPPR_INVAL;
    size_t sl = strlen(section);
    if (strncmp(ref->value, section, sl) != 0 || ref->value[sl] != '.' ||
        !ref->value[sl + 1])
        return sk_cfg_fail(err, doc, ref, "%s must look like '%s.NAME', "
                           "not '%s'", field, section, ref->value);
    const char *name = ref->value + sl + 1;
    const sk_ynode *sec = sk_ymap_get(doc->root, section);
    const sk_ynode *def = sk_ymap_get(sec, name);
    if (!def)
        return sk_cfg_fail(err, doc, ref, "'%s' is not defined under %s:",
                           name, section);
    if (def->kind != SK_Y_MAP || def->n != 1)
        return sk_cfg_fail(err, doc, def, "%s.%s must hold exactly one "
                           "plugin key, such as File: or S3:", section, name);
    ep->ref = ref->value;
    ep->plugin = def->keys[0]->value;
    ep->options = def->items[0];
    ep->at = def->keys[0];
    if (ep->options && ep->options->kind == SK_Y_SCALAR &&
        ep->options->value[0] == '\0')
        ep->options = NULL; /* "File:" with nothing under it */
    if (ep->options && ep->options->kind != SK_Y_MAP)
        return sk_cfg_fail(err, doc, ep->options, "options of %s must be a "
                           "map of key: value", ep->plugin);
    return SKIPPR_OK;
}

size_t sk_config_pipeline_names(const sk_yaml_doc *doc, const char **names,
                                size_t cap)
{
    const sk_ynode *p = sk_ymap_get(doc->root, "pipelines");
    size_t n = 0;
    if (p && p->kind == SK_Y_MAP)
        for (size_t i = 0; i < p->n && n < cap; i++)
            names[n++] = p->keys[i]->value;
    return n;
}

/* The flags of `skipprd sync --source URL ...`: the table's entries
 * marked flag, by section, NULL-terminated. */
static const char *setting_keys[64], *transform_keys[16];

static void flag_keys(void)
{
    size_t ns = 0, nt = 0;
    for (const sk_engine_option *o = sk_engine_options; o->name; o++) {
        if (!o->flag)
            continue;
        if (o->section == SK_EOPT_PIPELINE && ns + 1 < 64)
            setting_keys[ns++] = o->name;
        else if (o->section == SK_EOPT_TRANSFORM && nt + 1 < 16)
            transform_keys[nt++] = o->name;
    }
    setting_keys[ns] = transform_keys[nt] = NULL;
}

const char *const *sk_config_setting_keys(void)
{
    if (!setting_keys[0])
        flag_keys();
    return setting_keys;
}

const char *const *sk_config_transform_keys(void)
{
    if (!transform_keys[0])
        flag_keys();
    return transform_keys;
}

/* out->state_dir: skippr.state_dir (default ".skippr") made absolute.
 * A relative one is read against the config file's folder (doc->dir), not
 * the working directory: cron, systemd and containers start skipprd from
 * anywhere, and state that followed them would copy everything again. A
 * document from memory (flags) has no folder: the working directory. */
static int apply_table(const sk_yaml_doc *doc, const sk_ynode *map,
                       sk_eopt_section section, sk_pipeline_cfg *out,
                       sk_cfg_err *err);

static int resolve_state_dir(const sk_yaml_doc *doc, const sk_ynode *sk,
                             sk_pipeline_cfg *out, sk_cfg_err *err)
{
    const char *v = get_str(sk, "state_dir");
    if (!v)
        v = sk_engine_option_find(SK_EOPT_SKIPPR, "state_dir")->def;
    if (!*v)
        return sk_cfg_fail(err, doc, sk_ymap_get(sk, "state_dir"),
                           "state_dir must not be empty");
    int rc = sk_config_abs_path(doc, v, out->state_dir,
                                sizeof out->state_dir);
    if (rc == SKIPPR_RANGE)
        return sk_cfg_fail(err, doc, sk_ymap_get(sk, "state_dir"),
                           "state_dir is too long");
    if (rc)
        return sk_cfg_fail(err, doc, sk_ymap_get(sk, "state_dir"),
                           "state_dir %s: cannot read the working "
                           "directory: %s", v, strerror(errno));
    return SKIPPR_OK;
}

/* skippr: the workspace, state and threads. */
static int parse_skippr(const sk_yaml_doc *doc, sk_pipeline_cfg *out,
                        sk_cfg_err *err)
{
    const sk_ynode *sk = sk_ymap_get(doc->root, "skippr");
    if (sk && sk->kind != SK_Y_MAP)
        return sk_cfg_fail(err, doc, sk, "skippr: must be a map");
    if (sk && check_section_keys(doc, sk, SK_EOPT_SKIPPR, "skippr:", err))
        return SKIPPR_INVAL;
    if (apply_table(doc, sk, SK_EOPT_SKIPPR, out, err))
        return SKIPPR_INVAL;
    if (!*out->workspace || strchr(out->workspace, '/') ||
        strcmp(out->workspace, "..") == 0 || strcmp(out->workspace, ".") == 0)
        return sk_cfg_fail(err, doc, sk_ymap_get(sk, "workspace"),
                           "workspace must be a plain name");
    const sk_ynode *store = sk_ymap_get(sk, "state_store");
    if (out->storage_mode == SK_STORAGE_S3) {
        if (!store)
            return sk_cfg_fail(err, doc,
                               sk_ymap_get(sk, "skipprd_el_storage_mode"),
                               "skipprd_el_storage_mode: s3 needs "
                               "'state_store: data_sinks.NAME', an S3 entry "
                               "whose bucket and prefix hold the state");
        if (resolve_endpoint(doc, sk, "state_store", "data_sinks",
                             &out->state_store, err))
            return SKIPPR_INVAL;
    } else if (store) {
        return sk_cfg_fail(err, doc, store, "state_store is used only with "
                           "skipprd_el_storage_mode: s3");
    }
    if (resolve_state_dir(doc, sk, out, err))
        return SKIPPR_INVAL;
    out->plugin_dirs = sk_ymap_get(sk, "plugin_dirs");
    if (out->plugin_dirs && out->plugin_dirs->kind == SK_Y_MAP)
        return sk_cfg_fail(err, doc, out->plugin_dirs,
                           "plugin_dirs must be a folder or a list of "
                           "folders");
    const sk_engine_option *t = sk_engine_option_find(SK_EOPT_SKIPPR,
                                                      "threads");
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    int64_t threads = cpus > 0 ? cpus : 1;
    if (get_int(doc, sk, "threads", t->lo, t->hi, 0, &threads, err))
        return SKIPPR_INVAL;
    out->threads = (int)threads;
    return SKIPPR_OK;
}

/* The pipeline named name under pipelines:, or NULL with err set. */
static const sk_ynode *find_pipeline(const sk_yaml_doc *doc, const char *name,
                                     sk_cfg_err *err)
{
    const sk_ynode *pipes = sk_ymap_get(doc->root, "pipelines");
    if (!pipes || pipes->kind != SK_Y_MAP) {
        sk_cfg_fail(err, doc, pipes ? pipes : doc->root,
                    "pipelines: must be a map of named pipelines");
        return NULL;
    }
    const sk_ynode *pipe = sk_ymap_get(pipes, name);
    if (!pipe) {
        char list[512] = "";
        for (size_t i = 0; i < pipes->n; i++)
            sk_list_add(list, sizeof list, pipes->keys[i]->value);
        sk_cfg_fail(err, doc, pipes, "no pipeline named '%s' (defined: %s)",
                    name, list);
        return NULL;
    }
    if (pipe->kind != SK_Y_MAP) {
        sk_cfg_fail(err, doc, pipe, "pipeline %s must be a map", name);
        return NULL;
    }
    if (check_section_keys(doc, pipe, SK_EOPT_PIPELINE, "a pipeline", err))
        return NULL;
    return pipe;
}

/* type: only copy; ingest and cdc are named and refused. */
static int parse_type(const sk_yaml_doc *doc, const sk_ynode *pipe,
                      sk_cfg_err *err)
{
    const sk_ynode *type = sk_ymap_get(pipe, "type");
    if (!type)
        return SKIPPR_OK;
    if (want_scalar(doc, type, "type", err))
        return SKIPPR_INVAL;
    if (strcmp(type->value, "ingest") == 0 || strcmp(type->value, "cdc") == 0)
        return sk_cfg_fail(err, doc, type, "pipeline type '%s' is not "
                           "supported by skipprd: it only copies records "
                           "byte for byte; use 'type: copy'", type->value);
    if (strcmp(type->value, "copy") != 0)
        return sk_cfg_fail(err, doc, type, "unknown pipeline type '%s' "
                           "(only 'copy' is supported)", type->value);
    return SKIPPR_OK;
}

/* A choice option o in map: the index of its value among o->choices into
 * *out; the default's when absent. */
static int get_choice(const sk_yaml_doc *doc, const sk_ynode *map,
                      const sk_engine_option *o, int *out, sk_cfg_err *err)
{
    const sk_ynode *n = sk_ymap_get(map, o->name);
    const char *v = n ? n->value : o->def;
    if (n && want_scalar(doc, n, o->name, err))
        return SKIPPR_INVAL;
    char list[256] = "";
    size_t k = 0;
    for (; o->choices[k]; k++) {
        if (strcmp(v, o->choices[k]) == 0) {
            *out = (int)k;
            return SKIPPR_OK;
        }
        if (k)
            strncat(list, o->choices[k + 1] ? ", " : " or ",
                    sizeof list - strlen(list) - 1);
        strncat(list, o->choices[k], sizeof list - strlen(list) - 1);
    }
    return sk_cfg_fail(err, doc, n, "%s: '%s' must be %s (docs/CONFIG.md)",
                       o->name, v, list);
}

/* One key of the table that has a place in sk_pipeline_cfg: its value
 * from map, or its default (none when computed: the field stays zero). */
static int apply_one(const sk_yaml_doc *doc, const sk_ynode *map,
                     const sk_engine_option *o, sk_pipeline_cfg *out,
                     sk_cfg_err *err)
{
    char *field = (char *)out + o->offset;
    const sk_ynode *n = sk_ymap_get(map, o->name);
    if (!n && o->computed)
        return SKIPPR_OK;
    if (want_scalar(doc, n, o->name, err))
        return SKIPPR_INVAL;
    if (o->type == SK_EOPT_STRING) {
        const char *v = n ? n->value : o->def;
        memcpy(field, &v, sizeof v);
        return SKIPPR_OK;
    }
    if (o->type == SK_EOPT_CHOICE) {
        int v;
        if (get_choice(doc, map, o, &v, err))
            return SKIPPR_INVAL;
        memcpy(field, &v, sizeof v);
        return SKIPPR_OK;
    }
    int64_t v;
    if (sk_parse_size(o->def, &v)) /* a bad default: a bug here */
        return sk_cfg_fail(err, doc, NULL, "%s: bad default '%s'", o->name,
                           o->def);
    if (get_int(doc, map, o->name, o->lo, o->hi, o->type == SK_EOPT_SIZE, &v,
                err))
        return SKIPPR_INVAL;
    memcpy(field, &v, sizeof v);
    return SKIPPR_OK;
}

/* Every key of section that the options table places in sk_pipeline_cfg,
 * from map (NULL: all defaults), within the table's bounds and choices.
 * The table is the only place a key's default and choices are written. */
static int apply_table(const sk_yaml_doc *doc, const sk_ynode *map,
                       sk_eopt_section section, sk_pipeline_cfg *out,
                       sk_cfg_err *err)
{
    for (const sk_engine_option *o = sk_engine_options; o->name; o++)
        if (o->section == section && o->offset != SIZE_MAX &&
            apply_one(doc, map, o, out, err))
            return SKIPPR_INVAL;
    return SKIPPR_OK;
}

/* transform: the routing, checked by making a router from it. */
static int parse_transform(const sk_yaml_doc *doc, const sk_ynode *pipe,
                           sk_pipeline_cfg *out, sk_cfg_err *err)
{
    const sk_ynode *tr = sk_ymap_get(pipe, "transform");
    if (tr && tr->kind != SK_Y_MAP)
        return sk_cfg_fail(err, doc, tr, "transform: must be a map");
    if (tr && check_section_keys(doc, tr, SK_EOPT_TRANSFORM, "transform:",
                                 err))
        return SKIPPR_INVAL;
    if (apply_table(doc, tr, SK_EOPT_TRANSFORM, out, err))
        return SKIPPR_INVAL;
    /* batch_time_unit: day when time fields are set, else none. */
    const sk_engine_option *tu = sk_engine_option_find(SK_EOPT_TRANSFORM,
                                                       "batch_time_unit");
    int u = SK_TIME_UNIT_DAY - 1; /* choices start at year */
    out->route.time_unit = SK_TIME_UNIT_NONE;
    if (sk_ymap_get(tr, tu->name) && get_choice(doc, tr, tu, &u, err))
        return SKIPPR_INVAL;
    if (sk_ymap_get(tr, tu->name) ||
        (out->route.time_fields && *out->route.time_fields))
        out->route.time_unit = (sk_time_unit)(SK_TIME_UNIT_YEAR + u);
    const char *rerr = NULL;
    sk_router *probe = sk_router_new(&out->route, &rerr);
    if (!probe)
        return sk_cfg_fail(err, doc, tr ? tr : pipe, "transform: %s",
                           rerr ? rerr : "invalid");
    sk_router_free(probe);
    return SKIPPR_OK;
}

int sk_config_pipeline(const sk_yaml_doc *doc, const char *pipeline,
                       sk_pipeline_cfg *out, sk_cfg_err *err)
{
    static const char *const top_keys[] = {"skippr", "pipelines",
                                           "data_sources", "data_sinks", NULL};
    memset(out, 0, sizeof *out);
    if (check_keys(doc, doc->root, top_keys, "the top level", err) ||
        parse_skippr(doc, out, err))
        return SKIPPR_INVAL;
    const sk_ynode *pipe = find_pipeline(doc, pipeline, err);
    if (!pipe)
        return SKIPPR_INVAL;
    out->name = pipeline;
    if (parse_type(doc, pipe, err) || apply_table(doc, pipe,
                                                  SK_EOPT_PIPELINE, out, err))
        return SKIPPR_INVAL;
    if (out->arrival_key_pattern &&
        !sk_route_arrival_pattern_check(out->arrival_key_pattern))
        return sk_cfg_fail(err, doc, sk_ymap_get(pipe, "arrival_key_pattern"),
                           "arrival_key_pattern '%s' needs %%Y and takes "
                           "only %%Y, %%m, %%d, %%H and %%%% (docs/CONFIG.md)",
                           out->arrival_key_pattern);
    if (parse_transform(doc, pipe, out, err) ||
        resolve_endpoint(doc, pipe, "data_source", "data_sources",
                         &out->source, err) ||
        resolve_endpoint(doc, pipe, "data_sink", "data_sinks", &out->sink,
                         err))
        return SKIPPR_INVAL;
    return SKIPPR_OK;
}
