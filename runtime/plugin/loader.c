#include "plugin/loader.h"

#include "config/where.h"

#include <dirent.h>
#include <dlfcn.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/common.h"
#include "base/crc32c.h"
#include "base/fence.h"
#include "config/where.h"
#include "format/csvpeek.h"
#include "format/decompress.h"

atomic_int sk_stop_requested;

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

int sk_plugin_open(const char *path, sk_plugin_lib *out, char *err,
                   size_t errlen)
{
    int rc = SKIPPR_ABI;
    void *dl = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!dl) {
        snprintf(err, errlen, "cannot load %s: %s", path, dlerror());
        goto fail;
    }
    skippr_plugin_entry_fn entry;
    *(void **)&entry = dlsym(dl, SKIPPR_PLUGIN_ENTRY_SYMBOL);
    if (!entry) {
        snprintf(err, errlen, "%s is not a skippr plugin: it does not export "
                 "%s()", path, SKIPPR_PLUGIN_ENTRY_SYMBOL);
        goto fail;
    }
    const skippr_plugin *d = entry();
    if (!d) {
        snprintf(err, errlen, "%s: %s() returned NULL", path,
                 SKIPPR_PLUGIN_ENTRY_SYMBOL);
        goto fail;
    }
    /* The first two fields are read before anything else. */
    if (d->abi_version != SKIPPR_ABI_VERSION) {
        snprintf(err, errlen, "%s was built for plugin ABI version %u, this "
                 "skipprd speaks version %u: rebuild the plugin", path,
                 d->abi_version, SKIPPR_ABI_VERSION);
        goto fail;
    }
    if (d->struct_size < sizeof(skippr_plugin)) {
        snprintf(err, errlen, "%s: descriptor is %u bytes, expected at least "
                 "%zu: not binary compatible", path, d->struct_size,
                 sizeof(skippr_plugin));
        goto fail;
    }
    if (!d->name || !*d->name || (!d->source && !d->sink)) {
        snprintf(err, errlen, "%s: descriptor has no name or neither source "
                 "nor sink ops", path);
        goto fail;
    }
    if ((d->source && (d->source->struct_size < sizeof(skippr_source_ops) ||
                       !d->source->init)) ||
        /* Sinks built before sync() was appended are still good. */
        (d->sink && (d->sink->struct_size < offsetof(skippr_sink_ops, sync) ||
                     !d->sink->init || !d->sink->object_open ||
                     !d->sink->object_write || !d->sink->object_commit ||
                     !d->sink->object_abort))) {
        snprintf(err, errlen, "%s (%s): ops struct too small or a required "
                 "callback is missing", path, d->name);
        goto fail;
    }
    if (!(out->path = sk_strdup(path))) {
        snprintf(err, errlen, "out of memory");
        rc = SKIPPR_NOMEM;
        goto fail;
    }
    out->dl = dl;
    out->desc = d;
    dl = NULL; /* handed to out */
    rc = SKIPPR_OK;
fail:
    if (dl)
        dlclose(dl);
    return rc;
}

