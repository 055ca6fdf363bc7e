/* The Prometheus endpoint (metrics_listen, --metrics-listen): GET /metrics
 * in the text exposition format, for a run that lasts days.
 *
 * The pipeline thread copies what it counts into a snapshot every quarter
 * second (pl_metrics_update, from pl_progress) and at the end; the HTTP
 * thread (libmicrohttpd's) formats the snapshot under its lock, plus the
 * plugins' own counters, read under theirs. Nothing of the engine is read
 * from the HTTP thread but the snapshot.
 *
 * Owns: the daemon and the snapshot (engine.metrics).
 * Thread: the pipeline thread; the daemon's thread for requests.
 */
#include "pipeline/engine.h"

#include <arpa/inet.h>
#include <inttypes.h>
#include <math.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "pipeline/clock.h"
#include "pipeline/lister.h"

#define UPDATE_NS 250000000ULL

typedef struct snapshot {
    uint64_t units_listed, units_done, skipped_done, skipped_changed,
        skipped_shard, recopied_changed, records, bytes_in, dead, objects, sealed,
        late_records, slices_open, slices_pending, bytes_buffered, wal_bytes;
    int64_t watermark; /* unix s, INT64_MIN: none */
    double lag;        /* s behind now, NaN: none */
    int done;          /* the run has ended */
} snapshot;

struct pl_metrics {
    struct MHD_Daemon *d;
    pthread_mutex_t mu;
    snapshot snap;
    const char *pipeline; /* borrowed from the config */
    sk_instance *src, *sink;
    uint64_t last_ns;
};

typedef struct out {
    skippr_buf b;
    int rc;
} out;

static void put(out *o, const char *fmt, ...) SKIPPR_PRINTF(2, 3);
static void put(out *o, const char *fmt, ...)
{
    if (o->rc)
        return;
    char line[512];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    if (n < 0 || (size_t)n >= sizeof line)
        o->rc = SKIPPR_RANGE;
    else
        o->rc = skippr_buf_append(&o->b, line, (size_t)n);
}

