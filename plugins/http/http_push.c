/* The HTTP push source: clients POST NDJSON, CSV or XML and get 200 only
 * once every record of the body is durable.
 *
 * libmicrohttpd serves on its own threads, one per connection. A handler
 * collects the body (413 over max_body_bytes, 401 without the bearer
 * token, 404 off path, 503 with Retry-After while more than
 * max_queued_bytes wait), queues it and waits. poll(), on the engine's
 * thread, emits each queued body as one document (SKIPPR_MSG_DOCUMENT)
 * that the engine frames like a file: the format comes from the
 * Content-Type, else the source's format option, else the body's first
 * byte. Then it makes them durable (host->sync) and only then wakes the
 * handlers: 200, or 400 naming the first record that could not be read
 * (such records are dead-lettered, the others kept). A crash before the
 * answer leaves the client without a 200, so a client that retries until
 * it gets one loses nothing; it may send a body twice (at least once).
 *
 * Bodies form one unit, "http:<listen>", numbered in arrival order.
 * --once ends after idle_timeout_seconds without a request.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include <skippr/buf.h>
#include "http.h"

#define ANSWER_TIMEOUT_S 60

/* QUEUED: waiting in the queue; TAKEN: poll() is storing it (its
 * handler waits for the answer whatever happens); DONE: answered. */
typedef enum { REQ_QUEUED, REQ_TAKEN, REQ_DONE } req_state;

typedef struct req {
    struct req *next;
    skippr_buf body; /* at most max_body_bytes */
    int too_big;
    int denied;     /* 401 */
    const char *format; /* from the Content-Type; NULL: not known */
    req_state state;
    int status;     /* the answer, once done */
    char reason[512];
} req;

typedef struct hpush {
    /* options */
    const char *listen;
    const char *path;
    const char *token;
    int64_t max_body_bytes;
    int64_t max_queued_bytes;
    int64_t idle_timeout_seconds;
    /* state */
    const skippr_host *host;
    struct MHD_Daemon *d;
    pthread_mutex_t mu;
    pthread_cond_t cv;      /* answers are ready */
    pthread_cond_t arrived; /* a body was queued */
    int mu_init;
    req *head, *tail;   /* queued bodies, oldest first */
    int64_t queued;     /* their bytes */
    int stopping;       /* answers 503 from now on */
    char unit[300];
    int64_t next;       /* position of the next body; -1 unknown */
    int once;
    int64_t last_req_ms;
} hpush;

static const skippr_option options[] = {
    {"listen", SKIPPR_OPT_STRING, "127.0.0.1:8080", 0,
     offsetof(hpush, listen), "Address and port to listen on."},
    {"path", SKIPPR_OPT_STRING, "/", 0, offsetof(hpush, path),
     "URL path that takes POSTs."},
    {"token", SKIPPR_OPT_SECRET, NULL, 0, offsetof(hpush, token),
     "Bearer token clients must send; none: no authentication."},
    {"max_body_bytes", SKIPPR_OPT_INT, "16MiB", 0,
     offsetof(hpush, max_body_bytes), "Larger bodies are answered 413."},
    {"max_queued_bytes", SKIPPR_OPT_INT, "64MiB", 0,
     offsetof(hpush, max_queued_bytes),
     "Bodies waiting to be made durable; past it, 503 with Retry-After."},
    {"idle_timeout_seconds", SKIPPR_OPT_INT, "5", 0,
     offsetof(hpush, idle_timeout_seconds),
     "--once ends after this long without a request."},
    {NULL, 0, NULL, 0, 0, NULL}};

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static enum MHD_Result answer(struct MHD_Connection *conn, unsigned status,
                              const char *text, int retry_after)
{
    /* A long message is cut to the buffer; the reply stays a line. */
    char body[320];
    int n = snprintf(body, sizeof body, "%s\n", text);
    size_t len = n < 0 ? 0 : (size_t)n < sizeof body ? (size_t)n
                                                     : sizeof body - 1;
    struct MHD_Response *r = MHD_create_response_from_buffer(
        len, body, MHD_RESPMEM_MUST_COPY);
    if (!r)
        return MHD_NO;
    MHD_add_response_header(r, "Content-Type", "text/plain");
    if (retry_after)
        MHD_add_response_header(r, "Retry-After", "1");
    enum MHD_Result ret = MHD_queue_response(conn, status, r);
    MHD_destroy_response(r);
    return ret;
}

