/* The MQTT sink: every record published unchanged at QoS 1 (or 2).
 *
 * The topic is a template: {namespace} and {partition} (the key's
 * folders, e.g. login/p_tenant=acme/p_year=2024/...) are replaced. Each
 * message carries MQTT v5 user properties skippr-slice (the slice id) and
 * skippr-record ("<slice id>/<index>"). MQTT has no transactions, so this
 * is at least once: an object is committed when the broker acknowledged
 * every message; a crash or retry before that publishes the slice again,
 * and a receiver drops the repeats by skippr-record, which is the same
 * for every copy of a record.
 */
#include <inttypes.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "mqtt.h"

#define ACK_TIMEOUT_MS 30000

typedef struct msink {
    mqtt_conn conn; /* first: the shared options point into it */
    const char *topic;
    /* state */
    atomic_long acked;   /* messages the broker acknowledged */
    atomic_int lost;     /* the connection dropped while publishing */
    long published;
    char id[256];        /* client_id-<n>: one client per upload thread */
} msink;

typedef struct mhandle {
    char topic[1024];
    char slice[64];
    uint64_t n;
} mhandle;

static const skippr_option options[] = {
    MQTT_CONN_OPTIONS("skippr-sink"),
    {"topic", SKIPPR_OPT_STRING, NULL, 1, offsetof(msink, topic),
     "Topic to publish to; {namespace} and {partition} are replaced."},
    {NULL, 0, NULL, 0, 0, NULL}};

static atomic_int instances; /* numbers the clients of one process */

static void on_publish(struct mosquitto *m, void *ud, int mid, int reason,
                       const mosquitto_property *props)
{
    (void)m;
    (void)mid;
    (void)props;
    msink *c = ud;
    if (reason >= 128) {
        MLOG(c->conn.host, SKIPPR_LOG_WARN, "publish refused: %s",
             mosquitto_reason_string(reason));
        atomic_store(&c->lost, 1);
    }
    atomic_fetch_add(&c->acked, 1);
}

static void on_disconnect(struct mosquitto *m, void *ud, int rc,
                          const mosquitto_property *props)
{
    (void)m;
    (void)props;
    msink *c = ud;
    if (rc)
        atomic_store(&c->lost, 1);
}

static void set_callbacks(struct mosquitto *m)
{
    mosquitto_connect_v5_callback_set(m, mqtt_on_connect);
    mosquitto_publish_v5_callback_set(m, on_publish);
    mosquitto_disconnect_v5_callback_set(m, on_disconnect);
}

static int init(void *ctx, const skippr_host *host)
{
    msink *c = ctx;
    c->conn.host = host;
    /* Two clients with one id would keep taking each other's place. */
    snprintf(c->id, sizeof c->id, "%s-%d", c->conn.client_id,
             atomic_fetch_add(&instances, 1));
    c->conn.client_id = c->id;
    /* A clean session per run: unacknowledged messages of a crashed run
     * are published again by the engine, not by the session. */
    int rc = mqtt_connect(&c->conn, 1, 0, set_callbacks, 10000);
    int mrc = rc ? MOSQ_ERR_SUCCESS : mosquitto_loop_start(c->conn.mosq);
    if (mrc) {
        MLOG(host, SKIPPR_LOG_ERROR, "loop_start: %s", mosquitto_strerror(mrc));
        rc = SKIPPR_FATAL;
    }
    return rc;
}

static void destroy(void *ctx)
{
    msink *c = ctx;
    if (c->conn.mosq) {
        mosquitto_disconnect_v5(c->conn.mosq, 0, NULL);
        mosquitto_loop_stop(c->conn.mosq, false);
    }
    mqtt_close(&c->conn, 0);
}

/* Append src to out[*n..cap), turning the MQTT wildcards '+' and '#'
 * into %2B and %23 (a published topic may not hold them). */
static int put_topic(char *out, size_t cap, size_t *n, const char *src,
                     size_t len)
{
    for (size_t i = 0; i < len; i++) {
        const char *s = src[i] == '+' ? "%2B" : src[i] == '#' ? "%23" : NULL;
        size_t k = s ? 3 : 1;
        if (*n + k >= cap)
            return -1;
        memcpy(out + *n, s ? s : &src[i], k);
        *n += k;
    }
    out[*n] = '\0';
    return 0;
}