static int is_so(const char *name)
{
    size_t n = strlen(name);
    return n > 3 && strcmp(name + n - 3, ".so") == 0;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static void scan_dir(sk_registry *r, const char *dir_in)
{
    /* One folder reached by two routes (bin/../lib and the install path)
     * is scanned once. */
    char dir[PATH_MAX];
    if (!realpath(dir_in, dir))
        return;
    for (size_t i = 0; i < r->nscanned; i++)
        if (strcmp(r->scanned[i], dir) == 0)
            return;
    if (r->nscanned < SK_ARRAY_LEN(r->scanned) &&
        (r->scanned[r->nscanned] = sk_strdup(dir)))
        r->nscanned++;
    DIR *d = opendir(dir);
    if (!d)
        return;
    char *names[256];
    size_t n = 0;
    struct dirent *e;
    while ((e = readdir(d)) && n < SK_ARRAY_LEN(names))
        if (is_so(e->d_name) && (names[n] = sk_strdup(e->d_name)))
            n++;
    closedir(d);
    qsort(names, n, sizeof names[0], cmp_str);
    for (size_t i = 0; i < n; i++) {
        char path[PATH_MAX + 256];
        int pn = snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        sk_free(names[i]);
        if (pn < 0 || (size_t)pn >= sizeof path)
            continue;
        if (r->n == SK_MAX_PLUGINS) {
            sk_warn("too many plugins; ignoring %s", path);
            continue;
        }
        char err[512];
        sk_plugin_lib lib;
        if (sk_plugin_open(path, &lib, err, sizeof err)) {
            sk_warn("%s", err);
            continue;
        }
        const sk_plugin_lib *prev = sk_registry_find(r, lib.desc->name);
        if (prev) {
            if (strcmp(prev->path, lib.path) != 0)
                sk_warn("plugin %s at %s refused: a plugin of that name was "
                        "already loaded from %s", lib.desc->name, lib.path,
                        prev->path);
            dlclose(lib.dl);
            sk_free(lib.path);
            continue;
        }
        r->libs[r->n++] = lib;
    }
}

int sk_registry_load(sk_registry *r, const sk_yaml_doc *doc,
                     const sk_ynode *extra, sk_cfg_err *err)
{
    memset(r, 0, sizeof *r);
    /* plugin_dirs: one folder, or a list of them */
    int one = extra && extra->kind == SK_Y_SCALAR;
    size_t n_extra = one ? 1 : extra ? extra->n : 0;
    for (size_t i = 0; i < n_extra; i++) {
        const sk_ynode *dn = one ? extra : extra->items[i];
        if (dn->kind != SK_Y_SCALAR || dn->value[0] != '/')
            return sk_cfg_fail(err, doc, dn, "plugin_dirs entries must be "
                               "absolute paths (plugins are never loaded "
                               "from the working directory)");
        scan_dir(r, dn->value);
    }
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n > 0) {
        exe[n] = '\0';
        char *slash = strrchr(exe, '/');
        if (slash) {
            *slash = '\0';
            char dir[PATH_MAX + 32];
            snprintf(dir, sizeof dir, "%s/../plugins", exe);
            scan_dir(r, dir);
            snprintf(dir, sizeof dir, "%s/../%s", exe, SKIPPR_PLUGIN_REL_DIR);
            scan_dir(r, dir);
        }
    }
    scan_dir(r, SKIPPR_PLUGIN_INSTALL_DIR);
    return SKIPPR_OK;
}

void sk_registry_close(sk_registry *r)
{
    for (size_t i = 0; i < r->n; i++) {
        dlclose(r->libs[i].dl);
        sk_free(r->libs[i].path);
    }
    r->n = 0;
    for (size_t i = 0; i < r->nscanned; i++)
        sk_free(r->scanned[i]);
    r->nscanned = 0;
}

const sk_plugin_lib *sk_registry_find(const sk_registry *r, const char *name)
{
    for (size_t i = 0; i < r->n; i++)
        if (strcmp(r->libs[i].desc->name, name) == 0)
            return &r->libs[i];
    return NULL;
}

const sk_plugin_lib *sk_registry_store(const sk_registry *r,
                                       const sk_yaml_doc *doc,
                                       const sk_endpoint_cfg *ep,
                                       sk_cfg_err *err)
{
    const sk_plugin_lib *lib = sk_registry_find(r, ep->plugin);
    const skippr_sink_ops *ops = lib ? lib->desc->sink : NULL;
    if (ops && (ops->flags & SKIPPR_SINK_STORE) &&
        SKIPPR_OPS_HAS(skippr_sink_ops, ops, store_list) && ops->store_get &&
        ops->store_put && ops->store_delete && ops->store_list)
        return lib;
    sk_cfg_fail(err, doc, ep->at, "state_store: the %s plugin cannot hold "
                "state (S3 can)", ep->plugin);
    return NULL;
}

