/* Configuration: the seed-compatible skippr.yml.
 *
 *   skippr:        workspace, skipprd_el_storage_mode (local or s3),
 *                  state_store, state_lease_seconds, state_dir,
 *                  plugin_dirs, threads
 *   pipelines:     NAME: type (copy), data_source, data_sink,
 *                  buffer_threshold_seconds, max_object_bytes, transform: {...}
 *   data_sources:  NAME: { PluginName: { options } }
 *   data_sinks:    NAME: { PluginName: { options } }
 *
 * libyaml parses the file into a small tree that keeps each node's line and
 * column, so every error can name file:line:col. ${VAR} and ${VAR:-default}
 * in scalars are replaced from the environment; an unset variable without a
 * default is an error. "$${" stands for a literal "${".
 */
#ifndef SK_CONFIG_H
#define SK_CONFIG_H

#include <stddef.h>
#include <stdint.h>

#include "route/route.h"
#include "base/optval.h" /* sk_parse_size */

typedef enum sk_ykind { SK_Y_SCALAR, SK_Y_MAP, SK_Y_SEQ } sk_ykind;

typedef struct sk_ynode {
    sk_ykind kind;
    int line, col;   /* 1-based */
    char *value;     /* scalar text after interpolation */
    int quoted;      /* scalar was quoted */
    size_t n;        /* map pairs or seq items */
    struct sk_ynode **keys;  /* map: key scalars */
    struct sk_ynode **items; /* map: values; seq: items */
} sk_ynode;

typedef struct sk_yaml_doc {
    char *path;
    /* The folder the file is in, symlinks resolved (realpath), against
     * which relative paths in it are read; NULL for a document from memory
     * (they are then read against the working directory). */
    char *dir;
    sk_ynode *root;
} sk_yaml_doc;

/* Error text, with file:line:col when known. */
typedef struct sk_cfg_err {
    char msg[1024];
} sk_cfg_err;

/* Load and interpolate a YAML file. Returns SKIPPR_OK, or a negative status
 * with err filled in. On success caller owns *doc: sk_yaml_free(). */
int sk_yaml_load(const char *path, sk_yaml_doc **doc, sk_cfg_err *err);
/* The same from data[0..len), named `name` in errors. */
int sk_yaml_load_mem(const char *name, const void *data, size_t len,
                     sk_yaml_doc **doc, sk_cfg_err *err);
void sk_yaml_free(sk_yaml_doc *doc);
/* Map lookup; NULL when absent or when map is not a map. */
const sk_ynode *sk_ymap_get(const sk_ynode *map, const char *key);
/* Format "file:line:col: message" into err. Returns SKIPPR_INVAL. */
int sk_cfg_fail(sk_cfg_err *err, const sk_yaml_doc *doc, const sk_ynode *at,
                const char *fmt, ...) SKIPPR_PRINTF(4, 5);

typedef struct sk_endpoint_cfg {
    const char *ref;           /* "data_sources.X" as written */
    const char *plugin;        /* "File", "S3", ... */
    const sk_ynode *options;   /* the plugin's option map (may be NULL) */
    const sk_ynode *at;        /* for error positions */
} sk_endpoint_cfg;

/* multiline_records: what a JSON record that spans lines becomes when the
 * sink writes .jsonl objects, which must hold one record per line. */
typedef enum sk_multiline {
    SK_MULTILINE_JSON = 0, /* its bytes, in a sibling .json object */
    SK_MULTILINE_COMPACT,  /* insignificant whitespace removed, in .jsonl */
    SK_MULTILINE_DEAD      /* dead-lettered */
} sk_multiline;

/* changed_units: what a unit that changed since it was copied becomes. */
typedef enum sk_changed_units {
    SK_CHANGED_SKIP = 0, /* not copied; the run's exit status says so */
    SK_CHANGED_COPY,     /* its new version copied whole */
    SK_CHANGED_FAIL      /* the run stops with an error */
} sk_changed_units;

typedef struct sk_pipeline_cfg {
    const char *name;
    const char *workspace;
    /* Always absolute: a relative state_dir (and the default, ".skippr") is
     * read against the config file's folder, so the same file finds the
     * same state from any working directory. */
    char state_dir[4096];
    const sk_ynode *plugin_dirs; /* seq or NULL */
    int threads;                /* worker threads; default: online CPUs */
    int64_t buffer_threshold_seconds; /* longest a slice stays open */
    int64_t allowed_lateness_seconds; /* event-time sealing's slack */
    const char *arrival_key_pattern;  /* NULL: Firehose and Hive keys */
    int64_t max_object_bytes;   /* size cap of one output object */
    int64_t wal_disk_budget;    /* bytes of WAL before early flushes */
    int64_t memory_budget;      /* bytes of open blocks before spilling */
    int64_t max_record_bytes;   /* larger records are dead-lettered */
    int64_t poll_interval_seconds; /* continuous mode: time between lists */
    int64_t commit_interval_ms; /* longest time between group commits */
    int64_t list_batch;         /* units listed per round */
    int64_t full_listing_interval_seconds; /* incremental listing's
                                            * reconcile */
    int incremental_listing;    /* --once lists from the mark too */
    int verify_done_units;      /* compare done units' versions */
    int64_t upload_concurrency; /* sealed slices written at once */
    int64_t wal_zstd_level;     /* 0: WAL blocks plain; 1-19: zstd level */
    int64_t retry_backoff_ms;   /* a sink's first retry waits about this */
    int64_t max_inflate_ratio;  /* decompressed : compressed bytes past
                                 * 64 MiB, at most; 0: no limit */
    int multiline;              /* multiline_records: an sk_multiline */
    int changed_units;          /* changed_units: an sk_changed_units */
    int allow_second_copy;      /* write beside another state's claim */
    const char *metrics_listen; /* "ADDR:PORT" of /metrics, or NULL */
    uint32_t shard_index;       /* --shard I/N: this process's share */
    uint32_t shard_count;       /* 0 or 1: unsharded */
    sk_route_config route;
    sk_endpoint_cfg source;
    sk_endpoint_cfg sink;
    /* skipprd_el_storage_mode: s3: the data_sinks entry whose store holds
     * the state (plugin NULL in local mode), and the lease's length */
    sk_endpoint_cfg state_store;
    int64_t lease_seconds;
} sk_pipeline_cfg;

/* A pipeline's scalar settings (besides type, data_source, data_sink) and
 * its transform: keys, NULL-terminated: what sk_config_pipeline() takes
 * and the flags of `skipprd sync --source URL ...` are named after. */
const char *const *sk_config_setting_keys(void);
const char *const *sk_config_transform_keys(void);

/* Validate the top level and extract one pipeline. Pointers in out borrow
 * from doc. Returns SKIPPR_OK or SKIPPR_INVAL with err set. */
int sk_config_pipeline(const sk_yaml_doc *doc, const char *pipeline,
                       sk_pipeline_cfg *out, sk_cfg_err *err);

/* v as an absolute path into out (cap bytes): a relative one read against
 * the config file's folder (doc->dir), or the working directory for a
 * document from memory (flags) or doc NULL. Leading "./" are dropped.
 * SKIPPR_OK, SKIPPR_RANGE when it does not fit, or the getcwd failure. */
int sk_config_abs_path(const sk_yaml_doc *doc, const char *v, char *out,
                       size_t cap);

/* Names of all pipelines in file order; borrowed from doc. */
size_t sk_config_pipeline_names(const sk_yaml_doc *doc, const char **names,
                                size_t cap);

#endif
