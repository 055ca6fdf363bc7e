/* The Kafka plugin: descriptor and shared helpers (kafka.h). */
#include "kafka.h"

#include <stdio.h>
#include <string.h>

rd_kafka_conf_t *kafka_conf(const skippr_host *host, const char *brokers,
                            const char *const *settings,
                            const skippr_kv *props)
{
    char err[512];
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    if (!conf) {
        KLOG(host, SKIPPR_LOG_ERROR, "out of memory");
        return NULL;
    }
    if (rd_kafka_conf_set(conf, "bootstrap.servers", brokers, err,
                          sizeof err) != RD_KAFKA_CONF_OK)
        goto bad;
    /* librdkafka's own lines go to stderr, outside the log and its format
     * (--log-format json); what they say about a broker that cannot be
     * reached the plugin says once. Only critical ones stay (a
     * kafka.log_level property brings them back). */
    if (rd_kafka_conf_set(conf, "log_level", "2", err, sizeof err) !=
        RD_KAFKA_CONF_OK)
        goto bad;
    for (size_t i = 0; settings && settings[i]; i += 2)
        if (rd_kafka_conf_set(conf, settings[i], settings[i + 1], err,
                              sizeof err) != RD_KAFKA_CONF_OK)
            goto bad;
    for (const skippr_kv *kv = props; kv && kv->key; kv++) {
        if (rd_kafka_conf_set(conf, kv->key, kv->value, err, sizeof err) !=
            RD_KAFKA_CONF_OK) {
            /* The value may be a password: name the property only. */
            KLOG(host, SKIPPR_LOG_ERROR, "option kafka.%s is refused by "
                 "librdkafka: %s", kv->key, err);
            rd_kafka_conf_destroy(conf);
            return NULL;
        }
    }
    return conf;
bad:
    KLOG(host, SKIPPR_LOG_ERROR, "librdkafka configuration: %s", err);
    rd_kafka_conf_destroy(conf);
    return NULL;
}

int kafka_topics_exist(const skippr_host *host, rd_kafka_t *rk,
                       const char *brokers, const char *topics,
                       const char *option, int timeout_ms)
{
    const struct rd_kafka_metadata *md = NULL;
    rd_kafka_resp_err_t e = rd_kafka_metadata(rk, 1, NULL, &md, timeout_ms);
    if (e) {
        KLOG(host, SKIPPR_LOG_ERROR, "cannot reach the Kafka brokers %s: "
             "%s: check `brokers` and that they listen", brokers,
             rd_kafka_err2str(e));
        return SKIPPR_FATAL;
    }
    int rc = SKIPPR_OK;
    const char *p = topics;
    while (*p) {
        size_t n = strcspn(p, ",");
        int found = 0;
        for (int i = 0; i < md->topic_cnt; i++)
            if (strlen(md->topics[i].topic) == n &&
                memcmp(md->topics[i].topic, p, n) == 0 &&
                !md->topics[i].err)
                found = 1;
        if (!found) {
            KLOG(host, SKIPPR_LOG_ERROR, "topic %.*s (option %s) does not "
                 "exist on %s: create it (kafka-topics.sh --bootstrap-server "
                 "%s --create --topic %.*s), or set %s to one that exists",
                 (int)n, p, option, brokers, brokers, (int)n, p, option);
            rc = SKIPPR_NOENT;
        }
        p += n + (p[n] == ',');
    }
    rd_kafka_metadata_destroy(md);
    return rc;
}

/* --source and --sink: kafka://HOST:PORT[,HOST:PORT...]/TOPIC. */
static const skippr_url_form urls[] = {
    {.scheme = "kafka", .roles = SKIPPR_URL_SOURCE | SKIPPR_URL_SINK,
     .flags = SKIPPR_URL_PATH_REQUIRED, .host_option = "brokers",
     .path_option = "topic", .usage = "kafka://HOST:PORT/TOPIC"},
    {0},
};

static const skippr_plugin plugin = {
    .abi_version = SKIPPR_ABI_VERSION,
    .struct_size = sizeof(skippr_plugin),
    .name = "Kafka",
    .description = "Apache Kafka topics (librdkafka): a consumer-group source "
                   "whose offsets live in the WAL, and a transactional sink",
    .version = "0.2.0",
    .source = &kafka_source_ops,
    .sink = &kafka_sink_ops,
    .urls = urls,
};

SKIPPR_PLUGIN_DEFINE(plugin)
