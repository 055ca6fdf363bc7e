/* The MQTT plugin: descriptor and connection handling (mqtt.h). */
#include "mqtt.h"

#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static int parse_broker(mqtt_conn *c)
{
    const char *b = c->broker;
    if (strncmp(b, "mqtts://", 8) == 0) {
        c->tls = 1;
        b += 8;
    } else if (strncmp(b, "mqtt://", 7) == 0) {
        b += 7;
    }
    const char *colon = strrchr(b, ':');
    size_t n = colon ? (size_t)(colon - b) : strlen(b);
    if (n == 0 || n >= sizeof c->hostname)
        return -1;
    memcpy(c->hostname, b, n);
    c->hostname[n] = '\0';
    c->port = c->tls ? 8883 : 1883;
    if (colon) {
        char *end;
        long p = strtol(colon + 1, &end, 10);
        if (*end || p <= 0 || p > 65535)
            return -1;
        c->port = (int)p;
    }
    return 0;
}

void mqtt_on_connect(struct mosquitto *m, void *ud, int rc, int flags,
                     const mosquitto_property *props)
{
    (void)m;
    (void)flags;
    (void)props;
    mqtt_conn *c = ud;
    c->connack = rc;
}

int64_t mqtt_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* libmosquitto's own error lines (an OpenSSL reason such as "certificate
 * verify failed"): the last is kept for the connect error. They name no
 * credentials. */
static void on_log(struct mosquitto *m, void *ud, int level, const char *s)
{
    (void)m;
    mqtt_conn *c = ud;
    if (level == MOSQ_LOG_ERR && s)
        snprintf(c->lib_error, sizeof c->lib_error, "%s", s);
}

/* A client for c (c->mosq), with its credentials and TLS, before it
 * connects. */
static int client_new(mqtt_conn *c, int clean, int external_loop)
{
    mosquitto_lib_init();
    c->mosq = mosquitto_new(c->client_id, clean ? true : false, c);
    if (!c->mosq) {
        MLOG(c->host, SKIPPR_LOG_ERROR, "cannot create an MQTT client");
        return SKIPPR_NOMEM;
    }
    mosquitto_int_option(c->mosq, MOSQ_OPT_PROTOCOL_VERSION, MQTT_PROTOCOL_V5);
    if (external_loop)
        mosquitto_threaded_set(c->mosq, true);
    if (c->username &&
        mosquitto_username_pw_set(c->mosq, c->username, c->password)) {
        MLOG(c->host, SKIPPR_LOG_ERROR, "bad username or password option");
        return SKIPPR_INVAL;
    }
    if (c->tls || c->ca_file || c->cert_file) {
        int rc = mosquitto_tls_set(c->mosq, c->ca_file,
                                   c->ca_file ? NULL : "/etc/ssl/certs",
                                   c->cert_file, c->key_file, NULL);
        if (!rc && c->insecure)
            rc = mosquitto_tls_insecure_set(c->mosq, true);
        if (rc) {
            MLOG(c->host, SKIPPR_LOG_ERROR, "TLS settings: %s",
                 mosquitto_strerror(rc));
            return SKIPPR_INVAL;
        }
    }
    return SKIPPR_OK;
}

/* Until the CONNACK comes or timeout_ms pass: the network loop, on this
 * thread (external_loop) or mosquitto's own. Its last error. */
static int await_connack(mqtt_conn *c, int external_loop, int timeout_ms)
{
    int rc = MOSQ_ERR_SUCCESS;
    int64_t end = mqtt_now_ms() + timeout_ms;
    while (c->connack < 0 && mqtt_now_ms() < end) {
        if (external_loop) {
            mosquitto_loop_write(c->mosq, 1);
            struct pollfd p = {mosquitto_socket(c->mosq), POLLIN, 0};
            if (poll(&p, 1, 100) > 0)
                rc = mosquitto_loop_read(c->mosq, 1);
        } else {
            rc = mosquitto_loop(c->mosq, 100, 1);
        }
        if (rc)
            break;
    }
    return rc;
}