static int authorized(const hpush *c, struct MHD_Connection *conn)
{
    if (!c->token)
        return 1;
    const char *h = MHD_lookup_connection_value(conn, MHD_HEADER_KIND,
                                                "Authorization");
    return h && strncmp(h, "Bearer ", 7) == 0 && strcmp(h + 7, c->token) == 0;
}

/* The body format a Content-Type names ("json", "csv", "xml"), or NULL
 * when it names none of them (absent, text/plain, ...). */
static const char *content_format(struct MHD_Connection *conn)
{
    const char *ct = MHD_lookup_connection_value(conn, MHD_HEADER_KIND,
                                                 "Content-Type");
    if (!ct)
        return NULL;
    static const struct {
        const char *type, *format;
    } known[] = {{"application/x-ndjson", "json"},
                 {"application/ndjson", "json"},
                 {"application/jsonl", "json"},
                 {"application/json", "json"},
                 {"text/csv", "csv"},
                 {"application/csv", "csv"},
                 {"application/xml", "xml"},
                 {"text/xml", "xml"}};
    size_t n = strcspn(ct, "; \t");
    for (size_t i = 0; i < sizeof known / sizeof known[0]; i++)
        if (strlen(known[i].type) == n &&
            strncasecmp(ct, known[i].type, n) == 0)
            return known[i].format;
    return NULL;
}

/* Queue a complete body and wait until poll() answered it. */
static enum MHD_Result submit(hpush *c, struct MHD_Connection *conn, req *r)
{
    pthread_mutex_lock(&c->mu);
    c->last_req_ms = now_ms();
    if (c->stopping || c->queued + (int64_t)r->body.len > c->max_queued_bytes) {
        pthread_mutex_unlock(&c->mu);
        c->host->counter_add(c->host, "answered_503", 1);
        return answer(conn, MHD_HTTP_SERVICE_UNAVAILABLE,
                      "busy: retry later", 1);
    }
    if (c->tail)
        c->tail->next = r;
    else
        c->head = r;
    c->tail = r;
    c->queued += (int64_t)r->body.len;
    pthread_cond_signal(&c->arrived);
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += ANSWER_TIMEOUT_S;
    int timed_out = 0;
    while (r->state != REQ_DONE) {
        if (r->state == REQ_TAKEN) {
            pthread_cond_wait(&c->cv, &c->mu);
            continue;
        }
        if (c->stopping || timed_out)
            break;
        if (pthread_cond_timedwait(&c->cv, &c->mu, &until) == ETIMEDOUT)
            timed_out = 1;
    }
    /* Still queued (stopping, or timed out): the body is not durable. */
    int status = r->state == REQ_DONE ? r->status
                                      : MHD_HTTP_SERVICE_UNAVAILABLE;
    if (r->state != REQ_DONE) {
        /* Take it out of the queue so poll() never emits it. */
        req **pp = &c->head;
        c->tail = NULL;
        for (req *q = c->head; q; q = q->next) {
            if (q == r) {
                *pp = q->next;
                c->queued -= (int64_t)q->body.len;
                break;
            }
            pp = &q->next;
        }
        for (req *q = c->head; q; q = q->next)
            c->tail = q;
    }
    char reason[sizeof r->reason];
    snprintf(reason, sizeof reason, "%s", r->reason);
    pthread_mutex_unlock(&c->mu);
    if (status == MHD_HTTP_OK)
        return answer(conn, MHD_HTTP_OK, "ok", 0);
    if (status == MHD_HTTP_BAD_REQUEST)
        return answer(conn, MHD_HTTP_BAD_REQUEST, reason, 0);
    return answer(conn, MHD_HTTP_SERVICE_UNAVAILABLE,
                  "not stored: retry later", 1);
}

