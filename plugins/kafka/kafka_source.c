/* The Kafka source: a consumer in a group whose progress lives in skippr's
 * WAL.
 *
 * Each topic-partition is a unit ("topic/3"); a message's offset is its
 * position. librdkafka never commits on its own: the engine acks a
 * partition's offset only once everything before it is durable in the
 * WAL, and the ack commits it to the group. On assignment a partition
 * starts at the later of the WAL's position and the group's committed
 * offset, so a restart reads nothing durable again, and neither does a
 * member that takes the partition over. On revocation the engine first
 * makes what it has read durable and acks it (host->sync), so the next
 * owner starts after it. The engine also drops any redelivered message
 * below a unit's durable position.
 *
 * The group's offsets are how another member (with its own WAL) learns
 * what is durable, so a commit that fails is not left behind: each
 * partition remembers what was acked and what the group confirmed, and
 * what is missing is committed again on a later poll (at most once a
 * second), synchronously on revocation and at close, and on assignment
 * when the WAL is ahead of the group.
 *
 * --once: the high watermarks of every partition are read at start; the
 * run ends when each assigned partition has been read up to its mark.
 *
 * group_id "" runs without a group: this instance reads every partition
 * of the topics from the WAL's positions (earliest when it has none) and
 * commits no offsets. No rebalance delays a restart.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kafka.h"

#define MAX_HEADERS 64      /* headers of one message offered for routing */
#define POLL_BATCH 10000    /* messages per poll() call at most */
#define META_TIMEOUT_MS 10000

typedef struct kpart {
    char topic[256];
    int32_t partition;
    int64_t high;     /* --once: the high watermark at start */
    int64_t next;     /* next offset to read; -1 unknown */
    int64_t acked;    /* next offset after what is durable; -1 none */
    int64_t in_group; /* the group's committed offset as last known */
    int assigned;
} kpart;

typedef struct ksrc {
    /* options */
    const char *brokers;
    const char *topic;
    const char *group_id;
    const skippr_kv *props;
    /* state */
    const skippr_host *host;
    rd_kafka_t *rk;
    int once;
    int closing;   /* destroy(): a revoke must not call into the engine */
    int in_revoke; /* acks commit synchronously */
    int failed;    /* a callback failed: poll() returns it */
    kpart *parts;  /* every partition of the topics at start */
    size_t nparts;
    int ever_assigned;
    int no_group;  /* group_id "": every partition, assigned by us */
    int64_t retry_ms; /* when pending commits were last sent again */
} ksrc;

static const skippr_option options[] = {
    {"brokers", SKIPPR_OPT_STRING, NULL, 1, offsetof(ksrc, brokers),
     "Bootstrap brokers, host:port[,host:port...]."},
    {"topic", SKIPPR_OPT_STRING, NULL, 1, offsetof(ksrc, topic),
     "Topic to read, or a list of topics."},
    {"group_id", SKIPPR_OPT_STRING, "skippr", 0, offsetof(ksrc, group_id),
     "Consumer group; offsets are committed to it once durable. \"\": no "
     "group, this instance reads every partition."},
    {"kafka.", SKIPPR_OPT_PREFIX, NULL, 0, offsetof(ksrc, props),
     "Any librdkafka property, e.g. kafka.security.protocol: SSL."},
    {NULL, 0, NULL, 0, 0, NULL}};

static kpart *find_part(ksrc *c, const char *topic, int32_t partition)
{
    for (size_t i = 0; i < c->nparts; i++)
        if (c->parts[i].partition == partition &&
            strcmp(c->parts[i].topic, topic) == 0)
            return &c->parts[i];
    return NULL;
}

static void unit_name(char *out, size_t cap, const char *topic, int32_t p)
{
    snprintf(out, cap, "%s/%" PRId32, topic, p);
}

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Offsets the group has taken: remember them, so they are not sent
 * again. */
