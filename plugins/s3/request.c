/* S3 requests: a request signed (Signature Version 4 with the credential
 * chain's current keys), sent with libcurl on the instance's handle, its
 * answer's body bounded (MAX_BODY) and its status turned into a verdict:
 * OK, RETRY (5xx, 429, throttling, a transport failure) or a hard
 * failure named in the log. Retries back off exponentially with jitter.
 *
 * Thread: the instance's (one thread at a time); libcurl's handle is the
 * instance's.
 */
#include "request.h"

#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "curl_trace.h"
#include "fence.h"

char *s3_env(const char *name)
{
    const char *v = getenv(name);
    return v && *v ? strdup(v) : NULL;
}

static void amz_now(char date[17])
{
    time_t t = time(NULL);
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(date, 17, "%Y%m%dT%H%M%SZ", &tm);
}

void s3_md5_b64(const void *d, size_t n, char out[32])
{
    unsigned char md[16];
    unsigned int len = 0;
    EVP_Digest(d, n, md, &len, EVP_md5(), NULL);
    EVP_EncodeBlock((unsigned char *)out, md, 16);
}

/* S3's form of a CRC32C: base64 of its 4 big-endian bytes. */
void s3_crc32c_b64(uint32_t crc, char out[16])
{
    unsigned char be[4] = {(unsigned char)(crc >> 24),
                           (unsigned char)(crc >> 16),
                           (unsigned char)(crc >> 8), (unsigned char)crc};
    EVP_EncodeBlock((unsigned char *)out, be, 4);
}

/* Whether to send CRC32C checksums: the option, and a host that computes
 * them. */
int s3_checksums(const s3_ctx *c)
{
    return c->checksum && SKIPPR_HOST_HAS(c->host, crc32c) &&
           c->host->crc32c != NULL;
}

/* The one header by which S3 checks the bytes of a body p[0..n) it
 * stores: x-amz-checksum-crc32c when checksums are on (the host's CRC32C
 * runs at memory speed), else Content-MD5. Its value is written into out,
 * which the returned pair points at. */
sigv4_kv s3_body_check(const s3_ctx *c, const void *p, size_t n,
                       char out[32])
{
    if (s3_checksums(c)) {
        s3_crc32c_b64(c->host->crc32c(0, p ? p : "", n), out);
        return (sigv4_kv){"x-amz-checksum-crc32c", out};
    }
    s3_md5_b64(p ? p : "", n, out);
    return (sigv4_kv){"content-md5", out};
}

static size_t on_body(char *p, size_t sz, size_t n, void *ud)
{
    resp *r = ud;
    /* kept NUL-ended: error bodies are read as text (s3_error_code) */
    r->body_rc = skippr_buf_append(&r->body, p, sz * n);
    if (r->body_rc == SKIPPR_OK && !skippr_buf_cstr(&r->body))
        r->body_rc = SKIPPR_NOMEM;
    return r->body_rc == SKIPPR_OK ? sz * n : 0;
}

static void header_value(const char *line, size_t n, const char *name,
                         char *out, size_t cap)
{
    size_t nl = strlen(name);
    if (n <= nl || strncasecmp(line, name, nl) != 0 || line[nl] != ':')
        return;
    const char *v = line + nl + 1;
    const char *e = line + n;
    while (v < e && (*v == ' ' || *v == '"'))
        v++;
    while (e > v && (e[-1] == '\r' || e[-1] == '\n' || e[-1] == ' ' ||
                     e[-1] == '"'))
        e--;
    snprintf(out, cap, "%.*s", (int)(e - v), v);
}

static size_t on_header(char *p, size_t sz, size_t n, void *ud)
{
    resp *r = ud;
    size_t len = sz * n;
    header_value(p, len, "etag", r->etag, sizeof r->etag);
    header_value(p, len, "x-amz-meta-skippr-slice", r->meta_slice,
                 sizeof r->meta_slice);
    header_value(p, len, "x-amz-meta-skippr-crc32c", r->meta_crc,
                 sizeof r->meta_crc);
    header_value(p, len, "x-amz-checksum-crc32c", r->checksum,
                 sizeof r->checksum);
    header_value(p, len, "content-length", r->content_length,
                 sizeof r->content_length);
    header_value(p, len, "content-range", r->content_range,
                 sizeof r->content_range);
    return len;
}

/* Build the URL and signed header list of a request. key NULL addresses
 * the bucket. hdrs are extra headers (signed too). On success the caller
 * owns *list (curl_slist_free_all). Thread-safe: reads c only. */
