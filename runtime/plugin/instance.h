/* A source or sink instance: the plugin's context, the host services it
 * was given, the options the engine reads, its counters. Types only;
 * loader.c makes and frees instances, fill.c fills their options, host.c
 * serves them. */
#ifndef SK_PLUGIN_INSTANCE_H
#define SK_PLUGIN_INSTANCE_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include <skippr/plugin.h>

#include "plugin/formats.h"

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

#endif
