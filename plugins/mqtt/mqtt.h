/* The MQTT plugin's shared pieces (libmosquitto): the broker address,
 * credentials, TLS and connecting. Source in mqtt_source.c, sink in
 * mqtt_sink.c. MQTT v5 throughout. */
#ifndef SKIPPR_MQTT_H
#define SKIPPR_MQTT_H

#include <mosquitto.h>
#include <mqtt_protocol.h>
#include <stdint.h>

#include <skippr/plugin.h>

#define MLOG(host, level, ...) (host)->log((host), (level), __VA_ARGS__)

/* The options both sides share; each side's context starts with it. */
typedef struct mqtt_conn {
    const char *broker;    /* host:port, mqtt://host:port, mqtts://... */
    const char *client_id;
    const char *username;
    const char *password;  /* secret */
    const char *ca_file;
    const char *cert_file;
    const char *key_file;
    int insecure;
    int64_t qos;
    int receive_maximum;   /* set before mqtt_connect: the Receive Maximum
                            * asked for (0: the protocol's default) */
    /* state */
    const skippr_host *host;
    struct mosquitto *mosq;
    char hostname[256];
    int port;
    int tls;
    int connack;           /* -1 waiting, else the CONNACK reason code */
    char lib_error[256];   /* libmosquitto's last error line (TLS: why) */
} mqtt_conn;

/* The options table rows for mqtt_conn, to put first in a side's table
 * (offsets are relative to the side's context, which starts with it). */
#define MQTT_CONN_OPTIONS(default_client_id)                                  \
    {"broker", SKIPPR_OPT_STRING, NULL, 1, offsetof(mqtt_conn, broker),      \
     "host:port, mqtt://host:port or mqtts://host:port."},                   \
    {"client_id", SKIPPR_OPT_STRING, default_client_id, 0,                   \
     offsetof(mqtt_conn, client_id),                                         \
     "MQTT client id; keep it stable (it names the session)."},              \
    {"username", SKIPPR_OPT_STRING, NULL, 0, offsetof(mqtt_conn, username),  \
     "User name."},                                                          \
    {"password", SKIPPR_OPT_SECRET, NULL, 0, offsetof(mqtt_conn, password),  \
     "Password (never logged)."},                                            \
    {"ca_file", SKIPPR_OPT_STRING, NULL, 0, offsetof(mqtt_conn, ca_file),    \
     "CA certificates (PEM) for mqtts://; default: the system's."},         \
    {"cert_file", SKIPPR_OPT_STRING, NULL, 0, offsetof(mqtt_conn, cert_file),\
     "Client certificate (PEM)."},                                           \
    {"key_file", SKIPPR_OPT_STRING, NULL, 0, offsetof(mqtt_conn, key_file),  \
     "Client key (PEM)."},                                                   \
    {"insecure", SKIPPR_OPT_BOOL, "false", 0, offsetof(mqtt_conn, insecure), \
     "Skip the server certificate's host name check."},                      \
    {"qos", SKIPPR_OPT_INT, "1", 0, offsetof(mqtt_conn, qos),                \
     "QoS 1 or 2."}

/* Create the client (MQTT v5, persistent session unless clean), set the
 * credentials and TLS, connect and wait up to timeout_ms for the CONNACK.
 * external_loop: the caller drives reads and writes itself
 * (mosquitto_threaded_set), so nothing is written until it calls
 * mosquitto_loop_write(). Logs why and returns SKIPPR_FATAL on failure.
 * The callbacks must be set in set_callbacks(c->mosq) before connecting. */
int mqtt_connect(mqtt_conn *c, int clean, int external_loop,
                 void (*set_callbacks)(struct mosquitto *), int timeout_ms);
/* Disconnect and free the client. flush: first send what is queued (a
 * DISCONNECT, acknowledgements); else just close the socket. */
void mqtt_close(mqtt_conn *c, int flush);
/* The connect callback mqtt_connect() relies on: records the CONNACK. */
void mqtt_on_connect(struct mosquitto *m, void *ud, int rc, int flags,
                     const mosquitto_property *props);
/* Milliseconds on the monotonic clock. */
int64_t mqtt_now_ms(void);

extern const skippr_source_ops mqtt_source_ops;
extern const skippr_sink_ops mqtt_sink_ops;

#endif