/* The scheme, host and path of a request for key (NULL: the bucket). */
static void request_target(const s3_ctx *c, const char *key, char *scheme,
                           size_t scap, char *host, size_t hcap, char *path,
                           size_t pcap)
{
    const char *scheme_end = strstr(c->r_endpoint, "://");
    const char *hostpart = scheme_end ? scheme_end + 3 : c->r_endpoint;
    snprintf(scheme, scap, "%.*s",
             scheme_end ? (int)(scheme_end - c->r_endpoint) : 5,
             scheme_end ? c->r_endpoint : "https");
    if (c->path_style) {
        snprintf(host, hcap, "%s", hostpart);
        snprintf(path, pcap, "/%s/%s", c->bucket, key ? key : "");
        if (!key)
            path[strlen(path) - 1] = '\0'; /* "/bucket" */
    } else {
        snprintf(host, hcap, "%s.%s", c->bucket, hostpart);
        snprintf(path, pcap, "/%s", key ? key : "");
    }
    host[strcspn(host, "/")] = '\0';
}

/* The request's URL: scheme, host, the encoded path and query. */
static int request_url(const char *scheme, const char *host,
                       const char *path, const sigv4_kv *query, size_t nq,
                       char *url, size_t url_cap)
{
    char enc[4096];
    if (sigv4_uri_encode(path, 1, enc, sizeof enc) < 0)
        return SKIPPR_FATAL;
    int n = snprintf(url, url_cap, "%s://%s%s", scheme, host, enc);
    for (size_t i = 0; i < nq && n > 0 && (size_t)n < url_cap; i++) {
        char k[512], v[2048];
        sigv4_uri_encode(query[i].key, 0, k, sizeof k);
        sigv4_uri_encode(query[i].value, 0, v, sizeof v);
        n += snprintf(url + n, url_cap - (size_t)n, "%c%s=%s", i ? '&' : '?',
                      k, v);
    }
    return n <= 0 || (size_t)n >= url_cap ? SKIPPR_FATAL : SKIPPR_OK;
}

/* The signed headers sh[1..ns) (sh[0] is Host, which curl sets) and the
 * Authorization into *list. */
static void header_list(const sigv4_kv *sh, size_t ns, const char *auth,
                        struct curl_slist **list)
{
    struct curl_slist *l = NULL;
    char line[S3_TOKEN_MAX + 64];
    for (size_t i = 1; i < ns; i++) {
        snprintf(line, sizeof line, "%s: %s", sh[i].key, sh[i].value);
        l = curl_slist_append(l, line);
    }
    snprintf(line, sizeof line, "Authorization: %s", auth);
    l = curl_slist_append(l, line);
    l = curl_slist_append(l, "Expect:");
    OPENSSL_cleanse(line, sizeof line);
    *list = l;
}

int s3_prepare(const s3_ctx *c, const char *method, const char *key,
               const sigv4_kv *query, size_t nq, const void *body,
               size_t blen, const sigv4_kv *hdrs, size_t nh, char *url,
               size_t url_cap, struct curl_slist **list)
{
    char path[4096], host[512], scheme[16];
    request_target(c, key, scheme, sizeof scheme, host, sizeof host, path,
                   sizeof path);
    int rc = request_url(scheme, host, path, query, nq, url, url_cap);
    if (rc)
        return rc;
    /* A copy of the current credentials: another thread may refresh them
     * meanwhile. Expired and not refreshable now: the caller retries. */
    s3_cred *cred = malloc(sizeof *cred);
    if (!cred)
        return SKIPPR_NOMEM;
    if ((rc = s3_creds_get(c->creds, c->host, cred)) != SKIPPR_OK) {
        free(cred);
        return rc;
    }
    char date[17], payload[65], auth[1024];
    amz_now(date);
    /* Over TLS, as the AWS SDKs do, the body is not hashed into the
     * signature: TLS keeps it intact on the way, and the checksum header
     * each stored body carries (s3_body_check) lets S3 check its bytes.
     * Over plain HTTP the signature covers the body. */
    if (blen && strcmp(scheme, "https") == 0)
        snprintf(payload, sizeof payload, "UNSIGNED-PAYLOAD");
    else
        sigv4_sha256_hex(body ? body : "", blen, payload);
    sigv4_kv sh[24];
    size_t ns = 0;
    sh[ns++] = (sigv4_kv){"host", host};
    sh[ns++] = (sigv4_kv){"x-amz-date", date};
    sh[ns++] = (sigv4_kv){"x-amz-content-sha256", payload};
    if (cred->token[0])
        sh[ns++] = (sigv4_kv){"x-amz-security-token", cred->token};
    for (size_t i = 0; i < nh && ns < 24; i++)
        sh[ns++] = hdrs[i];
    sigv4_request sr = {method, path, query, nq, sh, ns, payload, date,
                        c->r_region, "s3", cred->access_key,
                        cred->secret_key};
    *list = NULL;
    rc = sigv4_authorization(&sr, auth, sizeof auth) != 0 ? SKIPPR_FATAL
                                                          : SKIPPR_OK;
    if (!rc)
        header_list(sh, ns, auth, list);
    OPENSSL_cleanse(auth, sizeof auth);
    s3_cred_wipe(cred);
    free(cred);
    return rc;
}

