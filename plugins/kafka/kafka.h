/* The Kafka plugin's shared pieces: configuration and logging on top of
 * librdkafka. The source is in kafka_source.c, the sink in kafka_sink.c.
 */
#ifndef SKIPPR_KAFKA_H
#define SKIPPR_KAFKA_H

#include <librdkafka/rdkafka.h>

#include <skippr/plugin.h>

#define KLOG(host, level, ...) (host)->log((host), (level), __VA_ARGS__)

/* A librdkafka configuration with bootstrap.servers, the plugin's own
 * settings (pairs of name, value; NULL-terminated) and then the user's
 * kafka.* properties, which win. NULL after logging why. Caller owns the
 * result (rd_kafka_new takes it over). */
rd_kafka_conf_t *kafka_conf(const skippr_host *host, const char *brokers,
                            const char *const *settings,
                            const skippr_kv *props);

/* Whether every listed topic exists, asking the brokers for up to
 * timeout_ms. Logs a clear error (brokers down, topic missing) and
 * returns SKIPPR_FATAL (brokers) or SKIPPR_NOENT (a topic) if not. topics
 * is comma-separated; option names
 * the option that lists them, for the message. */
int kafka_topics_exist(const skippr_host *host, rd_kafka_t *rk,
                       const char *brokers, const char *topics,
                       const char *option, int timeout_ms);

extern const skippr_source_ops kafka_source_ops;
extern const skippr_sink_ops kafka_sink_ops;

#endif
