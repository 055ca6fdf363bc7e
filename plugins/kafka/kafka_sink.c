/* The Kafka sink: one transaction per object, exactly once.
 *
 * Each record of a sealed slice becomes one message: the record's exact
 * bytes as the value, the partition key (or the value of key_field) as the
 * key, and headers skippr-slice (the slice id), skippr-record (its index
 * in the slice) and skippr-attempt (this write's random id). Once every
 * record is acknowledged, a marker message goes to marker_topic, keyed by
 * the slice id, and the transaction commits: the records and the marker
 * become visible to read_committed consumers together, or not at all.
 * (The marker is sent only after the records, so that even where
 * transactions are not enforced a marker never stands for records that
 * did not arrive.)
 *
 * Recovery asks Kafka itself: object_check() reads the marker topic
 * (read_committed) and answers OK when the slice's marker is there, so a
 * slice is never written twice, and NOENT otherwise, so a slice whose
 * transaction never committed is written again (the broker aborted the
 * old one when this producer's transactional.id fenced it).
 *
 * The topic may name the namespace: "events.{namespace}". Each uploader
 * thread is its own producer with transactional.id
 * "<transactional_id>-<n>", stable across restarts so that a restarted
 * producer fences its predecessor.
 */
#include <inttypes.h>
#include <jansson.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "kafka.h"
#include <skippr/buf.h>

#define TXN_TIMEOUT_MS 60000
#define META_TIMEOUT_MS 10000

typedef struct ksink {
    /* options */
    const char *brokers;
    const char *topic;
    const char *key_field;
    const char *transactional_id;
    const char *marker_topic;
    int64_t marker_scan;
    const skippr_kv *props;
    /* state */
    const skippr_host *host;
    rd_kafka_t *rk;
    char tid[300];
    atomic_int delivery_failed; /* a message of the open transaction */
    char delivery_error[256];
    char **committed;           /* slice ids with a marker, sorted */
    size_t ncommitted;
    int committed_known;
} ksink;

typedef struct khandle {
    char topic[512];
    char slice[64];
    char attempt[17];
    const char *partition;
    uint64_t n;
    uint64_t records;
    uint64_t size;
    uint32_t crc;
    char key[128];
} khandle;

static const skippr_option options[] = {
    {"brokers", SKIPPR_OPT_STRING, NULL, 1, offsetof(ksink, brokers),
     "Bootstrap brokers, host:port[,host:port...]."},
    {"topic", SKIPPR_OPT_STRING, NULL, 1, offsetof(ksink, topic),
     "Topic to write; {namespace} is replaced by the record's namespace."},
    {"key_field", SKIPPR_OPT_STRING, NULL, 0, offsetof(ksink, key_field),
     "Dotted JSON path whose value is the message key; default: the "
     "partition key."},
    {"transactional_id", SKIPPR_OPT_STRING, "skippr", 0,
     offsetof(ksink, transactional_id),
     "Prefix of the producers' transactional.id; keep it stable and unique "
     "per pipeline."},
    {"marker_topic", SKIPPR_OPT_STRING, "skippr.markers", 0,
     offsetof(ksink, marker_topic),
     "Topic for the slice markers committed with each transaction."},
    {"marker_scan", SKIPPR_OPT_INT, "100000", 0, offsetof(ksink, marker_scan),
     "Recovery reads at most this many of the newest markers per "
     "partition."},
    {"kafka.", SKIPPR_OPT_PREFIX, NULL, 0, offsetof(ksink, props),
     "Any librdkafka property, e.g. kafka.compression.type: zstd."},
    {NULL, 0, NULL, 0, 0, NULL}};

static atomic_int instances; /* numbers the producers of one process */

static void dr_cb(rd_kafka_t *rk, const rd_kafka_message_t *m, void *opaque)
{
    (void)rk;
    ksink *c = opaque;
    if (m->err && !atomic_exchange(&c->delivery_failed, 1))
        snprintf(c->delivery_error, sizeof c->delivery_error, "%s: %s",
                 rd_kafka_topic_name(m->rkt), rd_kafka_err2str(m->err));
}

static void error_cb(rd_kafka_t *rk, int err, const char *reason,
                     void *opaque)
{
    (void)rk;
    ksink *c = opaque;
    KLOG(c->host, SKIPPR_LOG_WARN, "%s: %s", rd_kafka_err2name(err), reason);
}

/* A transactional call's error: RETRY when Kafka says it may be retried
 * or the transaction can be aborted and done again, else FATAL. */