/* Options shared by every transfer. */
void s3_easy_setup(const s3_ctx *c, CURL *h, const char *url,
                       struct curl_slist *list, resp *r)
{
    curl_easy_reset(h);
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, list);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, r);
    curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(h, CURLOPT_HEADERDATA, r);
    curl_easy_setopt(h, CURLOPT_TIMEOUT, (long)c->timeout_seconds);
    curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT, 15L);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_SSL_VERIFYPEER, c->verify_tls ? 1L : 0L);
    curl_easy_setopt(h, CURLOPT_SSL_VERIFYHOST, c->verify_tls ? 2L : 0L);
    if (c->r_ca)
        curl_easy_setopt(h, CURLOPT_CAINFO, c->r_ca);
    skippr_curl_trace(h, c->host);
}

/* A transport failure: SKIPPR_RETRY when another attempt may succeed;
 * SKIPPR_FATAL, with one error line, when it cannot (the TLS certificate is
 * not trusted, the CA bundle is unreadable, the URL is wrong). */
int s3_transport_failure(s3_ctx *c, CURLcode cc, resp *r)
{
    r->curl_error = curl_easy_strerror(cc);
    if (cc == CURLE_WRITE_ERROR && r->body_rc == SKIPPR_NOMEM)
        return SKIPPR_NOMEM; /* the answer's body did not fit in memory */
    if (cc == CURLE_WRITE_ERROR && r->body_rc == SKIPPR_RANGE) {
        LOG(c, SKIPPR_LOG_ERROR, "an answer from %s was larger than %u "
            "bytes, more than S3 sends", c->r_endpoint, MAX_BODY);
        return SKIPPR_FATAL;
    }
    switch (cc) {
    case CURLE_PEER_FAILED_VERIFICATION:
    case CURLE_SSL_CACERT_BADFILE:
    case CURLE_SSL_CERTPROBLEM:
    case CURLE_SSL_ISSUER_ERROR:
        LOG(c, SKIPPR_LOG_ERROR, "TLS to %s failed: %s; give the CA that "
            "signed its certificate with ca_bundle%s", c->r_endpoint,
            r->curl_error, c->r_ca ? " (the one given does not verify "
            "it)" : "");
        return SKIPPR_FATAL;
    case CURLE_UNSUPPORTED_PROTOCOL:
    case CURLE_URL_MALFORMAT:
        LOG(c, SKIPPR_LOG_ERROR, "endpoint %s: %s", c->r_endpoint,
            r->curl_error);
        return SKIPPR_FATAL;
    default:
        return SKIPPR_RETRY;
    }
}

/* One signed request on the instance's handle (connection reused).
 * Returns SKIPPR_OK with r->status set when the server answered,
 * SKIPPR_RETRY on a transport failure that may pass, SKIPPR_FATAL on one
 * that cannot, SKIPPR_LOCKED for a write of a fenced process (not
 * sent). */