static void confirmed(ksrc *c, const rd_kafka_topic_partition_list_t *l)
{
    for (int i = 0; l && i < l->cnt; i++) {
        const rd_kafka_topic_partition_t *tp = &l->elems[i];
        kpart *kp = find_part(c, tp->topic, tp->partition);
        if (kp && !tp->err && tp->offset > kp->in_group)
            kp->in_group = tp->offset;
    }
}

/* Commit, for every assigned partition, the acked offset the group has
 * not confirmed: asynchronously (the commit callback confirms), or
 * synchronously. Only assigned partitions: an offset of a partition that
 * moved on could take its new owner's commits back. Returns the commit's
 * error, or 0 (also when nothing was pending). */
static rd_kafka_resp_err_t commit_pending(ksrc *c, int sync)
{
    if (c->no_group || !c->rk)
        return RD_KAFKA_RESP_ERR_NO_ERROR;
    rd_kafka_topic_partition_list_t *l = NULL;
    for (size_t i = 0; i < c->nparts; i++) {
        kpart *kp = &c->parts[i];
        if (!kp->assigned || kp->acked <= kp->in_group)
            continue;
        if (!l && !(l = rd_kafka_topic_partition_list_new(4)))
            return RD_KAFKA_RESP_ERR__FAIL;
        rd_kafka_topic_partition_list_add(l, kp->topic, kp->partition)
            ->offset = kp->acked;
    }
    if (!l)
        return RD_KAFKA_RESP_ERR_NO_ERROR;
    rd_kafka_resp_err_t e = rd_kafka_commit(c->rk, l, !sync);
    if (sync && !e)
        confirmed(c, l);
    rd_kafka_topic_partition_list_destroy(l);
    return e;
}

/* Assignment: each partition starts at max(WAL position, committed
 * offset); with neither, auto.offset.reset decides (earliest unless
 * configured). */
static void on_assign(ksrc *c, rd_kafka_topic_partition_list_t *parts)
{
    rd_kafka_resp_err_t e =
        c->no_group ? RD_KAFKA_RESP_ERR__NO_OFFSET
                    : rd_kafka_committed(c->rk, parts, 10000);
    if (e && !c->no_group)
        KLOG(c->host, SKIPPR_LOG_WARN, "reading committed offsets failed "
             "(%s); starting from the WAL's positions", rd_kafka_err2str(e));
    for (int i = 0; i < parts->cnt; i++) {
        rd_kafka_topic_partition_t *tp = &parts->elems[i];
        int64_t committed = e || tp->err ? -1 : tp->offset;
        char unit[300];
        unit_name(unit, sizeof unit, tp->topic, tp->partition);
        int64_t wal = -1;
        if (c->host->position(c->host, unit, &wal) != SKIPPR_OK)
            wal = -1;
        int64_t start = wal > committed ? wal : committed;
        tp->offset = start >= 0         ? start
                     : c->no_group ? RD_KAFKA_OFFSET_BEGINNING
                                   : RD_KAFKA_OFFSET_STORED;
        kpart *kp = find_part(c, tp->topic, tp->partition);
        if (kp) {
            kp->assigned = 1;
            if (start > kp->next)
                kp->next = start;
            kp->in_group = committed;
            if (wal > kp->acked)
                kp->acked = wal; /* durable here: the group should know */
        }
        if (start > 0)
            KLOG(c->host, SKIPPR_LOG_INFO, "%s resumes at offset %" PRId64
                 " (WAL %" PRId64 ", group %" PRId64 ")", unit, start, wal,
                 committed);
    }
    c->ever_assigned = 1;
    KLOG(c->host, SKIPPR_LOG_INFO, "%d partition%s assigned", parts->cnt,
         parts->cnt == 1 ? "" : "s");
    e = rd_kafka_assign(c->rk, parts);
    if (e) {
        KLOG(c->host, SKIPPR_LOG_ERROR, "assign failed: %s",
             rd_kafka_err2str(e));
        c->failed = SKIPPR_FATAL;
        return;
    }
    commit_pending(c, 0); /* a WAL ahead of the group, from a lost commit */
}