static int txn_status(ksink *c, const char *what, rd_kafka_error_t *e)
{
    if (!e)
        return SKIPPR_OK;
    int rc = SKIPPR_FATAL;
    if (rd_kafka_error_is_retriable(e) || rd_kafka_error_txn_requires_abort(e))
        rc = SKIPPR_RETRY;
    KLOG(c->host, rc == SKIPPR_RETRY ? SKIPPR_LOG_WARN : SKIPPR_LOG_ERROR,
         "%s (transactional.id %s): %s", what, c->tid,
         rd_kafka_error_string(e));
    if (rd_kafka_error_txn_requires_abort(e)) {
        rd_kafka_error_t *a = rd_kafka_abort_transaction(c->rk, TXN_TIMEOUT_MS);
        if (a)
            rd_kafka_error_destroy(a);
    }
    rd_kafka_error_destroy(e);
    return rc;
}

static int init(void *ctx, const skippr_host *host)
{
    ksink *c = ctx;
    c->host = host;
    int n = atomic_fetch_add(&instances, 1);
    snprintf(c->tid, sizeof c->tid, "%s-%d", c->transactional_id, n);
    char timeout[32];
    snprintf(timeout, sizeof timeout, "%d", TXN_TIMEOUT_MS);
    const char *settings[] = {
        "transactional.id", c->tid,
        "enable.idempotence", "true",
        "transaction.timeout.ms", timeout,
        "linger.ms", "5",
        NULL};
    int rc = SKIPPR_INVAL; /* logged by kafka_conf */
    rd_kafka_conf_t *conf = kafka_conf(host, c->brokers, settings, c->props);
    if (conf) {
        rd_kafka_conf_set_opaque(conf, c);
        rd_kafka_conf_set_dr_msg_cb(conf, dr_cb);
        rd_kafka_conf_set_error_cb(conf, error_cb);
        char err[512];
        /* rd_kafka_new takes conf when it succeeds */
        if ((c->rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, err, sizeof err)))
            rc = SKIPPR_OK;
        else {
            KLOG(host, SKIPPR_LOG_ERROR, "cannot create the producer: %s",
                 err);
            rd_kafka_conf_destroy(conf); /* still ours after a failure */
        }
    }
    if (!rc && !strstr(c->topic, "{namespace}"))
        rc = kafka_topics_exist(host, c->rk, c->brokers, c->topic, "topic",
                                META_TIMEOUT_MS);
    if (!rc || rc == SKIPPR_NOENT) { /* each missing topic, one line */
        int mrc = kafka_topics_exist(host, c->rk, c->brokers,
                                     c->marker_topic, "marker_topic",
                                     META_TIMEOUT_MS);
        rc = rc ? rc : mrc;
    }
    /* Fences an earlier producer with this id and aborts what it left:
     * not for a check (validate --reach) beside a running copy. */
    int check = SKIPPR_HOST_HAS(host, flags) &&
                (host->flags & SKIPPR_HOST_CHECK);
    if (!rc && !check && txn_status(c, "init_transactions",
                          rd_kafka_init_transactions(c->rk, TXN_TIMEOUT_MS)))
        rc = SKIPPR_FATAL;
    return rc;
}

static void destroy(void *ctx)
{
    ksink *c = ctx;
    if (c->rk)
        rd_kafka_destroy(c->rk);
    for (size_t i = 0; i < c->ncommitted; i++)
        free(c->committed[i]);
    free(c->committed);
}

/* The topic for a namespace: {namespace} in the template replaced. */
static int topic_for(const ksink *c, const char *ns, char *out, size_t cap)
{
    const char *t = c->topic;
    const char *at = strstr(t, "{namespace}");
    int n = at ? snprintf(out, cap, "%.*s%s%s", (int)(at - t), t, ns,
                          at + strlen("{namespace}"))
               : snprintf(out, cap, "%s", t);
    return n > 0 && (size_t)n < cap ? SKIPPR_OK : SKIPPR_RANGE;
}

