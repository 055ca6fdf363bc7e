/* What the pipeline says while a sink fails: a sink that fails for every
 * slice at once (an endpoint gone, a bucket deleted) must not fill the log
 * with a line per slice and attempt. A retry is said once per retry cycle:
 * when its attempt number is the highest yet, or nothing was said for a
 * minute (a later, unrelated fault); the first slice that gives up says
 * so and makes the others stop retrying (their lines go to debug), and
 * the run stops. */
#include "pipeline/retrynews.h"

#include <stdarg.h>
#include <time.h>

#define RETRY_QUIET_NS (60 * 1000000000LL)

struct pl_retrynews {
    int sink_failed; /* a sink write gave up and said so */
    int64_t said_ns; /* the last retry said at warning level */
    int said_top;    /* the highest attempt number said */
};

pl_retrynews *pl_retrynews_new(void)
{
    return sk_calloc(1, sizeof(pl_retrynews));
}

void pl_retrynews_free(pl_retrynews *n)
{
    sk_free(n);
}

void pl_retry_say(pl_retrynews *n, int attempt, const char *fmt, ...)
{
    int64_t now = (int64_t)sk_now_ns();
    int64_t was = __atomic_load_n(&n->said_ns, __ATOMIC_RELAXED);
    int top = __atomic_load_n(&n->said_top, __ATOMIC_RELAXED);
    int say = (attempt > top || was == 0 || now - was >= RETRY_QUIET_NS) &&
              __atomic_compare_exchange_n(&n->said_ns, &was, now, 0,
                                          __ATOMIC_RELAXED, __ATOMIC_RELAXED);
    if (say)
        __atomic_store_n(&n->said_top,
                         now - was >= RETRY_QUIET_NS ? attempt
                                                     : SK_MAX(top, attempt),
                         __ATOMIC_RELAXED);
    va_list ap;
    va_start(ap, fmt);
    sk_vlog(say ? SKIPPR_LOG_WARN : SKIPPR_LOG_DEBUG, NULL, fmt, ap);
    va_end(ap);
}

int pl_sink_failing(const pl_retrynews *n)
{
    return __atomic_load_n(&n->sink_failed, __ATOMIC_RELAXED) != 0;
}

void pl_sink_gave_up(pl_retrynews *n, const sk_instance *sink,
                     const char *fmt, ...)
{
    int first = !__atomic_exchange_n(&n->sink_failed, 1, __ATOMIC_RELAXED);
    va_list ap;
    va_start(ap, fmt);
    sk_vlog(first && !sk_instance_logged_error(sink) ? SKIPPR_LOG_ERROR
                                                     : SKIPPR_LOG_DEBUG,
            NULL, fmt, ap);
    va_end(ap);
}
