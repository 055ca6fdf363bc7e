/* A pipeline's settings as sk_config_pipeline() fills them: its source,
 * sink and state store, the engine's keys (options.h names each, with its
 * default), and the routing. Types only. */
#ifndef SK_CONFIG_SETTINGS_H
#define SK_CONFIG_SETTINGS_H

#include <stdint.h>

#include "config/ynode.h"
#include "route/route.h"

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

/* skipprd_el_storage_mode: where the state lives. */
typedef enum sk_storage_mode {
    SK_STORAGE_LOCAL = 0, /* the state folder only */
    SK_STORAGE_S3         /* the store state_store names holds it */
} sk_storage_mode;

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
    int storage_mode; /* an sk_storage_mode */
    sk_endpoint_cfg state_store;
    int64_t lease_seconds;
} sk_pipeline_cfg;

#endif