int s3_request(s3_ctx *c, const char *method, const char *key,
                   const sigv4_kv *query, size_t nq, const void *body,
                   size_t blen, const sigv4_kv *hdrs, size_t nh, resp *r)
{
    memset(r, 0, sizeof *r);
    r->body.max = MAX_BODY;
    char url[8192];
    struct curl_slist *list = NULL;
    int rc = s3_prepare(c, method, key, query, nq, body, blen, hdrs, nh, url,
                     sizeof url, &list);
    if (rc)
        return rc;
    CURL *h = c->curl;
    s3_easy_setup(c, h, url, list, r);
    if (strcmp(method, "HEAD") == 0)
        curl_easy_setopt(h, CURLOPT_NOBODY, 1L);
    s3_fenced_body fb;
    s3_fence_request(c->host, h, method, body, blen, &fb);
    CURLcode cc = curl_easy_perform(h);
    curl_slist_free_all(list);
    if (cc == CURLE_ABORTED_BY_CALLBACK && s3_fence_closed(c->host)) {
        if (!c->fenced_told++)
            LOG(c, SKIPPR_LOG_ERROR, "%s s3://%s/%s not made, nor any "
                "write after it: this process's lease lapsed or was taken, "
                "and another process may be writing (fenced)", method,
                c->bucket, key ? key : "");
        return SKIPPR_LOCKED;
    }
    if (cc != CURLE_OK)
        return s3_transport_failure(c, cc, r);
    curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &r->status);
    return SKIPPR_OK;
}

/* A 404 for the bucket, not the key: never an answer a caller expects. */
static int no_bucket(const resp *r)
{
    char code[64];
    if (r->status != 404)
        return 0;
    s3_error_code(&r->body, code, sizeof code);
    return strcmp(code, "NoSuchBucket") == 0;
}

int s3_request_retried(s3_ctx *c, const char *what, const char *name,
                       const long *ok_also, const char *method,
                       const char *key, const sigv4_kv *query, size_t nq,
                       const void *body, size_t blen, const sigv4_kv *hdrs,
                       size_t nh, resp *r)
{
    for (int attempt = 1;; attempt++) {
        int rc = s3_request(c, method, key, query, nq, body, blen, hdrs, nh,
                            r);
        for (const long *s = ok_also; !rc && s && *s; s++)
            if (r->status == *s && !no_bucket(r))
                return SKIPPR_OK;
        rc = s3_verdict(c, rc, r, what, name);
        if (rc != SKIPPR_RETRY)
            return rc;
        if (attempt >= c->max_attempts) {
            s3_give_up(c, what, name, r);
            return SKIPPR_FATAL;
        }
        skippr_buf_free(&r->body);
        s3_backoff(c, attempt);
    }
}

void s3_count_retry(s3_ctx *c, int transport, long status)
{
    const char *cause = transport                          ? "retries_transport"
                        : status == 503 || status == 429 ? "retries_throttled"
                        : status == 408                  ? "retries_timeout"
                                                         : "retries_server";
    c->host->counter_add(c->host, cause, 1);
}

/* Answers about the bucket or the identity, not one key: every request of
 * the run gets the same, so the first is said with what to do, and the
 * rest at debug level. */
static const struct refusal {
    const char *code, *hint;
} refusals[] = {
    {"NoSuchBucket", "the bucket does not exist (or not at this endpoint "
                     "and region): create it, or fix s3_bucket"},
    {"AccessDenied", "the identity may not do this here: grant it "
                     "s3:ListBucket, s3:GetObject, s3:PutObject and "
                     "s3:DeleteObject on this bucket and prefix, or use "
                     "other credentials"},
    {"InvalidAccessKeyId", "the endpoint does not know this access key: "
                           "fix the credentials"},
    {"SignatureDoesNotMatch", "the secret key does not belong to the "
                              "access key: fix the credentials"},
    {"AllAccessDisabled", "all access to the bucket is disabled"},
    {"InvalidBucketName", "fix s3_bucket"},
    {"PermanentRedirect", "the bucket is in another region: set region"},
};
#define N_REFUSALS (sizeof refusals / sizeof refusals[0])

/* The refusal of code, or NULL. */
static const struct refusal *refusal_of(const char *code)
{
    for (size_t i = 0; i < N_REFUSALS; i++)
        if (strcmp(refusals[i].code, code) == 0)
            return &refusals[i];
    return NULL;
}

/* Non-zero the first time cause `what` (a refusal's index, or N_REFUSALS
 * for giving up) is seen for c's bucket and prefix in the process: the
 * sink's instances (one per upload thread) share it, the source, the sink
 * and the state store each have their own. */
static int first_told(const s3_ctx *c, size_t what)
{
    static uint64_t told[32];
    uint64_t h = 1469598103934665603u ^ (uint64_t)what;
    for (const char *p = c->bucket; *p; p++)
        h = (h ^ (uint8_t)*p) * 1099511628211u;
    h = (h ^ '/') * 1099511628211u;
    for (const char *p = c->prefix ? c->prefix : ""; *p; p++)
        h = (h ^ (uint8_t)*p) * 1099511628211u;
    h |= 1; /* 0 marks a free slot */
    for (size_t i = 0; i < sizeof told / sizeof *told; i++) {
        uint64_t was = 0;
        if (__atomic_compare_exchange_n(&told[i], &was, h, 0,
                                        __ATOMIC_RELAXED, __ATOMIC_RELAXED))
            return 1;
        if (was == h)
            return 0;
    }
    return 1; /* table full: say it */
}