/* ---- instances --------------------------------------------------------- */

int sk_instance_logged_error(const sk_instance *inst)
{
    /* An error told by another sink instance of the same run counts: the
     * instances of one sink share a cause (counters_to, the first one). */
    const sk_instance *head = inst->counters_to ? inst->counters_to : inst;
    return __atomic_load_n(&inst->errors_logged, __ATOMIC_RELAXED) != 0 ||
           __atomic_load_n(&head->errors_logged, __ATOMIC_RELAXED) != 0;
}

int sk_instance_probe(sk_instance *inst)
{
    const skippr_plugin *p = inst->plugin;
    int (*probe)(void *) = NULL;
    if (inst->is_sink && SKIPPR_OPS_HAS(skippr_sink_ops, p->sink, probe))
        probe = p->sink->probe;
    else if (!inst->is_sink &&
             SKIPPR_OPS_HAS(skippr_source_ops, p->source, probe))
        probe = p->source->probe;
    int rc = probe ? probe(inst->ctx) : SKIPPR_OK;
    if (rc && !sk_instance_logged_error(inst))
        sk_error("%s: the preflight failed: %s", inst->label,
                 skippr_status_str(rc));
    return rc;
}

static void host_log(const skippr_host *h, int level, const char *fmt, ...)
{
    sk_instance *inst = h->impl;
    if (level == SKIPPR_LOG_ERROR) {
        __atomic_fetch_add(&inst->errors_logged, 1, __ATOMIC_RELAXED);
        if (inst->counters_to)
            __atomic_fetch_add(&inst->counters_to->errors_logged, 1,
                               __ATOMIC_RELAXED);
    }
    va_list ap;
    va_start(ap, fmt);
    sk_vlog(level, inst->label, fmt, ap);
    va_end(ap);
}

static void host_counter_add(const skippr_host *h, const char *name,
                             int64_t delta)
{
    sk_instance *inst = h->impl;
    if (inst->counters_to)
        inst = inst->counters_to;
    pthread_mutex_lock(&inst->counters_mu);
    size_t i = 0;
    while (i < inst->ncounters && strcmp(inst->counters[i].name, name) != 0)
        i++;
    if (i == inst->ncounters && i < SK_MAX_COUNTERS) {
        snprintf(inst->counters[i].name, sizeof inst->counters[i].name, "%s",
                 name);
        inst->ncounters++;
    }
    if (i < inst->ncounters)
        inst->counters[i].value += delta;
    pthread_mutex_unlock(&inst->counters_mu);
}

size_t sk_instance_counters(sk_instance *inst, sk_counter *out, size_t cap)
{
    pthread_mutex_lock(&inst->counters_mu);
    size_t n = inst->ncounters < cap ? inst->ncounters : cap;
    memcpy(out, inst->counters, n * sizeof *out);
    pthread_mutex_unlock(&inst->counters_mu);
    return n;
}

void sk_instance_log_counters(sk_instance *inst)
{
    char line[1024] = "";
    pthread_mutex_lock(&inst->counters_mu);
    for (size_t i = 0; i < inst->ncounters; i++) {
        size_t n = strlen(line);
        snprintf(line + n, sizeof line - n, "%s%s=%lld", i ? ", " : "",
                 inst->counters[i].name, (long long)inst->counters[i].value);
    }
    pthread_mutex_unlock(&inst->counters_mu);
    if (*line)
        sk_info("%s: %s", inst->label, line);
}

/* A fenced process stops too: whatever it would still do, it may not
 * write. */
static int host_should_stop(const skippr_host *h)
{
    SK_UNUSED(h);
    return atomic_load(&sk_stop_requested) || sk_fence_lapsed();
}

static int host_fenced(const skippr_host *h)
{
    SK_UNUSED(h);
    return sk_fence_lapsed();
}

/* The streaming calls go to the engine's hooks; without them (a sink, or
 * an instance made only to validate) they fail, saying why. */
