/* Plugin loading and instances.
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

#include <pthread.h>
#include <stddef.h>

#include <stdatomic.h>

#include "config/config.h"

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

typedef enum sk_format {
    SK_FORMAT_AUTO = 0,
    SK_FORMAT_JSON,  /* any JSON framing; output: one record per line */
    SK_FORMAT_JSONL, /* source only: one record per line, nothing else */
    SK_FORMAT_CSV,   /* RFC 4180 rows under a header row (csvpeek.h) */
    SK_FORMAT_XML,   /* elements under a root (xmlpeek.h) */
} sk_format;

/* The format a name gives: "json", "jsonl" or "ndjson" (SK_FORMAT_JSONL:
 * one record per line), "csv", "xml", and "auto". -1 for any other name.
 * The one parser of format names (the format option, a document's). */
int sk_format_parse(const char *name);

/* NULL if records of format src can be written as format sink by a
 * pipeline with this validate setting (src SK_FORMAT_AUTO: not known until
 * each unit is read); else why not, a static string. */
const char *sk_format_pair_problem(sk_format src, sk_format sink,
                                   int validate);

/* A configured source or sink: the plugin's context plus the options the
 * engine itself reads (format, csv and xml settings). */
#define SK_MAX_COUNTERS 32

typedef struct sk_counter {
    char name[48];
    int64_t value;
} sk_counter;

typedef struct sk_instance {
    const skippr_plugin *plugin;
    int is_sink;
    char *label; /* e.g. "File sink (data_sinks.out)" */
    void *ctx;   /* engine-allocated, zeroed, ctx_size bytes */
    skippr_host host;
    int inited;
    sk_format format;
    uint8_t csv_delim;  /* sources: csv_delimiter */
    char *csv_columns;  /* sources: csv_columns, owned; NULL: a header row */
    char *xml_record_element; /* sources: owned; NULL: the root's children */
    char **strings;  /* allocations ctx points to (option strings, prefix
                      * arrays), owned */
    size_t nstrings;
    /* counters the plugin reports through host->counter_add */
    pthread_mutex_t counters_mu;
    sk_counter counters[SK_MAX_COUNTERS];
    size_t ncounters;
    int errors_logged; /* error lines the plugin logged (atomic access) */
    /* Counters go to this instance's table instead (sibling instances of
     * one sink, one per upload thread); NULL: its own. Not owned. */
    struct sk_instance *counters_to;
    /* A streaming source's engine side; NULL otherwise. Not owned. */
    const struct sk_stream_hooks *stream;
} sk_instance;

/* What a streaming source's host calls reach (see skippr_host): the
 * engine's handlers, called on the poll() thread with ud. */
typedef struct sk_stream_hooks {
    int (*emit)(void *ud, const skippr_message *m);
    int (*position)(void *ud, const char *unit, int64_t *next);
    int (*sync)(void *ud);
    void *ud;
} sk_stream_hooks;

/* sk_instance_new() start bits. */
#define SK_START 1      /* call init() */
#define SK_START_ONCE 2 /* host->flags gets SKIPPR_HOST_ONCE */
#define SK_START_NAMES_FIRST 4 /* and SKIPPR_HOST_NAMES_FIRST */
#define SK_START_CHECK 8 /* and SKIPPR_HOST_CHECK (validate --reach) */

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
/* Copy up to cap of the instance's counters into out; returns how many.
 * Safe from any thread. */
size_t sk_instance_counters(sk_instance *inst, sk_counter *out, size_t cap);
/* Log the instance's counters on one info line (nothing if none). */
void sk_instance_log_counters(sk_instance *inst);

/* Options the engine reads on every source / sink; name == NULL ends. */
extern const skippr_option sk_common_source_options[];
extern const skippr_option sk_common_sink_options[];
/* Whether common option name means something for p's source or sink
 * (csv_* and xml_* only for sources that can give CSV or XML). */
int sk_common_option_applies(const skippr_plugin *p, int is_sink,
                             const char *name);

/* Set on shutdown (SIGINT, SIGTERM: the signal handler stores 1); read by
 * the pipeline thread, the upload threads, and plugins through
 * should_stop() from any of their threads. A lock-free atomic, so the
 * handler's store is async-signal-safe and every reader sees it. */
extern atomic_int sk_stop_requested;

#endif