static void rebalance_cb(rd_kafka_t *rk, rd_kafka_resp_err_t err,
                         rd_kafka_topic_partition_list_t *parts, void *opaque)
{
    ksrc *c = opaque;
    if (err == RD_KAFKA_RESP_ERR__ASSIGN_PARTITIONS) {
        on_assign(c, parts);
        return;
    }
    if (err == RD_KAFKA_RESP_ERR__REVOKE_PARTITIONS)
        KLOG(c->host, SKIPPR_LOG_INFO, "%d partition%s revoked", parts->cnt,
             parts->cnt == 1 ? "" : "s");
    if (err == RD_KAFKA_RESP_ERR__REVOKE_PARTITIONS && !c->closing) {
        /* Hand over nothing half-done: what was read becomes durable and
         * committed before the partitions go. */
        c->in_revoke = 1;
        int rc = c->host->sync(c->host);
        c->in_revoke = 0;
        if (rc)
            c->failed = rc;
        rd_kafka_resp_err_t e = commit_pending(c, 1);
        if (e)
            KLOG(c->host, SKIPPR_LOG_WARN, "handing partitions over without "
                 "their latest offsets (%s): their next owners may repeat "
                 "records from the last committed ones", rd_kafka_err2str(e));
    } else if (err != RD_KAFKA_RESP_ERR__REVOKE_PARTITIONS) {
        KLOG(c->host, SKIPPR_LOG_WARN, "rebalance: %s", rd_kafka_err2str(err));
    }
    for (size_t i = 0; i < c->nparts; i++)
        c->parts[i].assigned = 0;
    rd_kafka_assign(rk, NULL);
}

static void error_cb(rd_kafka_t *rk, int err, const char *reason,
                     void *opaque)
{
    ksrc *c = opaque;
    char fatal[512];
    if (err == RD_KAFKA_RESP_ERR__FATAL) {
        rd_kafka_fatal_error(rk, fatal, sizeof fatal);
        KLOG(c->host, SKIPPR_LOG_ERROR, "fatal consumer error: %s", fatal);
        c->failed = SKIPPR_FATAL;
        return;
    }
    KLOG(c->host, SKIPPR_LOG_WARN, "%s: %s", rd_kafka_err2name(err), reason);
}

static void commit_cb(rd_kafka_t *rk, rd_kafka_resp_err_t err,
                      rd_kafka_topic_partition_list_t *offsets, void *opaque)
{
    (void)rk;
    ksrc *c = opaque;
    /* A failed commit stays pending (acked > in_group) and is sent again
     * by a later poll, the revocation or the close. */
    if (err && err != RD_KAFKA_RESP_ERR__NO_OFFSET)
        KLOG(c->host, SKIPPR_LOG_WARN, "offset commit failed (sent again "
             "later): %s", rd_kafka_err2str(err));
    else if (!err) {
        confirmed(c, offsets);
        c->host->counter_add(c->host, "offset_commits", 1);
    }
}

/* Every partition of the topics (a group-less source assigns them all),
 * and for --once each one's high watermark now. */
