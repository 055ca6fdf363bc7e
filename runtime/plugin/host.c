/* The engine's services to a plugin instance (host.h).
 *
 * Thread: any; a plugin may call from its own threads. */
#include "plugin/host.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "base/common.h"
#include "base/crc32c.h"
#include "base/fence.h"

atomic_int sk_stop_requested;

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
/* inst->host: the engine's services for inst's plugin, with the flags
 * that the start bits (SK_START_*) ask for. */
void sk_host_wire(sk_instance *inst, int start, int64_t memory_budget)
{
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
}
