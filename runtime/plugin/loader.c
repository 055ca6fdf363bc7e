#include "plugin/loader.h"

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
#include "plugin/fill.h"
#include "format/decompress.h"

const skippr_url_form *sk_plugin_urls(const skippr_plugin *p)
{
    return SKIPPR_OPS_HAS(skippr_plugin, p, urls) ? p->urls : NULL;
}

const skippr_option *sk_plugin_option(const skippr_plugin *p, int is_sink,
                                      const char *name)
{
    const skippr_option *t = is_sink ? (p->sink ? p->sink->options : NULL)
                                     : (p->source ? p->source->options : NULL);
    for (; t && t->name; t++)
        if (strcmp(t->name, name) == 0)
            return t;
    return NULL;
}

/* Every option d's URL forms name is in the table of each role the form
 * takes. NULL, or the first option that is not. */
static const char *urls_unknown_option(const skippr_plugin *d)
{
    const skippr_url_form *f = sk_plugin_urls(d);
    for (; f && f->scheme; f++) {
        const char *names[] = {f->url_option, f->host_option, f->path_option,
                               f->rest_option};
        for (size_t i = 0; i < SK_ARRAY_LEN(names); i++)
            if (names[i] && (((f->roles & SKIPPR_URL_SOURCE) &&
                              !sk_plugin_option(d, 0, names[i])) ||
                             ((f->roles & SKIPPR_URL_SINK) &&
                              !sk_plugin_option(d, 1, names[i]))))
                return names[i];
    }
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
    /* Plugins built before urls was appended are still good. */
    if (d->struct_size < offsetof(skippr_plugin, urls)) {
        snprintf(err, errlen, "%s: descriptor is %u bytes, expected at least "
                 "%zu: not binary compatible", path, d->struct_size,
                 offsetof(skippr_plugin, urls));
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
    const char *bad = urls_unknown_option(d);
    if (bad) {
        snprintf(err, errlen, "%s (%s): a URL form names option '%s', which "
                 "its options table lacks", path, d->name, bad);
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
    sk_host_wire(inst, start, memory_budget);
    inst->stream = stream;

    if ((rc = sk_fill_options(inst, table, common, doc, ep, err)))
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
