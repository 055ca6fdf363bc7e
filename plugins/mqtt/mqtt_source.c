/* The MQTT source: a persistent session whose acknowledgements wait for
 * the WAL.
 *
 * libmosquitto 2.0 acknowledges a QoS 1 message (PUBACK; PUBREC for QoS
 * 2) as soon as it has read it, before the application sees it. So the
 * client runs in external-loop mode (mosquitto_threaded_set): an
 * acknowledgement is only queued, and only mosquitto_loop_write() sends
 * it. poll() reads messages and emits them, then asks the engine to make
 * them durable (host->sync), and only then writes the queued
 * acknowledgements. A crash before the sync loses nothing: the broker
 * still holds the messages for the session and sends them again. A crash
 * after the sync but before the acknowledgements left makes the broker
 * send those messages again: at least once, with duplicates only from
 * that window, each a byte-equal copy.
 *
 * The session is persistent (clean start off): the broker keeps messages
 * for it while skippr is down (up to its max_queued_messages). Messages
 * form one unit, "mqtt:<client_id>", numbered in arrival order.
 *
 * Keeping up. A broker sends a session at most its in-flight window of
 * unacknowledged messages, queues what comes next (mosquitto: 1,000) and
 * drops the rest. Acknowledging only after the WAL sync, skippr asks for a
 * large window (receive_maximum, MQTT v5's Receive Maximum, 65,535), so
 * what a fast publisher sends waits in flight rather than in the queue;
 * and it syncs after half the window seen so far, or when nothing more
 * arrives within DRAIN_MS, so the broker keeps sending during the sync.
 *
 * --once: ends once no message arrived for idle_timeout_seconds.
 */
#include <inttypes.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "mqtt.h"

#define MAX_HEADERS 64
#define BATCH 5000 /* messages read per poll() before a sync, at most */
#define DRAIN_MS 1  /* wait for the rest of a burst before a sync */

typedef struct msrc {
    mqtt_conn conn; /* first: the shared options point into it */
    const char *topic;
    int64_t idle_timeout_seconds;
    int64_t receive_maximum;
    /* state */
    char unit[300];
    int64_t next;       /* position of the next message; -1 unknown */
    int subscribed;
    int once;
    int failed;
    int emitted;        /* in this poll */
    int window;         /* the longest burst that ended by itself: the
                         * broker's in-flight window, as seen (0: none
                         * yet); with that many read, they are made
                         * durable at once */
    int64_t last_msg_ms;
} msrc;

static const skippr_option options[] = {
    MQTT_CONN_OPTIONS("skippr"),
    {"topic", SKIPPR_OPT_STRING, NULL, 1, offsetof(msrc, topic),
     "Topic filter to subscribe to, or a list of them."},
    {"idle_timeout_seconds", SKIPPR_OPT_INT, "5", 0,
     offsetof(msrc, idle_timeout_seconds),
     "--once ends after this long without a message."},
    {"receive_maximum", SKIPPR_OPT_INT, "65535", 0,
     offsetof(msrc, receive_maximum),
     "MQTT v5 Receive Maximum: messages the broker may send before our "
     "acknowledgements, which wait for the WAL (1 to 65535). Brokers take "
     "the lower of it and their own limit (mosquitto: it replaces "
     "max_inflight_messages, 20)."},
    {NULL, 0, NULL, 0, 0, NULL}};

static void on_message(struct mosquitto *m, void *ud,
                       const struct mosquitto_message *msg,
                       const mosquitto_property *props)
{
    (void)m;
    msrc *c = ud;
    if (c->failed)
        return; /* the rest stay unacknowledged; the broker resends */
    skippr_header hs[MAX_HEADERS];
    char *names[MAX_HEADERS], *values[MAX_HEADERS];
    size_t nh = 0;
    const mosquitto_property *p = props;
    int skip = 0;
    while (nh < MAX_HEADERS &&
           (p = mosquitto_property_read_string_pair(
                p, MQTT_PROP_USER_PROPERTY, &names[nh], &values[nh],
                skip)) != NULL) {
        hs[nh] = (skippr_header){names[nh], values[nh], strlen(values[nh])};
        nh++;
        skip = 1;
    }
    skippr_message sm = {
        .struct_size = sizeof sm,
        .unit = c->unit,
        .position = c->next,
        .data = msg->payload ? msg->payload : "",
        .len = (size_t)msg->payloadlen,
        .topic = msg->topic,
        .headers = hs,
        .nheaders = nh,
    };
    int rc = c->conn.host->emit(c->conn.host, &sm);
    for (size_t i = 0; i < nh; i++) {
        free(names[i]);
        free(values[i]);
    }
    if (rc) {
        c->failed = rc;
        return;
    }
    c->next++;
    c->emitted++;
    c->last_msg_ms = mqtt_now_ms();
}

static void on_subscribe(struct mosquitto *m, void *ud, int mid, int n,
                         const int *granted, const mosquitto_property *props)
{
    (void)m;
    (void)mid;
    (void)props;
    msrc *c = ud;
    for (int i = 0; i < n; i++) {
        if (granted[i] > 2) {
            MLOG(c->conn.host, SKIPPR_LOG_ERROR, "the broker refused the "
                 "subscription to %s: %s", c->topic,
                 mosquitto_reason_string(granted[i]));
            c->failed = SKIPPR_FATAL;
            return;
        }
    }
    c->subscribed = 1;
}

static void set_callbacks(struct mosquitto *m)
{
    mosquitto_connect_v5_callback_set(m, mqtt_on_connect);
    mosquitto_message_v5_callback_set(m, on_message);
    mosquitto_subscribe_v5_callback_set(m, on_subscribe);
}