static enum MHD_Result handler(void *cls, struct MHD_Connection *conn,
                               const char *url, const char *method,
                               const char *version, const char *data,
                               size_t *size, void **con_cls)
{
    (void)version;
    hpush *c = cls;
    req *r = *con_cls;
    if (!r) {
        if (strcmp(method, "POST") != 0)
            return answer(conn, MHD_HTTP_METHOD_NOT_ALLOWED, "POST only", 0);
        if (strcmp(url, c->path) != 0)
            return answer(conn, MHD_HTTP_NOT_FOUND, "no such path", 0);
        r = calloc(1, sizeof *r);
        if (!r)
            return MHD_NO;
        r->denied = !authorized(c, conn);
        r->format = content_format(conn);
        *con_cls = r;
        return MHD_YES;
    }
    if (*size) {
        if (!r->denied && !r->too_big) {
            r->body.max = (size_t)c->max_body_bytes;
            int rc = skippr_buf_append(&r->body, data, *size);
            if (rc == SKIPPR_NOMEM)
                return MHD_NO;
            if (rc) { /* past max_body_bytes: answered 413 */
                r->too_big = 1;
                skippr_buf_free(&r->body);
            }
        }
        *size = 0;
        return MHD_YES;
    }
    if (r->denied) {
        c->host->counter_add(c->host, "answered_401", 1);
        return answer(conn, MHD_HTTP_UNAUTHORIZED, "bearer token required", 0);
    }
    if (r->too_big) {
        c->host->counter_add(c->host, "answered_413", 1);
        return answer(conn, MHD_HTTP_CONTENT_TOO_LARGE, "body too large", 0);
    }
    return submit(c, conn, r);
}

static void completed(void *cls, struct MHD_Connection *conn, void **con_cls,
                      enum MHD_RequestTerminationCode toe)
{
    (void)cls;
    (void)conn;
    (void)toe;
    req *r = *con_cls;
    if (r) {
        skippr_buf_free(&r->body);
        free(r);
        *con_cls = NULL;
    }
}

/* listen ("host:port", an IPv4 address) into *sa. */
static int listen_addr(hpush *c, struct sockaddr_in *sa, long *port)
{
    char hostpart[256];
    const char *colon = strrchr(c->listen, ':');
    *port = colon ? strtol(colon + 1, NULL, 10) : 0;
    size_t hl = colon ? (size_t)(colon - c->listen) : 0;
    if (!colon || *port <= 0 || *port > 65535 || hl >= sizeof hostpart) {
        HLOG(c->host, SKIPPR_LOG_ERROR, "listen '%s' is not host:port",
             c->listen);
        return SKIPPR_INVAL;
    }
    memcpy(hostpart, c->listen, hl);
    hostpart[hl] = '\0';
    memset(sa, 0, sizeof *sa);
    sa->sin_family = AF_INET;
    sa->sin_port = htons((uint16_t)*port);
    if (inet_pton(AF_INET, hostpart, &sa->sin_addr) != 1) {
        HLOG(c->host, SKIPPR_LOG_ERROR, "listen '%s': give an IPv4 address",
             c->listen);
        return SKIPPR_INVAL;
    }
    return SKIPPR_OK;
}

static int init(void *ctx, const skippr_host *host)
{
    hpush *c = ctx;
    c->host = host;
    c->next = -1;
    c->once = SKIPPR_HOST_HAS(host, flags) && (host->flags & SKIPPR_HOST_ONCE);
    pthread_mutex_init(&c->mu, NULL);
    pthread_cond_init(&c->cv, NULL);
    pthread_cond_init(&c->arrived, NULL);
    c->mu_init = 1;
    snprintf(c->unit, sizeof c->unit, "http:%s", c->listen);
    int rc = SKIPPR_OK;
    struct sockaddr_in sa;
    long port = 0;
    if (c->max_body_bytes <= 0 || c->max_body_bytes > ((int64_t)1 << 30)) {
        HLOG(host, SKIPPR_LOG_ERROR, "max_body_bytes must be 1 B .. 1 GiB");
        rc = SKIPPR_INVAL;
    }
    if (!rc)
        rc = listen_addr(c, &sa, &port);
    if (!rc) {
        c->d = MHD_start_daemon(
            MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD |
                MHD_USE_ERROR_LOG,
            (uint16_t)port, NULL, NULL, handler, c, MHD_OPTION_SOCK_ADDR,
            (struct sockaddr *)&sa, MHD_OPTION_NOTIFY_COMPLETED, completed,
            c, MHD_OPTION_LISTENING_ADDRESS_REUSE, 1,
            MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)120, MHD_OPTION_END);
        if (!c->d) {
            HLOG(host, SKIPPR_LOG_ERROR, "cannot listen on %s (in use?)",
                 c->listen);
            rc = SKIPPR_FATAL;
        }
    }
    c->last_req_ms = now_ms();
    if (!rc)
        HLOG(host, SKIPPR_LOG_INFO, "listening on http://%s%s", c->listen,
             c->path);
    return rc;
}