static int sink_open(void *ctx, const skippr_object_info *info, void **h)
{
    ksink *c = ctx;
    khandle *k = calloc(1, sizeof *k);
    if (!k)
        return SKIPPR_NOMEM;
    if (topic_for(c, info->namespace_name, k->topic, sizeof k->topic)) {
        KLOG(c->host, SKIPPR_LOG_ERROR, "topic name for namespace %s is too "
             "long", info->namespace_name);
        free(k);
        return SKIPPR_FATAL;
    }
    snprintf(k->slice, sizeof k->slice, "%s", info->slice_id);
    uint64_t nonce = 0;
    if (getrandom(&nonce, sizeof nonce, 0) != (ssize_t)sizeof nonce) {
        KLOG(c->host, SKIPPR_LOG_ERROR, "getrandom failed");
        free(k);
        return SKIPPR_RETRY;
    }
    snprintf(k->attempt, sizeof k->attempt, "%016" PRIx64, nonce);
    k->partition = info->partition;
    k->records = info->records;
    k->size = info->size;
    k->crc = info->crc32c;
    atomic_store(&c->delivery_failed, 0);
    int rc = txn_status(c, "begin_transaction",
                        rd_kafka_begin_transaction(c->rk));
    if (rc) {
        free(k);
        return rc;
    }
    *h = k;
    return SKIPPR_OK;
}

/* The value at a dotted path of a JSON record, as text (strings without
 * quotes, other scalars as written). 0 if absent or not a scalar. */
static size_t field_value(const char *path, const void *rec, size_t len,
                          char *out, size_t cap)
{
    json_t *root = json_loadb(rec, len, JSON_DECODE_ANY, NULL);
    json_t *v = root;
    const char *p = path;
    while (v && *p) {
        size_t n = strcspn(p, ".");
        char name[256];
        snprintf(name, sizeof name, "%.*s", (int)n, p);
        v = json_is_object(v) ? json_object_get(v, name) : NULL;
        p += n + (p[n] == '.');
    }
    size_t w = 0;
    if (json_is_string(v))
        w = (size_t)snprintf(out, cap, "%s", json_string_value(v));
    else if (json_is_integer(v))
        w = (size_t)snprintf(out, cap, "%" JSON_INTEGER_FORMAT,
                             json_integer_value(v));
    else if (json_is_real(v))
        w = (size_t)snprintf(out, cap, "%.17g", json_real_value(v));
    else if (json_is_boolean(v))
        w = (size_t)snprintf(out, cap, "%s", json_is_true(v) ? "true" : "false");
    json_decref(root);
    return w < cap ? w : cap - 1;
}

/* Produce one message, waiting while the local queue is full. */
static int produce(ksink *c, const char *topic, const void *key,
                   size_t key_len, const void *val, size_t len,
                   rd_kafka_headers_t *hdrs)
{
    for (;;) {
        rd_kafka_resp_err_t e = rd_kafka_producev(
            c->rk, RD_KAFKA_V_TOPIC(topic),
            RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY),
            RD_KAFKA_V_KEY(key, key_len), RD_KAFKA_V_VALUE((void *)val, len),
            RD_KAFKA_V_HEADERS(hdrs), RD_KAFKA_V_END);
        if (!e)
            return SKIPPR_OK;
        if (e == RD_KAFKA_RESP_ERR__QUEUE_FULL) {
            rd_kafka_poll(c->rk, 50);
            if (c->host->should_stop(c->host))
                return SKIPPR_STOPPED;
            continue;
        }
        rd_kafka_headers_destroy(hdrs);
        KLOG(c->host, SKIPPR_LOG_ERROR, "produce to %s: %s", topic,
             rd_kafka_err2str(e));
        return e == RD_KAFKA_RESP_ERR__UNKNOWN_TOPIC ||
                       e == RD_KAFKA_RESP_ERR_UNKNOWN_TOPIC_OR_PART
                   ? SKIPPR_FATAL
                   : SKIPPR_RETRY;
    }
}

static int sink_write(void *ctx, void *h, const void *buf, size_t len)
{
    ksink *c = ctx;
    khandle *k = h;
    if (atomic_load(&c->delivery_failed))
        return SKIPPR_RETRY;
    char idx[24];
    int il = snprintf(idx, sizeof idx, "%" PRIu64, k->n++);
    rd_kafka_headers_t *hdrs = rd_kafka_headers_new(3);
    rd_kafka_header_add(hdrs, "skippr-slice", -1, k->slice, -1);
    rd_kafka_header_add(hdrs, "skippr-record", -1, idx, il);
    rd_kafka_header_add(hdrs, "skippr-attempt", -1, k->attempt, -1);
    const char *key = k->partition;
    size_t key_len = strlen(key);
    if (c->key_field) {
        key_len = field_value(c->key_field, buf, len, k->key, sizeof k->key);
        key = key_len ? k->key : k->partition;
        if (!key_len)
            key_len = strlen(k->partition);
    }
    return produce(c, k->topic, key, key_len, buf, len, hdrs);
}

