/* The HTTP sink: each object's records POSTed as NDJSON in parts of up to
 * batch_bytes, each part with an Idempotency-Key "<slice id>-<part>".
 *
 * A slice always yields the same records in the same order, so its parts
 * and their keys are the same on every attempt, in this run or after a
 * crash: a receiver that remembers keys stores each part once. Without
 * that it is at least once. 2xx is success; 5xx, 429, 408, timeouts and
 * connection failures are retried, first here for that one POST
 * (max_attempts, with backoff), then by the engine for the whole object;
 * other 4xx are fatal, with the receiver's answer in the log. Extra headers
 * (header.NAME options) are sent as given and never logged.
 */
#include <curl/curl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "curl_tls.h"
#include <skippr/backoff.h>
#include "curl_trace.h"
#include <skippr/buf.h>
#include "http.h"
#include "reach.h"

typedef struct hsink {
    /* options */
    const char *url;
    const char *content_type;
    int64_t batch_bytes;
    int64_t timeout_seconds;
    int64_t max_attempts;
    const skippr_kv *headers;
    const char *ca_file;
    /* state */
    const skippr_host *host;
    CURL *curl;
    struct curl_slist *base; /* Content-Type and the extra headers */
    skippr_backoff backoff;  /* waits between a part's attempts */
} hsink;

typedef struct hpart {
    char slice[64];
    int part;
    skippr_buf body; /* the part being filled: records and newlines */
} hpart;

static const skippr_option options[] = {
    {"url", SKIPPR_OPT_STRING, NULL, 1, offsetof(hsink, url),
     "Endpoint that takes the POSTs."},
    {"content_type", SKIPPR_OPT_STRING, "application/x-ndjson", 0,
     offsetof(hsink, content_type), "Content-Type of each POST."},
    {"batch_bytes", SKIPPR_OPT_INT, "1MiB", 0, offsetof(hsink, batch_bytes),
     "A POST carries records up to about this many bytes."},
    {"timeout_seconds", SKIPPR_OPT_INT, "30", 0,
     offsetof(hsink, timeout_seconds), "Per request; then it is retried."},
    {"max_attempts", SKIPPR_OPT_INT, "5", 0, offsetof(hsink, max_attempts),
     "Tries of one POST (5xx, 429, timeouts) before the engine retries the "
     "whole object."},
    {"ca_file", SKIPPR_OPT_STRING, NULL, 0, offsetof(hsink, ca_file),
     "CA certificates (PEM) that an https server's certificate must chain "
     "to; default: the system's. Verification is always on."},
    {"header.", SKIPPR_OPT_PREFIX, NULL, 0, offsetof(hsink, headers),
     "Extra request headers, e.g. header.X-Api-Key: k (values never "
     "logged)."},
    {NULL, 0, NULL, 0, 0, NULL}};

static size_t keep_answer(char *p, size_t size, size_t n, void *ud)
{
    char *out = ud; /* 256 bytes: the start of the answer, for the log */
    size_t have = strlen(out), add = size * n;
    if (have < 255) {
        size_t k = add < 255 - have ? add : 255 - have;
        memcpy(out + have, p, k);
        out[have + k] = '\0';
    }
    return add;
}

static int init(void *ctx, const skippr_host *host)
{
    hsink *c = ctx;
    c->host = host;
    skippr_backoff_init(&c->backoff, 100, 3200);
    int rc = SKIPPR_OK;
    if (c->max_attempts < 1 || c->max_attempts > 100) {
        HLOG(host, SKIPPR_LOG_ERROR, "max_attempts must be 1 to 100");
        rc = SKIPPR_INVAL;
    } else if (strncmp(c->url, "http://", 7) &&
               strncmp(c->url, "https://", 8)) {
        HLOG(host, SKIPPR_LOG_ERROR, "url must start with http:// or "
             "https://");
        rc = SKIPPR_INVAL;
    }
    curl_global_init(CURL_GLOBAL_DEFAULT);
    if (!rc && !(c->curl = curl_easy_init()))
        rc = SKIPPR_NOMEM;
    char line[512];
    snprintf(line, sizeof line, "Content-Type: %s", c->content_type);
    if (!rc && !(c->base = curl_slist_append(NULL, line)))
        rc = SKIPPR_NOMEM;
    if (!rc) /* the extra headers; destroy() frees the list */
        rc = skippr_curl_add_headers(&c->base, c->headers);
    return rc;
}

static void destroy(void *ctx)
{
    hsink *c = ctx;
    curl_slist_free_all(c->base);
    if (c->curl)
        curl_easy_cleanup(c->curl);
}

