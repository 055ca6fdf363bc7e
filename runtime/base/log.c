/* Logging: "skipprd: LEVEL: message" lines, or JSON objects (log.h). */
#include "base/log.h"

#include <jansson.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

int sk_log_level = SKIPPR_LOG_INFO;
int sk_log_progress_active;
int sk_log_json;
static pthread_mutex_t log_mu = PTHREAD_MUTEX_INITIALIZER;

static const char *level_name(int level)
{
    switch (level) {
    case SKIPPR_LOG_ERROR:
        return "error";
    case SKIPPR_LOG_WARN:
        return "warning";
    case SKIPPR_LOG_INFO:
        return "info";
    default:
        return "debug";
    }
}

/* One log line as a JSON object (jansson escapes the text; a line that
 * is not valid UTF-8 has its bytes replaced rather than dropped). */
/* figures[0..n) as fields of o. */
static void add_figures(json_t *o, const sk_figure *f, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        double v = f[i].value;
        int whole = v == (double)(int64_t)v && v > -9e15 && v < 9e15;
        json_object_set_new(o, f[i].name, whole ? json_integer((int64_t)v)
                                                : json_real(v));
    }
}

static void log_json(int level, const char *prefix, const char *line,
                     const sk_figure *figures, size_t nfigures)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    struct tm tm;
    gmtime_r(&ts.tv_sec, &tm);
    char when[48];
    size_t wl = strftime(when, sizeof when - 6, "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(when + wl, sizeof when - wl, ".%03dZ",
             (int)(ts.tv_nsec / 1000000) % 1000);
    json_t *o = json_object();
    json_t *msg = json_string(line);
    if (!msg) { /* not UTF-8: keep the bytes as Latin-1 code points */
        char esc[2048 * 2];
        size_t k = 0;
        for (const unsigned char *p = (const unsigned char *)line;
             *p && k + 2 < sizeof esc; p++) {
            if (*p < 0x80) {
                esc[k++] = (char)*p;
            } else {
                esc[k++] = (char)(0xC0 | (*p >> 6));
                esc[k++] = (char)(0x80 | (*p & 0x3F));
            }
        }
        esc[k] = '\0';
        msg = json_string(esc);
    }
    char *text = NULL;
    if (o && msg && json_object_set_new(o, "time", json_string(when)) == 0 &&
        json_object_set_new(o, "level", json_string(level_name(level))) ==
            0 &&
        (!prefix ||
         json_object_set_new(o, "source", json_string(prefix)) == 0) &&
        json_object_set_new(o, "msg", msg) == 0) {
        msg = NULL; /* o owns it */
        add_figures(o, figures, nfigures);
        text = json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER);
    }
    json_decref(msg);
    json_decref(o);
    pthread_mutex_lock(&log_mu);
    if (text)
        fprintf(stderr, "%s\n", text);
    else
        fprintf(stderr, "{\"level\":\"error\",\"msg\":\"a log line could "
                        "not be encoded\"}\n");
    pthread_mutex_unlock(&log_mu);
    free(text);
}

/* One log line, with figures (json only). */
static void vlog_figures(int level, const char *prefix, const sk_figure *f,
                         size_t nf, const char *fmt, va_list ap)
{
    if (level > sk_log_level)
        return;
    char line[2048];
    int n = vsnprintf(line, sizeof line, fmt, ap);
    if (n < 0)
        return;
    if (sk_log_json) {
        log_json(level, prefix, line, f, nf);
        return;
    }
    pthread_mutex_lock(&log_mu);
    /* A progress line may be on the terminal; start on a clean line. */
    if (sk_log_progress_active)
        fputs("\r\033[K", stderr);
    fprintf(stderr, "skipprd: %s: %s%s%s\n", level_name(level),
            prefix ? prefix : "", prefix ? ": " : "", line);
    pthread_mutex_unlock(&log_mu);
}

void sk_vlog(int level, const char *prefix, const char *fmt, va_list ap)
{
    vlog_figures(level, prefix, NULL, 0, fmt, ap);
}

void sk_log_figures(int level, const sk_figure *f, size_t n,
                    const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vlog_figures(level, NULL, f, n, fmt, ap);
    va_end(ap);
}

void sk_log(int level, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    sk_vlog(level, NULL, fmt, ap);
    va_end(ap);
}