static int sink_commit(void *ctx, void *h)
{
    ksink *c = ctx;
    khandle *k = h;
    char marker[512];
    int n = snprintf(marker, sizeof marker,
                     "{\"slice\":\"%s\",\"attempt\":\"%s\",\"topic\":\"%s\","
                     "\"records\":%" PRIu64 ",\"bytes\":%" PRIu64
                     ",\"crc32c\":%" PRIu32 "}",
                     k->slice, k->attempt, k->topic, k->n, k->size, k->crc);
    int rc = n > 0 && (size_t)n < sizeof marker ? SKIPPR_OK : SKIPPR_RANGE;
    rd_kafka_resp_err_t fe = rc ? RD_KAFKA_RESP_ERR_NO_ERROR
                                : rd_kafka_flush(c->rk, TXN_TIMEOUT_MS);
    if (fe) {
        KLOG(c->host, SKIPPR_LOG_WARN, "records of slice %s not delivered: "
             "%s", k->slice, rd_kafka_err2str(fe));
        rc = SKIPPR_RETRY;
    } else if (!rc && atomic_load(&c->delivery_failed)) {
        KLOG(c->host, SKIPPR_LOG_WARN, "records of slice %s not delivered: "
             "%s", k->slice, c->delivery_error);
        rc = SKIPPR_RETRY;
    }
    if (!rc)
        rc = produce(c, c->marker_topic, k->slice, strlen(k->slice), marker,
                     (size_t)n, NULL);
    if (!rc) {
        /* Commit waits for every message; a failed one fails it. */
        rc = txn_status(c, "commit_transaction",
                        rd_kafka_commit_transaction(c->rk, TXN_TIMEOUT_MS));
        if (!rc && atomic_load(&c->delivery_failed)) {
            KLOG(c->host, SKIPPR_LOG_ERROR, "delivery failed: %s",
                 c->delivery_error);
            rc = SKIPPR_FATAL;
        }
    }
    if (rc) {
        /* An unknown outcome: the next check reads the markers again. */
        c->committed_known = 0;
        rd_kafka_error_t *a = rd_kafka_abort_transaction(c->rk,
                                                         TXN_TIMEOUT_MS);
        if (a)
            rd_kafka_error_destroy(a);
    } else {
        c->host->counter_add(c->host, "transactions", 1);
        c->host->counter_add(c->host, "messages", (int64_t)k->n);
    }
    free(k);
    return rc;
}

static void sink_abort(void *ctx, void *h)
{
    ksink *c = ctx;
    rd_kafka_error_t *e = rd_kafka_abort_transaction(c->rk, TXN_TIMEOUT_MS);
    if (e) {
        KLOG(c->host, SKIPPR_LOG_WARN, "abort_transaction: %s",
             rd_kafka_error_string(e));
        rd_kafka_error_destroy(e);
    }
    free(h);
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* A read_committed consumer for the marker topic, or NULL (logged). */
static rd_kafka_t *marker_reader(ksink *c)
{
    static const char *const settings[] = {
        "group.id", "skippr-marker-check",
        "enable.auto.commit", "false",
        "isolation.level", "read_committed",
        "enable.partition.eof", "true",
        NULL};
    rd_kafka_conf_t *conf = kafka_conf(c->host, c->brokers, settings,
                                       c->props);
    if (!conf)
        return NULL;
    char err[512];
    rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_CONSUMER, conf, err, sizeof err);
    if (!rk)
        KLOG(c->host, SKIPPR_LOG_ERROR, "marker reader: %s", err);
    return rk;
}

/* rk assigned the last marker_scan markers of each partition of the
 * marker topic: *pending partitions hold some. */