static int make_topic(const msink *c, const skippr_object_info *info,
                      char *out, size_t cap)
{
    size_t n = 0;
    out[0] = '\0';
    for (const char *t = c->topic; *t;) {
        const char *v = NULL;
        size_t skip = 0;
        if (strncmp(t, "{namespace}", 11) == 0) {
            v = info->namespace_name;
            skip = 11;
        } else if (strncmp(t, "{partition}", 11) == 0) {
            v = info->partition;
            skip = 11;
        }
        if (v) {
            if (put_topic(out, cap, &n, v, strlen(v)))
                return -1;
            t += skip;
            continue;
        }
        if (n + 1 >= cap)
            return -1;
        out[n++] = *t++;
        out[n] = '\0';
    }
    return 0;
}

static int sink_open(void *ctx, const skippr_object_info *info, void **h)
{
    msink *c = ctx;
    mhandle *k = calloc(1, sizeof *k);
    if (!k)
        return SKIPPR_NOMEM;
    if (make_topic(c, info, k->topic, sizeof k->topic)) {
        MLOG(c->conn.host, SKIPPR_LOG_ERROR, "topic for %s is too long",
             info->key);
        free(k);
        return SKIPPR_FATAL;
    }
    snprintf(k->slice, sizeof k->slice, "%s", info->slice_id);
    atomic_store(&c->lost, 0);
    *h = k;
    return SKIPPR_OK;
}

static int sink_write(void *ctx, void *h, const void *buf, size_t len)
{
    msink *c = ctx;
    mhandle *k = h;
    if (atomic_load(&c->lost))
        return SKIPPR_RETRY;
    if (len > 256u * 1024 * 1024) {
        MLOG(c->conn.host, SKIPPR_LOG_ERROR, "a record of %zu bytes is over "
             "MQTT's 256 MB message limit", len);
        return SKIPPR_FATAL;
    }
    char id[96];
    snprintf(id, sizeof id, "%s/%" PRIu64, k->slice, k->n++);
    mosquitto_property *props = NULL;
    int rc = mosquitto_property_add_string_pair(&props,
                                                MQTT_PROP_USER_PROPERTY,
                                                "skippr-slice", k->slice);
    if (!rc)
        rc = mosquitto_property_add_string_pair(&props,
                                                MQTT_PROP_USER_PROPERTY,
                                                "skippr-record", id);
    if (!rc)
        rc = mosquitto_publish_v5(c->conn.mosq, NULL, k->topic, (int)len, buf,
                                  (int)c->conn.qos, false, props);
    mosquitto_property_free_all(&props);
    if (rc == MOSQ_ERR_NO_CONN || rc == MOSQ_ERR_CONN_LOST) {
        MLOG(c->conn.host, SKIPPR_LOG_WARN, "publish: %s",
             mosquitto_strerror(rc));
        return SKIPPR_RETRY;
    }
    if (rc) {
        MLOG(c->conn.host, SKIPPR_LOG_ERROR, "publish to %s: %s", k->topic,
             mosquitto_strerror(rc));
        return SKIPPR_FATAL;
    }
    c->published++;
    return SKIPPR_OK;
}

/* Committed once the broker acknowledged every message published. */
static int sink_commit(void *ctx, void *h)
{
    msink *c = ctx;
    mhandle *k = h;
    int64_t end = mqtt_now_ms() + ACK_TIMEOUT_MS;
    while (atomic_load(&c->acked) < c->published && !atomic_load(&c->lost) &&
           mqtt_now_ms() < end) {
        struct timespec ts = {0, 2000000L};
        nanosleep(&ts, NULL);
    }
    int rc = SKIPPR_OK;
    if (atomic_load(&c->lost) || atomic_load(&c->acked) < c->published) {
        MLOG(c->conn.host, SKIPPR_LOG_WARN, "%ld of %ld messages of slice %s "
             "not acknowledged; publishing it again", c->published -
             atomic_load(&c->acked), c->published, k->slice);
        /* Start the count afresh; a reconnect resends what the session
         * still holds. */
        mosquitto_reconnect_async(c->conn.mosq);
        atomic_store(&c->acked, 0);
        c->published = 0;
        rc = SKIPPR_RETRY;
    } else {
        c->conn.host->counter_add(c->conn.host, "messages", (int64_t)k->n);
    }
    free(k);
    return rc;
}

static void sink_abort(void *ctx, void *h)
{
    (void)ctx;
    free(h);
}

const skippr_sink_ops mqtt_sink_ops = {
    .struct_size = sizeof(skippr_sink_ops),
    .ctx_size = sizeof(msink),
    .options = options,
    .init = init,
    .destroy = destroy,
    .object_open = sink_open,
    .object_write = sink_write,
    .object_commit = sink_commit,
    .object_abort = sink_abort,
    .flags = SKIPPR_SINK_RECORDS,
};