static int read_partitions(ksrc *c)
{
    const struct rd_kafka_metadata *md = NULL;
    rd_kafka_resp_err_t e = rd_kafka_metadata(c->rk, 1, NULL, &md,
                                              META_TIMEOUT_MS);
    if (e) {
        KLOG(c->host, SKIPPR_LOG_ERROR, "cannot reach the Kafka brokers %s: "
             "%s", c->brokers, rd_kafka_err2str(e));
        return SKIPPR_FATAL;
    }
    size_t n = 0;
    for (int t = 0; t < md->topic_cnt; t++)
        n += (size_t)md->topics[t].partition_cnt;
    c->parts = calloc(n ? n : 1, sizeof *c->parts);
    if (!c->parts) {
        rd_kafka_metadata_destroy(md);
        return SKIPPR_NOMEM;
    }
    int rc = SKIPPR_OK;
    for (int t = 0; t < md->topic_cnt && !rc; t++) {
        const char *name = md->topics[t].topic;
        size_t len = strlen(name);
        const char *p = c->topic;
        int wanted = 0;
        while (*p && !wanted) {
            size_t k = strcspn(p, ",");
            wanted = k == len && memcmp(p, name, k) == 0;
            p += k + (p[k] == ',');
        }
        if (!wanted || len >= sizeof c->parts[0].topic)
            continue;
        for (int i = 0; i < md->topics[t].partition_cnt; i++) {
            kpart *kp = &c->parts[c->nparts++];
            memcpy(kp->topic, name, len + 1);
            kp->partition = md->topics[t].partitions[i].id;
            kp->next = kp->acked = kp->in_group = -1;
            if (!c->once)
                continue;
            int64_t low = 0;
            e = rd_kafka_query_watermark_offsets(c->rk, name, kp->partition,
                                                 &low, &kp->high,
                                                 META_TIMEOUT_MS);
            if (e) {
                KLOG(c->host, SKIPPR_LOG_ERROR, "watermarks of %s/%d: %s",
                     name, kp->partition, rd_kafka_err2str(e));
                rc = SKIPPR_FATAL;
                break;
            }
        }
    }
    rd_kafka_metadata_destroy(md);
    return rc;
}

/* The consumer, made from conf (which it takes, or which is freed). */
static int make_consumer(ksrc *c, rd_kafka_conf_t *conf)
{
    char err[512];
    c->no_group = !*c->group_id;
    if (rd_kafka_conf_set(conf, "group.id",
                          c->no_group ? "skippr-no-group" : c->group_id, err,
                          sizeof err)) {
        KLOG(c->host, SKIPPR_LOG_ERROR, "group_id: %s", err);
        rd_kafka_conf_destroy(conf);
        return SKIPPR_INVAL;
    }
    rd_kafka_conf_set_opaque(conf, c);
    rd_kafka_conf_set_rebalance_cb(conf, rebalance_cb);
    rd_kafka_conf_set_error_cb(conf, error_cb);
    rd_kafka_conf_set_offset_commit_cb(conf, commit_cb);
    c->rk = rd_kafka_new(RD_KAFKA_CONSUMER, conf, err, sizeof err);
    if (!c->rk) {
        KLOG(c->host, SKIPPR_LOG_ERROR, "cannot create the consumer: %s",
             err);
        rd_kafka_conf_destroy(conf);
        return SKIPPR_INVAL;
    }
    rd_kafka_poll_set_consumer(c->rk);
    return SKIPPR_OK;
}

/* Subscribe the group to every topic of the comma list. */
static int subscribe(ksrc *c)
{
    size_t n = 1;
    for (const char *p = c->topic; *p; p++)
        n += *p == ',';
    rd_kafka_topic_partition_list_t *subs =
        rd_kafka_topic_partition_list_new((int)n);
    const char *p = c->topic;
    while (*p) {
        size_t k = strcspn(p, ",");
        char name[256];
        snprintf(name, sizeof name, "%.*s", (int)k, p);
        rd_kafka_topic_partition_list_add(subs, name, RD_KAFKA_PARTITION_UA);
        p += k + (p[k] == ',');
    }
    rd_kafka_resp_err_t e = rd_kafka_subscribe(c->rk, subs);
    rd_kafka_topic_partition_list_destroy(subs);
    if (e) {
        KLOG(c->host, SKIPPR_LOG_ERROR, "subscribe to %s: %s", c->topic,
             rd_kafka_err2str(e));
        return SKIPPR_FATAL;
    }
    return SKIPPR_OK;
}