/* Non-zero at most once per window_ns across the process's threads: many
 * requests retrying one cause say it once per retry cycle. */
static int say_now(int64_t *last, int64_t window_ns)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    int64_t now = (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
    int64_t was = __atomic_load_n(last, __ATOMIC_RELAXED);
    return (was == 0 || now - was >= window_ns) &&
           __atomic_compare_exchange_n(last, &was, now, 0, __ATOMIC_RELAXED,
                                       __ATOMIC_RELAXED);
}

/* A retrying request's cause, said at most this often for the process
 * (the engine says each retry cycle; this says why). */
#define RETRY_SAY_NS (5 * INT64_C(1000000000))
static int64_t last_retry_said;

/* Classify an answer: 2xx OK, 5xx and transport failures RETRY (a warning
 * at most once in RETRY_SAY_NS for the process), the rest FATAL (an error line
 * with bucket and key; a refusal of the bucket or identity once). */
int s3_verdict(s3_ctx *c, int rc, resp *r, const char *what,
                   const char *key)
{
    if (rc == SKIPPR_RETRY) {
        LOG(c, say_now(&last_retry_said, RETRY_SAY_NS) ? SKIPPR_LOG_WARN
                                                     : SKIPPR_LOG_DEBUG,
            "%s s3://%s/%s: %s (retrying)", what, c->bucket, key ? key : "",
            r->curl_error ? r->curl_error : "failed");
        s3_count_retry(c, 1, 0);
        return SKIPPR_RETRY;
    }
    if (rc)
        return rc;
    if (r->status >= 200 && r->status < 300)
        return SKIPPR_OK;
    char code[128];
    s3_error_code(&r->body, code, sizeof code);
    if (!*code && r->status == 404 && !key)
        snprintf(code, sizeof code, "NoSuchBucket"); /* a HEAD has no body */
    int retry = r->status >= 500 || r->status == 429 || r->status == 408;
    const struct refusal *why = retry ? NULL : refusal_of(code);
    if (why) {
        LOG(c, first_told(c, (size_t)(why - refusals))
                   ? SKIPPR_LOG_ERROR
                                          : SKIPPR_LOG_DEBUG,
            "s3://%s/%s: %s refused: HTTP %ld %s: %s", c->bucket,
            c->prefix ? c->prefix : "", what, r->status, code, why->hint);
        return SKIPPR_FATAL;
    }
    LOG(c, retry ? (say_now(&last_retry_said, RETRY_SAY_NS) ? SKIPPR_LOG_WARN
                                                          : SKIPPR_LOG_DEBUG)
                 : SKIPPR_LOG_ERROR,
        "%s s3://%s/%s: HTTP %ld %s%s", what, c->bucket, key ? key : "",
        r->status, *code ? code : "", retry ? " (retrying)" : "");
    if (retry)
        s3_count_retry(c, 0, r->status);
    return retry ? SKIPPR_RETRY : SKIPPR_FATAL;
}

/* The one error line of a request that kept failing: what, where, and
 * the last cause (transport error or HTTP status). The requests of one
 * bucket and prefix that give up say it once: the run stops at the
 * first. */
void s3_give_up(s3_ctx *c, const char *what, const char *key,
                    const resp *r)
{
    char cause[160];
    if (r->curl_error)
        snprintf(cause, sizeof cause, "%s", r->curl_error);
    else
        snprintf(cause, sizeof cause, "HTTP %ld", r->status);
    LOG(c, first_told(c, N_REFUSALS) ? SKIPPR_LOG_ERROR
                                              : SKIPPR_LOG_DEBUG,
        "%s s3://%s/%s: giving up after %lld attempts; last: %s (endpoint "
        "%s)", what, c->bucket, key ? key : "", (long long)c->max_attempts,
        cause, c->r_endpoint);
}

/* Wait before retry number attempt of c's thread: 100 ms doubling to
 * 6.4 s, jittered (backoff.h). */
void s3_backoff(s3_ctx *c, int attempt)
{
    skippr_backoff_sleep(&c->backoff, attempt);
}