/* POST one part, once. */
static int post_once(hsink *c, hpart *p)
{
    char key[128];
    snprintf(key, sizeof key, "Idempotency-Key: %s-%d", p->slice, p->part);
    struct curl_slist *hs = NULL;
    for (struct curl_slist *l = c->base; l; l = l->next)
        if (!(hs = curl_slist_append(hs, l->data)))
            return SKIPPR_NOMEM;
    struct curl_slist *all = curl_slist_append(hs, key);
    if (!all) {
        curl_slist_free_all(hs);
        return SKIPPR_NOMEM;
    }
    char answer[256] = "";
    CURL *h = c->curl;
    curl_easy_reset(h);
    curl_easy_setopt(h, CURLOPT_URL, c->url);
    curl_easy_setopt(h, CURLOPT_POST, 1L);
    curl_easy_setopt(h, CURLOPT_POSTFIELDS,
                     p->body.data ? (const char *)p->body.data : "");
    curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)p->body.len);
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, all);
    curl_easy_setopt(h, CURLOPT_TIMEOUT, (long)c->timeout_seconds);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, keep_answer);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, answer);
    if (c->ca_file)
        curl_easy_setopt(h, CURLOPT_CAINFO, c->ca_file);
    skippr_curl_trace(h, c->host);
    char why[CURL_ERROR_SIZE] = "";
    curl_easy_setopt(h, CURLOPT_ERRORBUFFER, why);
    CURLcode e = curl_easy_perform(h);
    curl_easy_setopt(h, CURLOPT_ERRORBUFFER, NULL);
    long status = 0;
    curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
    curl_slist_free_all(all);
    if (http_tls_refused(e)) {
        HLOG(c->host, SKIPPR_LOG_ERROR, "POST %s: %s (%s); give the "
             "server's CA as ca_file", c->url, curl_easy_strerror(e), why);
        return SKIPPR_FATAL; /* no retry makes a certificate valid */
    }
    if (e != CURLE_OK) {
        HLOG(c->host, SKIPPR_LOG_WARN, "POST %s: %s%s%s%s", c->url,
             curl_easy_strerror(e), why[0] ? " (" : "", why,
             why[0] ? ")" : "");
        return SKIPPR_RETRY;
    }
    if (status >= 200 && status < 300) {
        c->host->counter_add(c->host, "posts", 1);
        return SKIPPR_OK;
    }
    for (char *q = answer; *q; q++)
        if (*q == '\n' || *q == '\r')
            *q = ' ';
    if (status >= 500 || status == 429 || status == 408) {
        c->host->counter_add(c->host, "posts_retried", 1);
        HLOG(c->host, SKIPPR_LOG_WARN, "POST %s: %ld %s", c->url, status,
             answer);
        return SKIPPR_RETRY;
    }
    HLOG(c->host, SKIPPR_LOG_ERROR, "POST %s: %ld %s", c->url, status, answer);
    return SKIPPR_FATAL;
}

/* POST one part, retrying what may succeed later with backoff (100 ms
 * doubling to 3.2 s, jittered: backoff.h), so that one refused request
 * does not cost the whole object's earlier parts. */
static int post(hsink *c, hpart *p)
{
    int rc = SKIPPR_RETRY;
    for (int64_t a = 0; a < c->max_attempts; a++) {
        if (a) {
            if (c->host->should_stop(c->host))
                return SKIPPR_STOPPED;
            skippr_backoff_sleep(&c->backoff, (int)a);
        }
        if ((rc = post_once(c, p)) != SKIPPR_RETRY)
            return rc;
    }
    return rc;
}

static int sink_open(void *ctx, const skippr_object_info *info, void **h)
{
    (void)ctx;
    hpart *p = calloc(1, sizeof *p);
    if (!p)
        return SKIPPR_NOMEM;
    snprintf(p->slice, sizeof p->slice, "%s", info->slice_id);
    *h = p;
    return SKIPPR_OK;
}

static int sink_write(void *ctx, void *h, const void *buf, size_t len)
{
    hsink *c = ctx;
    hpart *p = h;
    if (p->body.len && p->body.len + len + 1 > (size_t)c->batch_bytes) {
        int rc = post(c, p);
        if (rc)
            return rc;
        p->part++;
        p->body.len = 0;
    }
    int rc = skippr_buf_reserve(&p->body, len + 1);
    if (!rc)
        rc = skippr_buf_append(&p->body, buf, len);
    return rc ? rc : skippr_buf_append(&p->body, "\n", 1);
}

static int sink_commit(void *ctx, void *h)
{
    hsink *c = ctx;
    hpart *p = h;
    int rc = p->body.len ? post(c, p) : SKIPPR_OK;
    skippr_buf_free(&p->body);
    free(p);
    return rc;
}

static void sink_abort(void *ctx, void *h)
{
    (void)ctx;
    hpart *p = h;
    skippr_buf_free(&p->body);
    free(p);
}

/* The preflight: the server answers a connection; nothing is POSTed. */
static int sink_probe(void *ctx)
{
    hsink *c = ctx;
    return http_reach(c->host, c->url, "url", c->ca_file, c->timeout_seconds);
}

const skippr_sink_ops http_sink_ops = {
    .struct_size = sizeof(skippr_sink_ops),
    .ctx_size = sizeof(hsink),
    .options = options,
    .init = init,
    .destroy = destroy,
    .object_open = sink_open,
    .object_write = sink_write,
    .object_commit = sink_commit,
    .object_abort = sink_abort,
    .flags = SKIPPR_SINK_RECORDS,
    .probe = sink_probe,
};