static int init(void *ctx, const skippr_host *host)
{
    ksrc *c = ctx;
    c->host = host;
    c->once = SKIPPR_HOST_HAS(host, flags) && (host->flags & SKIPPR_HOST_ONCE);
    static const char *const settings[] = {
        "enable.auto.commit", "false",
        "enable.auto.offset.store", "false",
        "auto.offset.reset", "earliest",
        "isolation.level", "read_committed",
        "enable.partition.eof", "true",
        "partition.assignment.strategy", "range,roundrobin",
        NULL};
    rd_kafka_conf_t *conf = kafka_conf(host, c->brokers, settings, c->props);
    int rc = conf ? make_consumer(c, conf) : SKIPPR_INVAL;
    if (!rc)
        rc = kafka_topics_exist(host, c->rk, c->brokers, c->topic, "topic",
                                META_TIMEOUT_MS);
    if (!rc)
        rc = read_partitions(c);
    int check = SKIPPR_HOST_HAS(host, flags) &&
                (host->flags & SKIPPR_HOST_CHECK);
    /* Without a group the first poll() assigns; a check joins none. */
    if (!rc && !c->no_group && !check)
        rc = subscribe(c);
    return rc;
}

static void destroy(void *ctx)
{
    ksrc *c = ctx;
    if (c->rk) {
        /* What is durable reaches the group before this member leaves,
         * so the partitions' next owners start after it. */
        rd_kafka_resp_err_t e = commit_pending(c, 1);
        if (e)
            KLOG(c->host, SKIPPR_LOG_WARN, "leaving the group without the "
                 "latest offsets (%s): the partitions' next owners may "
                 "repeat records from the last committed ones",
                 rd_kafka_err2str(e));
        c->closing = 1;
        rd_kafka_consumer_close(c->rk);
        rd_kafka_destroy(c->rk);
    }
    free(c->parts);
}

/* --once is over when every partition assigned to this member has been
 * read up to its watermark from the start. */
static int once_done(const ksrc *c)
{
    if (!c->ever_assigned)
        return 0;
    for (size_t i = 0; i < c->nparts; i++) {
        const kpart *kp = &c->parts[i];
        if (kp->assigned && kp->high > 0 && kp->next < kp->high)
            return 0;
    }
    return 1;
}

static int emit_message(ksrc *c, const rd_kafka_message_t *m)
{
    const char *topic = rd_kafka_topic_name(m->rkt);
    char unit[300];
    unit_name(unit, sizeof unit, topic, m->partition);
    skippr_header hs[MAX_HEADERS];
    size_t nh = 0;
    rd_kafka_headers_t *hdrs = NULL;
    if (rd_kafka_message_headers(m, &hdrs) == RD_KAFKA_RESP_ERR_NO_ERROR) {
        const char *name;
        const void *val;
        size_t size;
        while (nh < MAX_HEADERS &&
               rd_kafka_header_get_all(hdrs, nh, &name, &val, &size) ==
                   RD_KAFKA_RESP_ERR_NO_ERROR) {
            hs[nh] = (skippr_header){name, val, val ? size : 0};
            nh++;
        }
    }
    skippr_message msg = {
        .struct_size = sizeof msg,
        .unit = unit,
        .position = m->offset,
        .data = m->payload ? m->payload : "",
        .len = m->payload ? m->len : 0,
        .key = m->key,
        .key_len = m->key ? m->key_len : 0,
        .topic = topic,
        .headers = hs,
        .nheaders = nh,
    };
    int rc = c->host->emit(c->host, &msg);
    /* Only --once needs each partition's progress (once_done()). */
    kpart *kp = c->once && !rc ? find_part(c, topic, m->partition) : NULL;
    if (kp && m->offset + 1 > kp->next)
        kp->next = m->offset + 1;
    return rc;
}

/* Without a group: every partition, from the WAL's positions. */
static int assign_all(ksrc *c)
{
    rd_kafka_topic_partition_list_t *l =
        rd_kafka_topic_partition_list_new((int)c->nparts);
    for (size_t i = 0; i < c->nparts; i++)
        rd_kafka_topic_partition_list_add(l, c->parts[i].topic,
                                          c->parts[i].partition);
    on_assign(c, l);
    rd_kafka_topic_partition_list_destroy(l);
    return c->failed;
}