/* One metric with HELP and TYPE, and one sample. */
static void metric(out *o, const pl_metrics *m, const char *name,
                   const char *type, const char *help, double v)
{
    put(o, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
    if (isnan(v))
        put(o, "%s{pipeline=\"%s\"} NaN\n", name, m->pipeline);
    else
        put(o, "%s{pipeline=\"%s\"} %.17g\n", name, m->pipeline, v);
}

/* The plugins' counters: "requests_in_flight" as a gauge, "retries_CAUSE"
 * as skippr_retries_total by cause, the rest as skippr_plugin_total. */
static void plugin_counters(out *o, const pl_metrics *m)
{
    sk_instance *side[2] = {m->src, m->sink};
    const char *sname[2] = {"source", "sink"};
    sk_counter cs[2][SK_MAX_COUNTERS];
    size_t n[2] = {0, 0};
    for (int s = 0; s < 2; s++)
        if (side[s])
            n[s] = sk_instance_counters(side[s], cs[s], SK_MAX_COUNTERS);
    put(o, "# HELP skippr_requests_in_flight Requests a plugin has under "
           "way (the S3 source's GETs).\n"
           "# TYPE skippr_requests_in_flight gauge\n");
    for (int s = 0; s < 2; s++)
        for (size_t i = 0; i < n[s]; i++)
            if (strcmp(cs[s][i].name, "requests_in_flight") == 0)
                put(o, "skippr_requests_in_flight{pipeline=\"%s\",side=\"%s\"} "
                       "%" PRId64 "\n", m->pipeline, sname[s],
                    cs[s][i].value);
    put(o, "# HELP skippr_retries_total Requests a plugin tried again, by "
           "cause.\n# TYPE skippr_retries_total counter\n");
    for (int s = 0; s < 2; s++)
        for (size_t i = 0; i < n[s]; i++)
            if (strncmp(cs[s][i].name, "retries_", 8) == 0)
                put(o, "skippr_retries_total{pipeline=\"%s\",side=\"%s\","
                       "cause=\"%s\"} %" PRId64 "\n", m->pipeline, sname[s],
                    cs[s][i].name + 8, cs[s][i].value);
    put(o, "# HELP skippr_plugin_total A plugin's own counter.\n"
           "# TYPE skippr_plugin_total counter\n");
    for (int s = 0; s < 2; s++)
        for (size_t i = 0; i < n[s]; i++)
            if (strcmp(cs[s][i].name, "requests_in_flight") != 0 &&
                strncmp(cs[s][i].name, "retries_", 8) != 0)
                put(o, "skippr_plugin_total{pipeline=\"%s\",side=\"%s\","
                       "name=\"%s\"} %" PRId64 "\n", m->pipeline, sname[s],
                    cs[s][i].name, cs[s][i].value);
}

static void format(out *o, pl_metrics *m)
{
    pthread_mutex_lock(&m->mu);
    snapshot s = m->snap;
    pthread_mutex_unlock(&m->mu);
    metric(o, m, "skippr_units_listed_total", "counter",
           "Units the source listed (this process).", (double)s.units_listed);
    metric(o, m, "skippr_units_done_total", "counter",
           "Units copied to the end.", (double)s.units_done);
    put(o, "# HELP skippr_units_skipped_total Units listed and not read: "
           "done before, changed since, or another shard's.\n"
           "# TYPE skippr_units_skipped_total counter\n");
    const char *why[3] = {"done", "changed", "shard"};
    uint64_t nk[3] = {s.skipped_done, s.skipped_changed, s.skipped_shard};
    for (int i = 0; i < 3; i++)
        put(o, "skippr_units_skipped_total{pipeline=\"%s\",reason=\"%s\"} "
               "%" PRIu64 "\n", m->pipeline, why[i], nk[i]);
    metric(o, m, "skippr_units_recopied_total", "counter",
           "Units that changed since they were copied, copied again whole "
           "(changed_units: copy).", (double)s.recopied_changed);
    metric(o, m, "skippr_records_total", "counter", "Records copied.",
           (double)s.records);
    metric(o, m, "skippr_bytes_read_total", "counter",
           "Bytes read from units (after decompression).",
           (double)s.bytes_in);
    metric(o, m, "skippr_dead_letters_total", "counter",
           "Records dead-lettered.", (double)s.dead);
    metric(o, m, "skippr_late_records_total", "counter",
           "Records for a partition whose time bucket was already written.",
           (double)s.late_records);
    metric(o, m, "skippr_objects_written_total", "counter",
           "Objects the sink holds durably.", (double)s.objects);
    metric(o, m, "skippr_slices_sealed_total", "counter", "Slices sealed.",
           (double)s.sealed);
    metric(o, m, "skippr_slices_open", "gauge", "Slices still growing.",
           (double)s.slices_open);
    metric(o, m, "skippr_slices_pending", "gauge",
           "Slices sealed and not yet in the sink.",
           (double)s.slices_pending);
    metric(o, m, "skippr_bytes_buffered", "gauge",
           "Record bytes of the open slices.", (double)s.bytes_buffered);
    metric(o, m, "skippr_wal_bytes", "gauge", "The WAL's size on disk.",
           (double)s.wal_bytes);
    metric(o, m, "skippr_watermark_seconds", "gauge",
           "Event-time watermark: the earliest arrival time of units not "
           "yet done (Unix s; NaN when there is none).",
           s.watermark == INT64_MIN ? NAN : (double)s.watermark);
    metric(o, m, "skippr_watermark_lag_seconds", "gauge",
           "How far the watermark is behind the clock.", s.lag);
    metric(o, m, "skippr_run_done", "gauge",
           "1 once the run has ended (--once).", s.done ? 1 : 0);
    plugin_counters(o, m);
}

static enum MHD_Result handle(void *cls, struct MHD_Connection *conn,
                              const char *url, const char *method,
                              const char *version, const char *upload,
                              size_t *upload_len, void **con_cls)
{
    (void)version;
    (void)upload;
    (void)upload_len;
    (void)con_cls;
    pl_metrics *m = cls;
    int get = strcmp(method, "GET") == 0 || strcmp(method, "HEAD") == 0;
    int ok = get && strcmp(url, "/metrics") == 0;
    out o = {.rc = SKIPPR_OK};
    skippr_buf_init(&o.b, 4u << 20);
    if (ok)
        format(&o, m);
    else
        put(&o, "%s\n", get ? "not found: the metrics are at /metrics"
                            : "only GET");
    struct MHD_Response *r = MHD_create_response_from_buffer(
        o.b.len, o.b.data, MHD_RESPMEM_MUST_COPY);
    skippr_buf_free(&o.b);
    if (!r)
        return MHD_NO;
    MHD_add_response_header(r, "Content-Type",
                            ok ? "text/plain; version=0.0.4; charset=utf-8"
                               : "text/plain");
    unsigned status = ok && !o.rc ? MHD_HTTP_OK
                      : ok       ? MHD_HTTP_INTERNAL_SERVER_ERROR
                      : get      ? MHD_HTTP_NOT_FOUND
                                 : MHD_HTTP_METHOD_NOT_ALLOWED;
    enum MHD_Result res = MHD_queue_response(conn, status, r);
    MHD_destroy_response(r);
    return res;
}

/* "HOST:PORT" (IPv4; an empty host is every address) into sa. */
static int parse_listen(const char *s, struct sockaddr_in *sa)
{
    const char *colon = strrchr(s, ':');
    char host[64];
    size_t hl = colon ? (size_t)(colon - s) : 0;
    char *end;
    long port = colon ? strtol(colon + 1, &end, 10) : -1;
    if (!colon || hl >= sizeof host || *end || port < 1 || port > 65535)
        return SKIPPR_INVAL;
    memcpy(host, s, hl);
    host[hl] = '\0';
    memset(sa, 0, sizeof *sa);
    sa->sin_family = AF_INET;
    sa->sin_port = htons((uint16_t)port);
    if (hl == 0)
        sa->sin_addr.s_addr = htonl(INADDR_ANY);
    else if (inet_pton(AF_INET, host, &sa->sin_addr) != 1)
        return SKIPPR_INVAL;
    return SKIPPR_OK;
}

int pl_metrics_start(engine *e)
{
    const char *listen = e->cfg->metrics_listen;
    if (!listen || !*listen)
        return SKIPPR_OK;
    struct sockaddr_in sa;
    if (parse_listen(listen, &sa)) {
        sk_error("metrics_listen '%s': give IPv4-ADDRESS:PORT, such as "
                 "127.0.0.1:9464", listen);
        return SKIPPR_INVAL;
    }
    pl_metrics *m = sk_calloc(1, sizeof *m);
    if (!m)
        return SKIPPR_NOMEM;
    pthread_mutex_init(&m->mu, NULL);
    m->pipeline = e->cfg->name;
    m->src = e->src;
    m->sink = e->sink;
    m->snap.watermark = INT64_MIN;
    m->snap.lag = NAN;
    m->d = MHD_start_daemon(MHD_USE_INTERNAL_POLLING_THREAD |
                                MHD_USE_ERROR_LOG,
                            0, NULL, NULL, handle, m, MHD_OPTION_SOCK_ADDR,
                            (struct sockaddr *)&sa,
                            MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)30,
                            MHD_OPTION_END);
    if (!m->d) {
        sk_error("metrics_listen %s: cannot listen (the port in use?)",
                 listen);
        pthread_mutex_destroy(&m->mu);
        sk_free(m);
        return SKIPPR_INVAL;
    }
    sk_info("metrics at http://%s/metrics", listen);
    e->metrics = m;
    pl_metrics_update(e, 1);
    return SKIPPR_OK;
}