static int no_stream(const skippr_host *h, const char *call)
{
    host_log(h, SKIPPR_LOG_ERROR, "%s() called outside a streaming source's "
             "poll()", call);
    return SKIPPR_FATAL;
}

static int host_emit(const skippr_host *h, const skippr_message *m)
{
    const sk_instance *inst = h->impl;
    if (!inst->stream)
        return no_stream(h, "emit");
    if (!m || m->struct_size < sizeof *m) {
        host_log(h, SKIPPR_LOG_ERROR, "emit(): skippr_message.struct_size is "
                 "%u, this engine needs %zu", m ? m->struct_size : 0,
                 sizeof *m);
        return SKIPPR_INVAL;
    }
    return inst->stream->emit(inst->stream->ud, m);
}

static int host_position(const skippr_host *h, const char *unit,
                         int64_t *next)
{
    const sk_instance *inst = h->impl;
    if (!inst->stream)
        return no_stream(h, "position");
    return inst->stream->position(inst->stream->ud, unit, next);
}

static int host_sync(const skippr_host *h)
{
    const sk_instance *inst = h->impl;
    if (!inst->stream)
        return no_stream(h, "sync");
    return inst->stream->sync(inst->stream->ud);
}

/* The row for key k: its own, or a SKIPPR_OPT_PREFIX row whose name
 * starts it. */
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
    sk_buf b;
    sk_buf_init(&b, 1u << 16);
    *why = "out of memory";
    for (size_t i = 0; i < v->n; i++) {
        const sk_ynode *it = v->items[i];
        if (!it || it->kind != SK_Y_SCALAR || !*it->value ||
            strchr(it->value, ',')) {
            *why = "every list item must be a non-empty value without ','";
            sk_buf_free(&b);
            return NULL;
        }
        if ((i && sk_buf_putc(&b, ',')) ||
            sk_buf_append(&b, it->value, strlen(it->value))) {
            sk_buf_free(&b);
            return NULL;
        }
    }
    if (sk_buf_putc(&b, 0)) {
        sk_buf_free(&b);
        return NULL;
    }
    return (char *)b.data;
}

