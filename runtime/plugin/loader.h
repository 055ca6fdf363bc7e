/* Plugin loading (dlopen and the registry) and an instance's life.
 *
 * Plugins are found in the configured plugin_dirs (absolute paths only),
 * then next to the executable (build tree: <exe>/../plugins; install:
 * <exe>/../<libdir>/skippr/plugins), then the compiled-in install dir. Never in the
 * working directory. Every *.so in those folders is opened; the loader checks
 * abi_version and struct_size before any other field, and refuses a plugin
 * whose name was already taken by an earlier one.
 */
#ifndef SK_LOADER_H
#define SK_LOADER_H

#include <stddef.h>
#include <stdint.h>

#include "config/config.h"
#include "plugin/commonopts.h"
#include "plugin/formats.h"
#include "plugin/host.h"
#include "plugin/instance.h"

#define SK_MAX_PLUGINS 64

typedef struct sk_plugin_lib {
    void *dl;
    const skippr_plugin *desc;
    char *path;
} sk_plugin_lib;

typedef struct sk_registry {
    sk_plugin_lib libs[SK_MAX_PLUGINS];
    size_t n;
    char *scanned[16]; /* folders already scanned (real paths) */
    size_t nscanned;
} sk_registry;

/* Load one .so and check its descriptor. On failure returns a negative
 * status with a message in err (e.g. "ABI version 2, engine has 1"). */
int sk_plugin_open(const char *path, sk_plugin_lib *out, char *err,
                   size_t errlen);

/* p's URL forms (skippr_url_form), or NULL for a plugin without any or
 * built before they were appended. Borrowed from the plugin. */
const skippr_url_form *sk_plugin_urls(const skippr_plugin *p);
/* The option name of p's source (is_sink 0) or sink table, or NULL.
 * Borrowed from the plugin. */
const skippr_option *sk_plugin_option(const skippr_plugin *p, int is_sink,
                                      const char *name);

/* Scan the plugin folders. extra_dirs may be NULL. Problems with single
 * files are logged as warnings; only a relative configured folder or an
 * allocation failure fails the call. */
int sk_registry_load(sk_registry *r, const sk_yaml_doc *doc,
                     const sk_ynode *extra_dirs, sk_cfg_err *err);
void sk_registry_close(sk_registry *r);
const sk_plugin_lib *sk_registry_find(const sk_registry *r, const char *name);
/* The plugin named by state_store (skipprd_el_storage_mode: s3) when it
 * can hold a pipeline's state (a sink with SKIPPR_SINK_STORE and the
 * store calls); else NULL, with the reason in err (at ep's line). */
const sk_plugin_lib *sk_registry_store(const sk_registry *r,
                                       const sk_yaml_doc *doc,
                                       const sk_endpoint_cfg *ep,
                                       sk_cfg_err *err);

/* Validate opts against the plugin's table plus the engine's common
 * options, allocate the context, fill it and, if start has SK_START, call
 * init(). stream (NULL unless a streaming source) must outlive the
 * instance.
 * memory_budget reaches the plugin as host->memory_budget.
 * On failure err names file:line:col. Caller owns *out: sk_instance_free().
 */
int sk_instance_new(const skippr_plugin *p, int is_sink,
                    const sk_yaml_doc *doc, const sk_endpoint_cfg *ep,
                    int start, const sk_stream_hooks *stream,
                    int64_t memory_budget, sk_instance **out,
                    sk_cfg_err *err);
void sk_instance_free(sk_instance *inst);
/* Non-zero once the instance's plugin has logged an error line. The engine
 * then reports the failure that follows at info level, so a run that stops
 * shows one error line, the plugin's, which says most. */
int sk_instance_logged_error(const sk_instance *inst);

/* The plugin's preflight (skippr_*_ops.probe) of a started instance:
 * SKIPPR_OK when it has none; else its verdict, said in one error line
 * (the plugin's own, else one naming the instance). */
int sk_instance_probe(sk_instance *inst);

#endif
