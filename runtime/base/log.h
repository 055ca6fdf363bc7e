/* Logging (log.c): lines to stderr, as text or JSON. */
#ifndef SK_LOG_H
#define SK_LOG_H

#include <stdarg.h>
#include <stddef.h>

#include <skippr/plugin.h> /* SKIPPR_LOG_*, SKIPPR_PRINTF */

/* Logging. Lines go to stderr as "skipprd: LEVEL: message". Thread-safe. */
extern int sk_log_level;
/* Set while a progress line is on the terminal, so log lines clear it. */
extern int sk_log_progress_active;
/* Log lines as JSON objects, one a line (--log-format json):
 * {"time": RFC 3339 UTC with ms, "level", "source" (the plugin instance,
 * when a plugin logs), "msg"}. */
extern int sk_log_json;
void sk_log(int level, const char *fmt, ...) SKIPPR_PRINTF(2, 3);
void sk_vlog(int level, const char *prefix, const char *fmt, va_list ap);
/* A figure a line reports: with --log-format json each is a field of its
 * own (a number), beside the msg that says them in words. */
typedef struct sk_figure {
    const char *name; /* a field name, e.g. "records" */
    double value;     /* whole numbers are written as integers */
} sk_figure;
void sk_log_figures(int level, const sk_figure *f, size_t n,
                    const char *fmt, ...) SKIPPR_PRINTF(4, 5);
#define sk_error(...) sk_log(SKIPPR_LOG_ERROR, __VA_ARGS__)
#define sk_warn(...) sk_log(SKIPPR_LOG_WARN, __VA_ARGS__)
#define sk_info(...) sk_log(SKIPPR_LOG_INFO, __VA_ARGS__)
#define sk_debug(...)                                                          \
    do {                                                                       \
        if (sk_log_level >= SKIPPR_LOG_DEBUG)                                  \
            sk_log(SKIPPR_LOG_DEBUG, __VA_ARGS__);                             \
    } while (0)

#endif