static int assign_tails(ksink *c, rd_kafka_t *rk, int *pending)
{
    const struct rd_kafka_metadata *md = NULL;
    rd_kafka_topic_t *rkt = rd_kafka_topic_new(rk, c->marker_topic, NULL);
    rd_kafka_resp_err_t e = rd_kafka_metadata(rk, 0, rkt, &md,
                                              META_TIMEOUT_MS);
    rd_kafka_topic_destroy(rkt);
    if (e || md->topic_cnt != 1 || md->topics[0].err) {
        KLOG(c->host, SKIPPR_LOG_WARN, "cannot read marker topic %s: %s",
             c->marker_topic, rd_kafka_err2str(e ? e : md->topics[0].err));
        if (md)
            rd_kafka_metadata_destroy(md);
        return SKIPPR_RETRY;
    }
    int parts = md->topics[0].partition_cnt, rc = SKIPPR_OK;
    rd_kafka_topic_partition_list_t *l =
        rd_kafka_topic_partition_list_new(parts);
    *pending = 0;
    for (int i = 0; i < parts && !rc; i++) {
        int32_t p = md->topics[0].partitions[i].id;
        int64_t low, high;
        if (rd_kafka_query_watermark_offsets(rk, c->marker_topic, p, &low,
                                             &high, META_TIMEOUT_MS))
            rc = SKIPPR_RETRY;
        else if (high > low) {
            int64_t from = high - c->marker_scan > low ? high - c->marker_scan
                                                       : low;
            rd_kafka_topic_partition_list_add(l, c->marker_topic, p)->offset =
                from;
            (*pending)++;
        }
    }
    rd_kafka_metadata_destroy(md);
    if (!rc && *pending && rd_kafka_assign(rk, l))
        rc = SKIPPR_RETRY;
    rd_kafka_topic_partition_list_destroy(l);
    return rc;
}

/* A marker's key (a slice id) into c->committed (*cap its room). */
static int keep_marker(ksink *c, const rd_kafka_message_t *m, size_t *cap)
{
    if (!m->key || m->key_len >= 64)
        return SKIPPR_OK;
    int rc = skippr_array_grow(&c->committed, c->ncommitted, cap,
                               sizeof *c->committed, 256);
    if (rc)
        return rc;
    char *id = malloc(m->key_len + 1);
    if (!id)
        return SKIPPR_NOMEM;
    memcpy(id, m->key, m->key_len);
    id[m->key_len] = '\0';
    c->committed[c->ncommitted++] = id;
    return SKIPPR_OK;
}

/* Read the newest markers (read_committed) into c->committed. */
static int load_markers(ksink *c)
{
    for (size_t i = 0; i < c->ncommitted; i++)
        free(c->committed[i]);
    c->ncommitted = 0;
    rd_kafka_t *rk = marker_reader(c);
    if (!rk)
        return SKIPPR_FATAL;
    int pending = 0;
    int rc = assign_tails(c, rk, &pending);
    size_t cap = 0;
    while (!rc && pending > 0) {
        rd_kafka_message_t *m = rd_kafka_consumer_poll(rk, META_TIMEOUT_MS);
        if (!m) {
            KLOG(c->host, SKIPPR_LOG_WARN, "reading markers timed out");
            rc = SKIPPR_RETRY;
            break;
        }
        if (m->err == RD_KAFKA_RESP_ERR__PARTITION_EOF) {
            pending--;
        } else if (m->err) {
            KLOG(c->host, SKIPPR_LOG_WARN, "reading markers: %s",
                 rd_kafka_message_errstr(m));
            rc = SKIPPR_RETRY;
        } else {
            rc = keep_marker(c, m, &cap);
        }
        rd_kafka_message_destroy(m);
    }
    rd_kafka_consumer_close(rk);
    rd_kafka_destroy(rk);
    if (rc)
        return rc;
    if (c->ncommitted > 1)
        qsort(c->committed, c->ncommitted, sizeof *c->committed, cmp_str);
    c->committed_known = 1;
    return SKIPPR_OK;
}

/* Whether the slice's transaction committed: its marker is in the marker
 * topic. Read once, and again after any commit whose outcome is unknown;
 * slices committed by this instance since need no check (the engine
 * never writes a confirmed slice again). */
static int sink_check(void *ctx, const skippr_object_info *info)
{
    ksink *c = ctx;
    if (!c->committed_known) {
        int rc = load_markers(c);
        if (rc)
            return rc;
    }
    const char *id = info->slice_id;
    if (c->ncommitted == 0)
        return SKIPPR_NOENT;
    return bsearch(&id, c->committed, c->ncommitted, sizeof *c->committed,
                   cmp_str)
               ? SKIPPR_OK
               : SKIPPR_NOENT;
}

const skippr_sink_ops kafka_sink_ops = {
    .struct_size = sizeof(skippr_sink_ops),
    .ctx_size = sizeof(ksink),
    .options = options,
    .init = init,
    .destroy = destroy,
    .object_open = sink_open,
    .object_write = sink_write,
    .object_commit = sink_commit,
    .object_abort = sink_abort,
    .object_check = sink_check,
    .flags = SKIPPR_SINK_RECORDS,
};