int mqtt_connect(mqtt_conn *c, int clean, int external_loop,
                 void (*set_callbacks)(struct mosquitto *), int timeout_ms)
{
    if (parse_broker(c)) {
        MLOG(c->host, SKIPPR_LOG_ERROR, "broker '%s' is not host:port, "
             "mqtt://host:port or mqtts://host:port", c->broker);
        return SKIPPR_INVAL;
    }
    if (c->qos < 1 || c->qos > 2) {
        MLOG(c->host, SKIPPR_LOG_ERROR, "qos must be 1 or 2 (QoS 0 can lose "
             "messages)");
        return SKIPPR_INVAL;
    }
    int rc = client_new(c, clean, external_loop);
    if (rc)
        return rc;
    set_callbacks(c->mosq);
    mosquitto_log_callback_set(c->mosq, on_log);
    c->connack = -1;
    /* MQTT v5 ends a session at disconnect unless it is given an expiry:
     * a persistent one lasts a week without skippr. */
    mosquitto_property *props = NULL;
    if ((!clean && mosquitto_property_add_int32(
                       &props, MQTT_PROP_SESSION_EXPIRY_INTERVAL,
                       7 * 86400)) ||
        (c->receive_maximum > 0 &&
         mosquitto_property_add_int16(&props, MQTT_PROP_RECEIVE_MAXIMUM,
                                      (uint16_t)c->receive_maximum))) {
        MLOG(c->host, SKIPPR_LOG_ERROR, "out of memory");
        return SKIPPR_NOMEM;
    }
    rc = mosquitto_connect_bind_v5(c->mosq, c->hostname, c->port, 30, NULL,
                                   props);
    mosquitto_property_free_all(&props);
    if (rc) {
        MLOG(c->host, SKIPPR_LOG_ERROR, "cannot connect to the MQTT broker "
             "%s:%d: %s%s%s", c->hostname, c->port,
             rc == MOSQ_ERR_ERRNO ? "connection refused or unreachable"
                                  : mosquitto_strerror(rc),
             c->lib_error[0] ? " " : "", c->lib_error);
        return SKIPPR_FATAL;
    }
    rc = await_connack(c, external_loop, timeout_ms);
    if (c->connack != 0) {
        MLOG(c->host, SKIPPR_LOG_ERROR, "the MQTT broker %s:%d refused the "
             "connection: %s%s%s", c->hostname, c->port,
             c->connack < 0 ? (rc ? mosquitto_strerror(rc) : "no answer")
                            : mosquitto_reason_string(c->connack),
             c->lib_error[0] ? " " : "", c->lib_error);
        return SKIPPR_FATAL;
    }
    return SKIPPR_OK;
}

void mqtt_close(mqtt_conn *c, int flush)
{
    if (c->mosq) {
        if (flush) {
            mosquitto_disconnect_v5(c->mosq, 0, NULL);
            mosquitto_loop_write(c->mosq, 1);
        }
        mosquitto_destroy(c->mosq);
        c->mosq = NULL;
        mosquitto_lib_cleanup();
    }
}

/* --source and --sink: mqtt[s]://HOST:PORT/TOPIC; the broker option keeps
 * the scheme, which says whether to use TLS. */
static const skippr_url_form urls[] = {
    {.scheme = "mqtt", .roles = SKIPPR_URL_SOURCE | SKIPPR_URL_SINK,
     .flags = SKIPPR_URL_HOST_SCHEME | SKIPPR_URL_PATH_REQUIRED,
     .host_option = "broker", .path_option = "topic",
     .usage = "mqtt://HOST:PORT/TOPIC"},
    {.scheme = "mqtts", .roles = SKIPPR_URL_SOURCE | SKIPPR_URL_SINK,
     .flags = SKIPPR_URL_HOST_SCHEME | SKIPPR_URL_PATH_REQUIRED,
     .host_option = "broker", .path_option = "topic",
     .usage = "mqtts://HOST:PORT/TOPIC"},
    {0},
};

static const skippr_plugin plugin = {
    .abi_version = SKIPPR_ABI_VERSION,
    .struct_size = sizeof(skippr_plugin),
    .name = "MQTT",
    .description = "MQTT v5 topics (libmosquitto): a persistent-session "
                   "source acknowledged only once durable, and a QoS 1 sink "
                   "with a record id per message",
    .version = "0.2.0",
    .source = &mqtt_source_ops,
    .sink = &mqtt_sink_ops,
    .urls = urls,
};

SKIPPR_PLUGIN_DEFINE(plugin)
