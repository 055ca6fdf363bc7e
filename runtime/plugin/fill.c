/* A plugin instance's options from the config: each value checked against
 * the plugin's table and the engine's common options, defaults, required
 * ones refused when missing (fill.h). */
#include "plugin/fill.h"

#include <stdio.h>
#include <string.h>

#include "base/common.h"
#include "config/where.h"
#include "format/csvpeek.h"
#include "plugin/commonopts.h"
#include "plugin/optstore.h"

static const skippr_option *find_opt(const skippr_option *t, const char *k)
{
    const skippr_option *prefix = NULL;
    for (; t && t->name; t++) {
        if (strcmp(t->name, k) == 0)
            return t;
        size_t n = strlen(t->name);
        if (t->type == SKIPPR_OPT_PREFIX && strncmp(t->name, k, n) == 0 &&
            k[n])
            prefix = t;
    }
    return prefix;
}

/* Keep an allocation that the context points to until the instance is
 * freed (inst->strings holds strings and SKIPPR_OPT_PREFIX arrays). */
static int keep_alloc(sk_instance *inst, void *p)
{
    char **ns = sk_realloc(inst->strings,
                           (inst->nstrings + 1) * sizeof *inst->strings);
    if (!ns)
        return SKIPPR_NOMEM;
    inst->strings = ns;
    inst->strings[inst->nstrings++] = p;
    return SKIPPR_OK;
}

static int keep_string(sk_instance *inst, const char *v, const char **slot)
{
    char *c = sk_strdup(v);
    if (!c || keep_alloc(inst, c)) {
        sk_free(c);
        return SKIPPR_NOMEM;
    }
    *slot = c;
    return SKIPPR_OK;
}

/* Fill every SKIPPR_OPT_PREFIX option of table from the keys of opts. */
static int fill_prefixes(sk_instance *inst, const skippr_option *table,
                         const sk_ynode *opts)
{
    for (const skippr_option *o = table; o && o->name; o++) {
        if (o->type != SKIPPR_OPT_PREFIX)
            continue;
        size_t n = 0, plen = strlen(o->name);
        for (size_t i = 0; opts && i < opts->n; i++)
            n += find_opt(table, opts->keys[i]->value) == o;
        skippr_kv *kv = sk_calloc(n + 1, sizeof *kv);
        if (!kv || keep_alloc(inst, kv)) {
            sk_free(kv);
            return SKIPPR_NOMEM;
        }
        size_t k = 0;
        for (size_t i = 0; opts && i < opts->n; i++) {
            if (find_opt(table, opts->keys[i]->value) != o)
                continue;
            if (keep_string(inst, opts->keys[i]->value + plen, &kv[k].key) ||
                keep_string(inst, opts->items[i]->value, &kv[k].value))
                return SKIPPR_NOMEM;
            k++;
        }
        const skippr_kv *slot = kv;
        memcpy((uint8_t *)inst->ctx + o->offset, &slot, sizeof slot);
    }
    return SKIPPR_OK;
}

/* A STRING option given as a YAML list: its scalars joined with ','.
 * Returns an allocation the caller owns, or NULL (*why says why). */
static char *join_list(const sk_ynode *v, const char **why)
{
    skippr_buf b;
    skippr_buf_init(&b, 1u << 16);
    *why = "out of memory";
    for (size_t i = 0; i < v->n; i++) {
        const sk_ynode *it = v->items[i];
        if (!it || it->kind != SK_Y_SCALAR || !*it->value ||
            strchr(it->value, ',')) {
            *why = "every list item must be a non-empty value without ','";
            skippr_buf_free(&b);
            return NULL;
        }
        if ((i && skippr_buf_putc(&b, ',')) ||
            skippr_buf_append(&b, it->value, strlen(it->value))) {
            skippr_buf_free(&b);
            return NULL;
        }
    }
    if (skippr_buf_putc(&b, 0)) {
        skippr_buf_free(&b);
        return NULL;
    }
    return (char *)b.data;
}

static int keep_cb(void *ud, const char *v, const char **slot)
{
    return keep_string(ud, v, slot);
}

static int fill_option(sk_instance *inst, const skippr_option *o,
                       const char *value, const sk_yaml_doc *doc,
                       const sk_ynode *at, sk_cfg_err *err)
{
    char abs[4096], why[512];
    /* A file system path: a relative one is the config file's folder's,
     * not the working directory's. */
    if ((o->type == SKIPPR_OPT_STRING || o->type == SKIPPR_OPT_SECRET) &&
        (o->required & SKIPPR_OPT_FS_PATH) && value[0] != '/') {
        if (sk_config_abs_path(doc, value, abs, sizeof abs))
            return sk_cfg_fail(err, doc, at, "%s: path %s: too long, or the "
                               "working directory is unreadable",
                               inst->label, value);
        value = abs;
    }
    int rc = sk_option_store(o, inst->ctx, value, keep_cb, inst, why,
                             sizeof why);
    if (rc == SKIPPR_NOMEM)
        return sk_cfg_fail(err, doc, at, "out of memory");
    if (rc)
        return sk_cfg_fail(err, doc, at, "%s: %s", inst->label, why);
    return SKIPPR_OK;
}