static int src_poll(void *ctx, int timeout_ms)
{
    ksrc *c = ctx;
    int wait = timeout_ms;
    if (c->no_group && !c->ever_assigned && assign_all(c))
        return c->failed;
    for (int i = 0; i < POLL_BATCH; i++) {
        if (c->failed)
            return c->failed;
        if (c->once && once_done(c))
            return SKIPPR_END;
        rd_kafka_message_t *m = rd_kafka_consumer_poll(c->rk, wait);
        if (!m)
            break;
        wait = 0; /* drain what has arrived, then return */
        int rc = SKIPPR_OK;
        if (m->err == RD_KAFKA_RESP_ERR__PARTITION_EOF) {
            kpart *kp = find_part(c, rd_kafka_topic_name(m->rkt),
                                  m->partition);
            if (kp && m->offset > kp->next)
                kp->next = m->offset;
        } else if (m->err) {
            KLOG(c->host, SKIPPR_LOG_WARN, "consumer: %s",
                 rd_kafka_message_errstr(m));
            if (m->err == RD_KAFKA_RESP_ERR_UNKNOWN_TOPIC_OR_PART ||
                m->err == RD_KAFKA_RESP_ERR_TOPIC_AUTHORIZATION_FAILED ||
                m->err == RD_KAFKA_RESP_ERR_GROUP_AUTHORIZATION_FAILED) {
                KLOG(c->host, SKIPPR_LOG_ERROR, "consumer: %s",
                     rd_kafka_message_errstr(m));
                rc = SKIPPR_FATAL;
            }
        } else {
            rc = emit_message(c, m);
        }
        rd_kafka_message_destroy(m);
        if (rc)
            return rc;
    }
    if (c->failed)
        return c->failed;
    int64_t now = now_ms();
    if (now - c->retry_ms >= 1000) {
        c->retry_ms = now;
        commit_pending(c, 0);
    }
    return c->once && once_done(c) ? SKIPPR_END : SKIPPR_OK;
}

/* Everything up to and including position is durable: commit position+1
 * to the group (synchronously while partitions are being revoked). */
static int src_ack(void *ctx, const char *unit, int64_t position)
{
    ksrc *c = ctx;
    if (c->no_group)
        return SKIPPR_OK; /* the WAL alone holds the positions */
    const char *slash = strrchr(unit, '/');
    if (!slash || slash == unit)
        return SKIPPR_INVAL;
    char topic[256];
    snprintf(topic, sizeof topic, "%.*s", (int)(slash - unit), unit);
    char *end;
    errno = 0;
    long part = strtol(slash + 1, &end, 10);
    if (*end || errno || part < 0 || part > INT32_MAX)
        return SKIPPR_INVAL;
    kpart *kp = find_part(c, topic, (int32_t)part);
    if (kp && position + 1 > kp->acked)
        kp->acked = position + 1;
    rd_kafka_topic_partition_list_t *l = rd_kafka_topic_partition_list_new(1);
    rd_kafka_topic_partition_list_add(l, topic, (int32_t)part)->offset =
        position + 1;
    rd_kafka_resp_err_t e = rd_kafka_commit(c->rk, l, !c->in_revoke);
    if (c->in_revoke && !e)
        confirmed(c, l);
    rd_kafka_topic_partition_list_destroy(l);
    if (e && c->in_revoke)
        KLOG(c->host, SKIPPR_LOG_WARN, "handing %s over without its offset "
             "%" PRId64 " (%s): its next owner may repeat records from its "
             "last committed offset", unit, position + 1,
             rd_kafka_err2str(e));
    return SKIPPR_OK;
}

const skippr_source_ops kafka_source_ops = {
    .struct_size = sizeof(skippr_source_ops),
    .ctx_size = sizeof(ksrc),
    .options = options,
    .init = init,
    .destroy = destroy,
    .poll = src_poll,
    .ack = src_ack,
};