void pl_metrics_update(engine *e, int force)
{
    pl_metrics *m = e->metrics;
    if (!m)
        return;
    uint64_t now = sk_now_ns();
    if (!force && now - m->last_ns < UPDATE_NS)
        return;
    m->last_ns = now;
    pl_list_counts n = pl_lister_counts(e->lister);
    snapshot s = {
        .units_listed = n.listed,
        .units_done = e->tally.units,
        .skipped_done = n.done,
        .skipped_changed = n.changed,
        .skipped_shard = n.shard,
        .recopied_changed = n.recopied,
        .records = e->tally.records,
        .bytes_in = e->tally.bytes_in,
        .dead = e->tally.dead,
        .objects = e->tally.objects,
        .sealed = e->tally.sealed,
        .late_records = e->clock ? pl_clock_late_records(e->clock) : 0,
        .watermark = INT64_MIN,
        .lag = NAN,
        .done = e->run_ended,
    };
    if (e->st) {
        for (size_t i = 0; i < sk_state_nlive(e->st); i++) {
            const sk_slice *sl = sk_state_slice_at(e->st, i);
            if (sk_slice_state_of(sl) == SK_SLICE_OPEN) {
                s.slices_open++;
                s.bytes_buffered += sk_slice_bytes(sl);
            } else {
                s.slices_pending++;
            }
        }
        sk_wal *w = sk_state_wal(e->st);
        s.wal_bytes = w ? sk_wal_disk_bytes(w) : 0;
    }
    if (e->clock && pl_clock_known(e->clock)) {
        int64_t wm = pl_watermark(e);
        if (wm != INT64_MAX && wm != INT64_MIN) {
            s.watermark = wm;
            s.lag = (double)time(NULL) - (double)wm;
        }
    }
    pthread_mutex_lock(&m->mu);
    m->snap = s;
    pthread_mutex_unlock(&m->mu);
}

void pl_metrics_stop(engine *e)
{
    pl_metrics *m = e->metrics;
    if (!m)
        return;
    MHD_stop_daemon(m->d);
    pthread_mutex_destroy(&m->mu);
    sk_free(m);
    e->metrics = NULL;
}