static void destroy(void *ctx)
{
    hpush *c = ctx;
    if (c->mu_init) {
        pthread_mutex_lock(&c->mu);
        c->stopping = 1;
        pthread_cond_broadcast(&c->cv);
        pthread_mutex_unlock(&c->mu);
    }
    if (c->d)
        MHD_stop_daemon(c->d);
    if (c->mu_init) {
        pthread_mutex_destroy(&c->mu);
        pthread_cond_destroy(&c->cv);
        pthread_cond_destroy(&c->arrived);
    }
}

/* Emit one body as a document; the engine frames it and notes in
 * r->reason why its first bad record was set aside. */
static int emit_body(hpush *c, req *r, int *bad)
{
    skippr_message m = {.struct_size = sizeof m, .unit = c->unit,
                        .position = c->next, .data = r->body.data,
                        .len = r->body.len,
                        .flags = SKIPPR_MSG_DOCUMENT, .format = r->format,
                        .problem = r->reason,
                        .problem_cap = sizeof r->reason};
    r->reason[0] = '\0';
    int rc = c->host->emit(c->host, &m);
    if (rc)
        return rc;
    c->next++;
    *bad = r->reason[0] != '\0';
    if (*bad) {
        size_t n = strlen(r->reason);
        snprintf(r->reason + n, sizeof r->reason - n,
                 "; it was set aside, the other records were stored");
    }
    return SKIPPR_OK;
}

static int src_poll(void *ctx, int timeout_ms)
{
    hpush *c = ctx;
    if (c->next < 0) {
        int64_t next = 0;
        c->next = c->host->position(c->host, c->unit, &next) == SKIPPR_OK
                      ? next
                      : 0;
    }
    pthread_mutex_lock(&c->mu);
    if (!c->head) {
        /* Nothing queued: wait up to timeout_ms for a body. */
        struct timespec until;
        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_nsec += (long)timeout_ms * 1000000L;
        until.tv_sec += until.tv_nsec / 1000000000L;
        until.tv_nsec %= 1000000000L;
        pthread_cond_timedwait(&c->arrived, &c->mu, &until);
    }
    req *batch = c->head;
    c->head = c->tail = NULL;
    for (req *r = batch; r; r = r->next)
        r->state = REQ_TAKEN;
    int64_t bytes = c->queued;
    c->queued = 0;
    int64_t idle = now_ms() - c->last_req_ms;
    pthread_mutex_unlock(&c->mu);
    if (!batch)
        return c->once && idle >= c->idle_timeout_seconds * 1000 ? SKIPPR_END
                                                                 : SKIPPR_OK;
    int rc = SKIPPR_OK;
    int64_t n = 0;
    for (req *r = batch; r && !rc; r = r->next) {
        int bad = 0;
        rc = emit_body(c, r, &bad);
        r->status = bad ? MHD_HTTP_BAD_REQUEST : MHD_HTTP_OK;
        n++;
    }
    if (!rc)
        rc = c->host->sync(c->host); /* durable before any answer */
    pthread_mutex_lock(&c->mu);
    for (req *r = batch; r;) {
        req *next = r->next;
        r->next = NULL;
        if (rc)
            r->status = MHD_HTTP_SERVICE_UNAVAILABLE;
        r->state = REQ_DONE;
        r = next;
    }
    pthread_cond_broadcast(&c->cv);
    pthread_mutex_unlock(&c->mu);
    if (!rc) {
        c->host->counter_add(c->host, "bodies", n);
        c->host->counter_add(c->host, "body_bytes", bytes);
    }
    return rc;
}

static int src_ack(void *ctx, const char *unit, int64_t position)
{
    (void)ctx;
    (void)unit;
    (void)position;
    return SKIPPR_OK; /* answers leave in poll(), after host->sync() */
}

const skippr_source_ops http_push_ops = {
    .struct_size = sizeof(skippr_source_ops),
    .ctx_size = sizeof(hpush),
    .options = options,
    .init = init,
    .destroy = destroy,
    .poll = src_poll,
    .ack = src_ack,
    .flags = SKIPPR_SOURCE_DOCUMENTS,
};