static int subscribe(msrc *c)
{
    char *filters[64];
    int n = 0;
    char buf[4096];
    snprintf(buf, sizeof buf, "%s", c->topic);
    for (char *save = NULL, *t = strtok_r(buf, ",", &save); t && n < 64;
         t = strtok_r(NULL, ",", &save))
        filters[n++] = t;
    int rc = mosquitto_subscribe_multiple(c->conn.mosq, NULL, n, filters,
                                          (int)c->conn.qos, 0, NULL);
    if (rc) {
        MLOG(c->conn.host, SKIPPR_LOG_ERROR, "subscribe to %s: %s", c->topic,
             mosquitto_strerror(rc));
        return SKIPPR_FATAL;
    }
    return SKIPPR_OK;
}

static int init(void *ctx, const skippr_host *host)
{
    msrc *c = ctx;
    c->conn.host = host;
    c->once = SKIPPR_HOST_HAS(host, flags) && (host->flags & SKIPPR_HOST_ONCE);
    c->next = -1;
    snprintf(c->unit, sizeof c->unit, "mqtt:%s", c->conn.client_id);
    int rc = SKIPPR_OK;
    if (c->receive_maximum < 1 || c->receive_maximum > 65535) {
        MLOG(host, SKIPPR_LOG_ERROR, "receive_maximum must be 1 to 65535");
        rc = SKIPPR_INVAL;
    }
    c->conn.receive_maximum = (int)c->receive_maximum;
    if (!rc)
        rc = mqtt_connect(&c->conn, 0, 1, set_callbacks, 10000);
    if (!rc)
        rc = subscribe(c);
    c->last_msg_ms = mqtt_now_ms();
    return rc;
}

static void destroy(void *ctx)
{
    msrc *c = ctx;
    /* Acknowledgements still queued belong to messages not yet durable
     * (a failed poll): they must not leave. */
    mqtt_close(&c->conn, c->emitted == 0 && !c->failed);
}

/* The connection dropped: connect again (the session keeps what is not
 * acknowledged). */
static int reconnect(msrc *c, int why)
{
    MLOG(c->conn.host, SKIPPR_LOG_WARN, "connection to %s lost (%s); "
         "reconnecting", c->conn.broker, mosquitto_strerror(why));
    c->conn.connack = -1;
    int rc = mosquitto_reconnect(c->conn.mosq);
    if (rc)
        return SKIPPR_OK; /* try again on the next poll */
    mosquitto_loop_write(c->conn.mosq, 1);
    return SKIPPR_OK;
}

static int src_poll(void *ctx, int timeout_ms)
{
    msrc *c = ctx;
    if (c->next < 0) {
        /* Resume the numbering after what is durable. */
        int64_t next = 0;
        c->next = c->conn.host->position(c->conn.host, c->unit, &next) ==
                          SKIPPR_OK
                      ? next
                      : 0;
    }
    struct mosquitto *m = c->conn.mosq;
    int64_t end = mqtt_now_ms() + timeout_ms;
    c->emitted = 0;
    int rc = SKIPPR_OK;
    while (c->emitted < BATCH && !c->failed) {
        int64_t left = end - mqtt_now_ms();
        if (left <= 0)
            break;
        /* CONNECT, SUBSCRIBE, pings; but no acknowledgement may leave
         * while a message read is not yet durable. */
        if (c->emitted == 0)
            mosquitto_loop_write(m, 1);
        /* Holding unacknowledged messages, do not wait long for more: the
         * broker sends at most its in-flight window (mosquitto: 20) before
         * it waits for our acknowledgements, and queues the rest (1,000)
         * or drops them. So once half a window is read, or nothing more
         * arrives within DRAIN_MS, the messages read are made durable and
         * acknowledged. */
        if (c->window && c->emitted >= (c->window + 1) / 2)
            /* Half a window: acknowledged while the other half is still
             * arriving, so the broker always has messages in flight
             * rather than waiting for our sync. */
            break;
        struct pollfd p = {mosquitto_socket(m), POLLIN, 0};
        int n = p.fd < 0 ? 0
                         : poll(&p, 1, c->emitted ? DRAIN_MS : (int)left);
        if (n == 0 && c->emitted) {
            /* The burst ended by itself: it shows the window. */
            if (c->emitted > c->window)
                c->window = c->emitted;
            break;
        }
        if (n > 0) {
            int r = mosquitto_loop_read(m, 100);
            if (r)
                reconnect(c, r);
        } else if (p.fd < 0) {
            reconnect(c, MOSQ_ERR_NO_CONN);
            struct timespec ts = {0, 100000000L};
            nanosleep(&ts, NULL);
        }
        mosquitto_loop_misc(m);
    }
    if (c->failed)
        return c->failed;
    if (c->emitted) {
        /* Durable first; then the acknowledgements may leave. */
        if ((rc = c->conn.host->sync(c->conn.host))) {
            c->failed = rc;
            return rc;
        }
        c->conn.host->counter_add(c->conn.host, "messages", c->emitted);
        c->emitted = 0;
    }
    mosquitto_loop_write(m, 1);
    if (c->once && c->subscribed &&
        mqtt_now_ms() - c->last_msg_ms >= c->idle_timeout_seconds * 1000)
        return SKIPPR_END;
    return SKIPPR_OK;
}

/* Acknowledgements leave in poll(), after host->sync(). */
static int src_ack(void *ctx, const char *unit, int64_t position)
{
    (void)ctx;
    (void)unit;
    (void)position;
    return SKIPPR_OK;
}

const skippr_source_ops mqtt_source_ops = {
    .struct_size = sizeof(skippr_source_ops),
    .ctx_size = sizeof(msrc),
    .options = options,
    .init = init,
    .destroy = destroy,
    .poll = src_poll,
    .ack = src_ack,
};