static int apply_common(sk_instance *inst, const char *key, const char *v,
                        const sk_yaml_doc *doc, const sk_ynode *at,
                        sk_cfg_err *err)
{
    if (strcmp(key, "csv_delimiter") == 0) {
        if (!(inst->csv_delim = sk_csv_delim_parse(v)))
            return sk_cfg_fail(err, doc, at, "%s: csv_delimiter '%s' is not "
                               "supported (supported: ',', ';', '|', tab)",
                               inst->label, v);
        return SKIPPR_OK;
    }
    if (strcmp(key, "xml_record_element") == 0) {
        sk_free(inst->xml_record_element);
        if (!(inst->xml_record_element = sk_strdup(v)))
            return SKIPPR_NOMEM;
        return SKIPPR_OK;
    }
    if (strcmp(key, "csv_columns") == 0) {
        if (!*v)
            return sk_cfg_fail(err, doc, at, "%s: csv_columns is empty",
                               inst->label);
        sk_free(inst->csv_columns);
        if (!(inst->csv_columns = sk_strdup(v)))
            return SKIPPR_NOMEM;
        return SKIPPR_OK;
    }
    if (strcmp(key, "format") == 0) {
        int f = sk_format_parse(v);
        if (inst->is_sink && f == SK_FORMAT_JSONL)
            f = SK_FORMAT_JSON; /* a sink writes one record per line */
        if (f >= 0 && !(inst->is_sink && f == SK_FORMAT_AUTO))
            inst->format = (sk_format)f;
        else
            return sk_cfg_fail(err, doc, at, "%s: format '%s' is not "
                               "supported (supported: %s)", inst->label, v,
                               inst->is_sink ? "jsonl, csv, xml"
                                             : "auto, json, jsonl, csv, xml");
        return SKIPPR_OK;
    }
    return SKIPPR_INVAL;
}

/* The options of ep (a plugin's table and the engine's common ones) into
 * inst: each value checked and filled, then the defaults, and a required
 * option that is missing refused. SKIPPR_OK, or a status with err set. */
int sk_fill_options(sk_instance *inst, const skippr_option *table,
                    const skippr_option *common, const sk_yaml_doc *doc,
                    const sk_endpoint_cfg *ep, sk_cfg_err *err)
{
    int rc;
    const sk_ynode *opts = ep->options;
    for (size_t i = 0; opts && i < opts->n; i++) {
        const char *k = opts->keys[i]->value;
        const sk_ynode *v = opts->items[i];
        const skippr_option *o = find_opt(table, k);
        if (v && v->kind == SK_Y_SEQ && o && o->type == SKIPPR_OPT_STRING &&
            !find_opt(common, k)) {
            const char *why;
            char *joined = join_list(v, &why);
            if (!joined) {
                rc = sk_cfg_fail(err, doc, v, "%s: option %s: %s",
                                 inst->label, k, why);
                return rc;
            }
            rc = fill_option(inst, o, joined, doc, v, err);
            sk_free(joined);
            if (rc)
                return rc;
            continue;
        }
        if (!v || v->kind != SK_Y_SCALAR) {
            rc = sk_cfg_fail(err, doc, v ? v : opts->keys[i],
                             "%s: option %s must be a single value",
                             inst->label, k);
            return rc;
        }
        if (find_opt(common, k) &&
            !sk_common_option_applies(inst->plugin, inst->is_sink, k))
            return sk_cfg_fail(err, doc, opts->keys[i], "%s: option %s "
                               "means nothing here: this source gives JSON "
                               "messages, never CSV or XML", inst->label, k);
        if (find_opt(common, k)) {
            rc = apply_common(inst, k, v->value, doc, v, err);
            if (rc)
                return rc;
            continue;
        }
        if (!o) {
            char list[512] = "";
            for (const skippr_option *t = table; t && t->name; t++)
                sk_list_add(list, sizeof list, t->name);
            for (const skippr_option *t = common; t->name; t++)
                sk_list_add(list, sizeof list, t->name);
            rc = sk_cfg_fail(err, doc, opts->keys[i], "unknown option '%s' "
                             "for %s (known: %s)", k, inst->label, list);
            return rc;
        }
        if (o->type == SKIPPR_OPT_PREFIX)
            continue; /* fill_prefixes() */
        rc = fill_option(inst, o, v->value, doc, v, err);
        if (rc)
            return rc;
    }
    if ((rc = fill_prefixes(inst, table, opts))) {
        snprintf(err->msg, sizeof err->msg, "out of memory");
        return rc;
    }
    /* Defaults and required options. */
    for (const skippr_option *o = table; o && o->name; o++) {
        if (o->type == SKIPPR_OPT_PREFIX || sk_ymap_get(opts, o->name))
            continue;
        if (o->required & SKIPPR_OPT_REQUIRED) {
            rc = sk_cfg_fail(err, doc, ep->at, "%s needs option '%s': %s",
                             inst->label, o->name, o->doc ? o->doc : "");
            return rc;
        }
        if (o->default_value) {
            rc = fill_option(inst, o, o->default_value, doc, ep->at, err);
            if (rc)
                return rc;
        }
    }
    return SKIPPR_OK;
}