static int fill_option(sk_instance *inst, const skippr_option *o,
                       const char *value, const sk_yaml_doc *doc,
                       const sk_ynode *at, sk_cfg_err *err)
{
    uint8_t *base = (uint8_t *)inst->ctx + o->offset;
    switch (o->type) {
    case SKIPPR_OPT_STRING:
    case SKIPPR_OPT_SECRET: {
        const char *s;
        char abs[4096];
        /* A file system path: a relative one is the config file's
         * folder's, not the working directory's. */
        if ((o->required & SKIPPR_OPT_FS_PATH) && value[0] != '/') {
            if (sk_config_abs_path(doc, value, abs, sizeof abs))
                return sk_cfg_fail(err, doc, at, "%s: path %s: too long, or "
                                   "the working directory is unreadable",
                                   inst->label, value);
            value = abs;
        }
        if (keep_string(inst, value, &s))
            return sk_cfg_fail(err, doc, at, "out of memory");
        memcpy(base, &s, sizeof s);
        return SKIPPR_OK;
    }
    case SKIPPR_OPT_INT: {
        int64_t v;
        if (sk_parse_int_value(value, &v))
            return sk_cfg_fail(err, doc, at, "%s: option %s wants an "
                               "integer, not '%s'", inst->label, o->name,
                               value);
        memcpy(base, &v, sizeof v);
        return SKIPPR_OK;
    }
    case SKIPPR_OPT_BOOL: {
        int b;
        if (sk_parse_bool(value, &b))
            return sk_cfg_fail(err, doc, at, "%s: option %s wants true or "
                               "false, not '%s'", inst->label, o->name, value);
        memcpy(base, &b, sizeof b);
        return SKIPPR_OK;
    }
    case SKIPPR_OPT_PREFIX:
        break; /* filled by fill_prefixes() */
    }
    return sk_cfg_fail(err, doc, at, "%s: option %s has an unknown type in "
                       "the plugin's table", inst->label, o->name);
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
static int fill_options(sk_instance *inst, const skippr_option *table,
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

int sk_instance_new(const skippr_plugin *p, int is_sink,
                    const sk_yaml_doc *doc, const sk_endpoint_cfg *ep,
                    int start, const sk_stream_hooks *stream,
                    int64_t memory_budget, sk_instance **out,
                    sk_cfg_err *err)
{
    int rc = SKIPPR_NOMEM;
    const skippr_option *table =
        is_sink ? p->sink->options : p->source->options;
    const skippr_option *common =
        is_sink ? sk_common_sink_options : sk_common_source_options;
    size_t ctx_size = is_sink ? p->sink->ctx_size : p->source->ctx_size;
    sk_instance *inst = sk_calloc(1, sizeof *inst);
    if (!inst)
        goto oom;
    pthread_mutex_init(&inst->counters_mu, NULL);
    inst->plugin = p;
    inst->is_sink = is_sink;
    inst->format = is_sink ? SK_FORMAT_JSON : SK_FORMAT_AUTO;
    inst->csv_delim = ',';
    inst->label = sk_asprintf("%s %s (%s)", p->name, is_sink ? "sink" : "source",
                              sk_config_ref_name(doc, ep->ref));
    inst->ctx = sk_calloc(1, ctx_size ? ctx_size : 1);
    if (!inst->label || !inst->ctx)
        goto oom;
    inst->host = (skippr_host){.struct_size = sizeof(skippr_host),
                               .log = host_log,
                               .counter_add = host_counter_add,
                               .should_stop = host_should_stop,
                               .emit = host_emit,
                               .impl = inst,
                               .memory_budget = memory_budget,
                               .flags = SKIPPR_HOST_SYNCS_SINKS,
                               .position = host_position,
                               .sync = host_sync,
                               .crc32c = sk_crc32c,
                               .fenced = host_fenced};
    if (start & SK_START_ONCE)
        inst->host.flags |= SKIPPR_HOST_ONCE;
    if (start & SK_START_NAMES_FIRST)
        inst->host.flags |= SKIPPR_HOST_NAMES_FIRST;
    if (start & SK_START_CHECK)
        inst->host.flags |= SKIPPR_HOST_CHECK;
    inst->stream = stream;

    if ((rc = fill_options(inst, table, common, doc, ep, err)))
        goto out;
    if (start) {
        inst->inited = 1; /* destroy() runs even after a failed init() */
        rc = is_sink ? p->sink->init(inst->ctx, &inst->host)
                     : p->source->init(inst->ctx, &inst->host);
        if (rc && sk_instance_logged_error(inst)) {
            err->msg[0] = '\0'; /* the plugin said why */
            goto out;
        }
        if (rc) {
            sk_cfg_fail(err, doc, ep->at, "%s failed to start: %s",
                        inst->label, skippr_status_str(rc));
            goto out;
        }
    }
    *out = inst;
    inst = NULL; /* handed to the caller */
    rc = SKIPPR_OK;
    goto out;
oom:
    snprintf(err->msg, sizeof err->msg, "out of memory");
out:
    sk_instance_free(inst);
    return rc;
}

void sk_instance_free(sk_instance *inst)
{
    if (!inst)
        return;
    if (inst->inited) {
        if (inst->is_sink && inst->plugin->sink->destroy)
            inst->plugin->sink->destroy(inst->ctx);
        else if (!inst->is_sink && inst->plugin->source->destroy)
            inst->plugin->source->destroy(inst->ctx);
    }
    for (size_t i = 0; i < inst->nstrings; i++)
        sk_free(inst->strings[i]);
    sk_free(inst->strings);
    sk_free(inst->csv_columns);
    sk_free(inst->xml_record_element);
    pthread_mutex_destroy(&inst->counters_mu);
    sk_free(inst->ctx);
    sk_free(inst->label);
    sk_free(inst);
}
