/* The engine's services to a plugin instance (host.c): logging, counters,
 * the stop and fence flags, a streaming source's emit, position and sync. */
#ifndef SK_PLUGIN_HOST_H
#define SK_PLUGIN_HOST_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "plugin/instance.h"

/* Set on shutdown (SIGINT, SIGTERM: the signal handler stores 1); read by
 * the pipeline thread, the upload threads, and plugins through
 * should_stop() from any of their threads. A lock-free atomic, so the
 * handler's store is async-signal-safe and every reader sees it. */
extern atomic_int sk_stop_requested;


/* inst->host: the engine's services for inst's plugin, with the flags
 * that the start bits (SK_START_*) ask for. */
void sk_host_wire(sk_instance *inst, int start, int64_t memory_budget);

/* Copy up to cap of the instance's counters into out; returns how many.
 * Safe from any thread. */
size_t sk_instance_counters(sk_instance *inst, sk_counter *out, size_t cap);
/* Log the instance's counters on one info line (nothing if none). */
void sk_instance_log_counters(sk_instance *inst);

#endif
