/* The S3 plugin: a bucket prefix as a source and as a sink.
 *
 * Source. Units are the objects under s3_prefix (ListObjectsV2 with
 * continuation tokens, optional start_after), in S3's UTF-8 byte order; a
 * unit is key + ETag + size. A unit is read with ranged GETs of
 * read_chunk_bytes each, carrying If-Match with the listed ETag, so memory is
 * bounded, a resumed unit starts at its offset, and an object that changes
 * while it is read is an error rather than a mix of two versions. Failed
 * requests are retried with backoff from the byte where they stopped.
 *
 * Sink. An object smaller than part_size is one PutObject; a larger one is a
 * multipart upload with part_size parts. Every request carries Content-MD5
 * and x-amz-content-sha256, and (checksum_crc32c) x-amz-checksum-crc32c:
 * the object's on PutObject and on CompleteMultipartUpload (checksum type
 * FULL_OBJECT), each part's on UploadPart, so S3 verifies the bytes end to
 * end and GetObjectAttributes returns the CRC. The object's metadata holds
 * the slice id and the CRC32C, which object_check compares (HEAD) during
 * recovery. Before a
 * multipart upload starts, earlier unfinished uploads of the same key (left
 * by a crash) are aborted. A CompleteMultipartUpload that answers 200 with
 * an <Error> body is a failure. A failed part is sent again in place, and
 * a Complete the server refused (5xx, or 200 with an error) again, up to
 * SINK_TRIES times each, before the engine writes the whole object again. The PUT or Complete carries If-None-Match: *
 * (unless object_check found other content that the engine replaces), so a
 * retry after a lost answer gets 412; a HEAD then tells our own slice (done)
 * from someone else's (a fatal conflict).
 *
 * Credentials: the AWS SDKs' default chain (creds.h): options,
 * environment, the shared files' profile (static keys, role_arn with
 * source_profile, credential_process), web identity, ECS container
 * credentials, EC2 instance metadata; temporary ones are refreshed before
 * they expire. Region: option, AWS_REGION,
 * AWS_DEFAULT_REGION, the config file, us-east-1. Endpoint: option,
 * AWS_ENDPOINT_URL_S3, AWS_ENDPOINT_URL, else AWS. CA bundle: option,
 * AWS_CA_BUNDLE, else the system's. Secrets, the session
 * token and the Authorization header are never logged.
 *
 * Threads: one instance is used by one thread at a time.
 */
#include <ctype.h>
#include <curl/curl.h>
#include <pthread.h>
#include <errno.h>
#include <libxml/parser.h>
#include <libxml/tree.h>
#include <libxml/xmlreader.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <skippr/plugin.h>

#include "creds.h"
#include "curl_trace.h"
#include "sigv4.h"

#define MAX_BODY (16u << 20) /* bound on any buffered response body */

typedef struct s3_ctx {
    const skippr_host *host;
    /* options */
    const char *bucket, *prefix, *start_after, *region, *endpoint;
    const char *access_key_id, *secret_access_key, *session_token, *profile;
    const char *addressing, *ca_bundle, *storage_class, *sse;
    int verify_tls, checksum;
    int64_t part_size, read_chunk_bytes, max_attempts, timeout_seconds;
    /* resolved at init */
    char *r_region, *r_endpoint;
    s3_creds *creds; /* the credential chain's pick; refreshes itself */
    char *r_ca; /* ca_bundle, else AWS_CA_BUNDLE; NULL: the system's */
    int path_style;
    CURL *curl;
    /* source: listing handles, kept so that connections are reused across
     * listings and polls (list_concurrency of them, made on first use) */
    CURLM *lmulti;
    CURL **leasy;
    /* source: fetching ahead on an I/O thread */
    int64_t concurrency, prefetch_bytes, list_concurrency;
    struct prefetcher *pf;
    /* sink: conditional writes */
    int conditional;  /* option; cleared if the server refuses it */
    char *replace_key; /* object_check found other content here: replace */
} s3_ctx;

#define LOG(c, lvl, ...) (c)->host->log((c)->host, (lvl), __VA_ARGS__)
#define OPT(name, type, def, req, field, doc)                                  \
    {name, type, def, req, offsetof(s3_ctx, field), doc}

#define COMMON_OPTIONS                                                         \
    OPT("s3_bucket", SKIPPR_OPT_STRING, NULL, 1, bucket, "Bucket name."),      \
    OPT("s3_prefix", SKIPPR_OPT_STRING, "", 0, prefix,                          \
        "Key prefix (no leading '/')."),                                       \
    OPT("region", SKIPPR_OPT_STRING, NULL, 0, region,                           \
        "Region; default from AWS_REGION, AWS_DEFAULT_REGION, the config "     \
        "file, else us-east-1."),                                              \
    OPT("endpoint", SKIPPR_OPT_STRING, NULL, 0, endpoint,                       \
        "Endpoint URL, e.g. http://127.0.0.1:9000; default from "              \
        "AWS_ENDPOINT_URL_S3 or AWS_ENDPOINT_URL, else AWS."),                 \
    OPT("access_key_id", SKIPPR_OPT_SECRET, NULL, 0, access_key_id,             \
        "Access key; default from the AWS credential chain (environment, "   \
        "profile, web identity, container, instance metadata)."),     \
    OPT("secret_access_key", SKIPPR_OPT_SECRET, NULL, 0, secret_access_key,     \
        "Secret key; never logged."),                                          \
    OPT("session_token", SKIPPR_OPT_SECRET, NULL, 0, session_token,             \
        "Session token for temporary credentials; never logged."),            \
    OPT("profile", SKIPPR_OPT_STRING, NULL, 0, profile,                         \
        "Profile in the shared credentials and config files; default "         \
        "AWS_PROFILE, else 'default'."),                                       \
    OPT("addressing", SKIPPR_OPT_STRING, "auto", 0, addressing,                 \
        "path, virtual, or auto (path with a custom endpoint, virtual on "     \
        "AWS)."),                                                              \
    OPT("verify_tls", SKIPPR_OPT_BOOL, "true", 0, verify_tls,                   \
        "Verify the server's TLS certificate."),                               \
    OPT("ca_bundle", SKIPPR_OPT_STRING, NULL, 0, ca_bundle,                     \
        "CA bundle file for TLS verification; default AWS_CA_BUNDLE, else "    \
        "the system's."),                              \
    OPT("max_attempts", SKIPPR_OPT_INT, "8", 0, max_attempts,                   \
        "Attempts per request before giving up (source side)."),               \
    OPT("timeout_seconds", SKIPPR_OPT_INT, "120", 0, timeout_seconds,           \
        "Timeout of one request.")

static const skippr_option source_options[] = {
    COMMON_OPTIONS,
    OPT("start_after", SKIPPR_OPT_STRING, NULL, 0, start_after,
        "List only keys after this one."),
    OPT("read_chunk_bytes", SKIPPR_OPT_INT, "8MiB", 0, read_chunk_bytes,
        "Bytes per ranged GET."),
    OPT("concurrency", SKIPPR_OPT_INT, "64", 0, concurrency,
        "GETs in flight at once while fetching ahead (1 to 4096)."),
    OPT("prefetch_bytes", SKIPPR_OPT_INT, "0", 0, prefetch_bytes,
        "Memory for objects fetched ahead; more waits (backpressure). 0: "
        "half the pipeline's memory_budget."),
    OPT("list_concurrency", SKIPPR_OPT_INT, "32", 0, list_concurrency,
        "Sub-prefixes (found with Delimiter '/') listed at once, each "
        "holding at most a page of keys ahead; 1 lists one page after "
        "another."),
    {NULL, 0, NULL, 0, 0, NULL}};

static const skippr_option sink_options[] = {
    COMMON_OPTIONS,
    OPT("part_size", SKIPPR_OPT_INT, "8MiB", 0, part_size,
        "Multipart part size (5 MiB to 5 GiB); smaller objects are one PUT."),
    OPT("storage_class", SKIPPR_OPT_STRING, NULL, 0, storage_class,
        "x-amz-storage-class of written objects."),
    OPT("server_side_encryption", SKIPPR_OPT_STRING, NULL, 0, sse,
        "x-amz-server-side-encryption of written objects (AES256, aws:kms)."),
    OPT("checksum_crc32c", SKIPPR_OPT_BOOL, "true", 0, checksum,
        "Send x-amz-checksum-crc32c (the object's on a PUT and on Complete, "
        "each part's on UploadPart) so S3 verifies what arrives and "
        "GetObjectAttributes returns it; false for servers that refuse "
        "the headers."),
    OPT("conditional_writes", SKIPPR_OPT_BOOL, "true", 0, conditional,
        "Send If-None-Match: * so a retried write never replaces an object "
        "(one that answered 412 is compared by HEAD)."),
    {NULL, 0, NULL, 0, 0, NULL}};

/* ---- small helpers -------------------------------------------------------- */

typedef struct buf {
    char *p;
    size_t n, cap, max;
} buf;

static int buf_put(buf *b, const void *d, size_t n)
{
    if (n > b->max - b->n)
        return -1;
    if (b->n + n + 1 > b->cap) {
        size_t nc = b->cap ? b->cap : 4096;
        while (nc < b->n + n + 1)
            nc *= 2;
        char *q = realloc(b->p, nc);
        if (!q)
            return -1;
        b->p = q;
        b->cap = nc;
    }
    memcpy(b->p + b->n, d, n);
    b->n += n;
    b->p[b->n] = '\0';
    return 0;
}

static void buf_free(buf *b)
{
    free(b->p);
    memset(b, 0, sizeof *b);
}


static char *env(const char *name)
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

static void md5_b64(const void *d, size_t n, char out[32])
{
    unsigned char md[16];
    unsigned int len = 0;
    EVP_Digest(d, n, md, &len, EVP_md5(), NULL);
    EVP_EncodeBlock((unsigned char *)out, md, 16);
}

/* ---- requests ------------------------------------------------------------ */

typedef struct resp {
    long status;
    buf body;
    char etag[128];
    char meta_slice[128];
    char meta_crc[32];
    char content_range[128];
    const char *curl_error; /* transport failure, static */
} resp;

static size_t on_body(char *p, size_t sz, size_t n, void *ud)
{
    resp *r = ud;
    return buf_put(&r->body, p, sz * n) == 0 ? sz * n : 0;
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
    header_value(p, len, "content-range", r->content_range,
                 sizeof r->content_range);
    return len;
}

/* Build the URL and signed header list of a request. key NULL addresses
 * the bucket. hdrs are extra headers (signed too). On success the caller
 * owns *list (curl_slist_free_all). Thread-safe: reads c only. */
static int prepare(const s3_ctx *c, const char *method, const char *key,
                   const sigv4_kv *query, size_t nq, const void *body,
                   size_t blen, const sigv4_kv *hdrs, size_t nh, char *url,
                   size_t url_cap, struct curl_slist **list)
{
    char path[4096], host[512], enc[4096];
    const char *scheme_end = strstr(c->r_endpoint, "://");
    const char *hostpart = scheme_end ? scheme_end + 3 : c->r_endpoint;
    char scheme[16];
    snprintf(scheme, sizeof scheme, "%.*s",
             scheme_end ? (int)(scheme_end - c->r_endpoint) : 5,
             scheme_end ? c->r_endpoint : "https");
    if (c->path_style) {
        snprintf(host, sizeof host, "%s", hostpart);
        snprintf(path, sizeof path, "/%s/%s", c->bucket, key ? key : "");
        if (!key)
            path[strlen(path) - 1] = '\0'; /* "/bucket" */
    } else {
        snprintf(host, sizeof host, "%s.%s", c->bucket, hostpart);
        snprintf(path, sizeof path, "/%s", key ? key : "");
    }
    host[strcspn(host, "/")] = '\0';
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
    if (n <= 0 || (size_t)n >= url_cap)
        return SKIPPR_FATAL;

    /* A copy of the current credentials: another thread may refresh them
     * meanwhile. Expired and not refreshable now: the caller retries. */
    s3_cred *cred = malloc(sizeof *cred);
    if (!cred)
        return SKIPPR_NOMEM;
    int crc = s3_creds_get(c->creds, c->host, cred);
    if (crc != SKIPPR_OK) {
        free(cred);
        return crc;
    }
    char date[17], payload[65], auth[1024];
    amz_now(date);
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
    int rc = sigv4_authorization(&sr, auth, sizeof auth) != 0 ? SKIPPR_FATAL
                                                              : SKIPPR_OK;
    struct curl_slist *l = NULL;
    char line[S3_TOKEN_MAX + 64];
    for (size_t i = 1; rc == SKIPPR_OK && i < ns; i++) {
        /* curl sets Host itself */
        snprintf(line, sizeof line, "%s: %s", sh[i].key, sh[i].value);
        l = curl_slist_append(l, line);
    }
    if (rc == SKIPPR_OK) {
        snprintf(line, sizeof line, "Authorization: %s", auth);
        l = curl_slist_append(l, line);
        l = curl_slist_append(l, "Expect:");
    }
    OPENSSL_cleanse(auth, sizeof auth);
    OPENSSL_cleanse(line, sizeof line);
    s3_cred_wipe(cred);
    free(cred);
    *list = l;
    return rc;
}

/* Options shared by every transfer. */
static void easy_setup(const s3_ctx *c, CURL *h, const char *url,
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
static int transport_failure(s3_ctx *c, CURLcode cc, resp *r)
{
    r->curl_error = curl_easy_strerror(cc);
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
 * that cannot. */
static int request(s3_ctx *c, const char *method, const char *key,
                   const sigv4_kv *query, size_t nq, const void *body,
                   size_t blen, const sigv4_kv *hdrs, size_t nh, resp *r)
{
    memset(r, 0, sizeof *r);
    r->body.max = MAX_BODY;
    char url[8192];
    struct curl_slist *list = NULL;
    int rc = prepare(c, method, key, query, nq, body, blen, hdrs, nh, url,
                     sizeof url, &list);
    if (rc)
        return rc;
    CURL *h = c->curl;
    easy_setup(c, h, url, list, r);
    if (strcmp(method, "HEAD") == 0) {
        curl_easy_setopt(h, CURLOPT_NOBODY, 1L);
    } else if (strcmp(method, "GET") != 0) {
        curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, method);
        if (body || strcmp(method, "PUT") == 0 || strcmp(method, "POST") == 0) {
            curl_easy_setopt(h, CURLOPT_POSTFIELDS, body ? body : "");
            curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE,
                             (curl_off_t)blen);
        }
    }
    CURLcode cc = curl_easy_perform(h);
    curl_slist_free_all(list);
    if (cc != CURLE_OK)
        return transport_failure(c, cc, r);
    curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &r->status);
    return SKIPPR_OK;
}

/* The <Code> of an S3 error body, or "". */
static void error_code(const buf *b, char *out, size_t cap)
{
    out[0] = '\0';
    const char *s = b->p ? strstr(b->p, "<Code>") : NULL;
    if (!s)
        return;
    s += 6;
    const char *e = strstr(s, "</Code>");
    if (e)
        snprintf(out, cap, "%.*s", (int)(e - s), s);
}

/* Classify an answer: 2xx OK, 5xx and transport failures RETRY, the rest
 * FATAL (logged with bucket and key). */
static int verdict(s3_ctx *c, int rc, resp *r, const char *what,
                   const char *key)
{
    if (rc == SKIPPR_RETRY) {
        LOG(c, SKIPPR_LOG_WARN, "%s s3://%s/%s: %s", what, c->bucket,
            key ? key : "", r->curl_error ? r->curl_error : "failed");
        return SKIPPR_RETRY;
    }
    if (rc)
        return rc;
    if (r->status >= 200 && r->status < 300)
        return SKIPPR_OK;
    char code[128];
    error_code(&r->body, code, sizeof code);
    int retry = r->status >= 500 || r->status == 429 || r->status == 408;
    LOG(c, retry ? SKIPPR_LOG_WARN : SKIPPR_LOG_ERROR,
        "%s s3://%s/%s: HTTP %ld %s", what, c->bucket, key ? key : "",
        r->status, *code ? code : "");
    return retry ? SKIPPR_RETRY : SKIPPR_FATAL;
}

/* The one error line of a request that kept failing: what, where, and
 * the last cause (transport error or HTTP status). */
static void give_up(s3_ctx *c, const char *what, const char *key,
                    const resp *r)
{
    char cause[160];
    if (r->curl_error)
        snprintf(cause, sizeof cause, "%s", r->curl_error);
    else
        snprintf(cause, sizeof cause, "HTTP %ld", r->status);
    LOG(c, SKIPPR_LOG_ERROR, "%s s3://%s/%s: giving up after %lld attempts; "
        "last: %s (endpoint %s)", what, c->bucket, key ? key : "",
        (long long)c->max_attempts, cause, c->r_endpoint);
}

/* Milliseconds to wait before retry number `attempt`: exponential from
 * 100 ms up to 6.4 s, the upper half jittered. */
static long backoff_ms(int attempt)
{
    long ms = 100L << (attempt < 6 ? attempt : 6);
    return ms / 2 + rand() % (ms / 2 + 1);
}

static void backoff(int attempt)
{
    long ms = backoff_ms(attempt);
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* ---- init ------------------------------------------------------------------ */

static int init(void *ctx, const skippr_host *host)
{
    s3_ctx *c = ctx;
    c->host = host;
    curl_global_init(CURL_GLOBAL_DEFAULT);
    xmlInitParser();
    char *profile = c->profile ? strdup(c->profile) : env("AWS_PROFILE");
    if (!profile)
        profile = strdup("default");
    if (!profile)
        return SKIPPR_NOMEM;
    char cfg_file[1024], section[300];
    s3_aws_file("AWS_CONFIG_FILE", "config", cfg_file, sizeof cfg_file);
    c->r_region = c->region ? strdup(c->region) : env("AWS_REGION");
    if (!c->r_region)
        c->r_region = env("AWS_DEFAULT_REGION");
    if (!c->r_region) {
        snprintf(section, sizeof section, "%s%s",
                 strcmp(profile, "default") ? "profile " : "", profile);
        c->r_region = s3_ini_get(cfg_file, section, "region");
    }
    if (!c->r_region)
        c->r_region = strdup("us-east-1");
    c->r_endpoint = c->endpoint ? strdup(c->endpoint)
                                : env("AWS_ENDPOINT_URL_S3");
    if (!c->r_endpoint)
        c->r_endpoint = env("AWS_ENDPOINT_URL");
    int custom = c->r_endpoint != NULL;
    if (!c->r_endpoint) {
        char e[256];
        snprintf(e, sizeof e, "https://s3.%s.amazonaws.com", c->r_region);
        c->r_endpoint = strdup(e);
    }
    c->r_ca = c->ca_bundle ? strdup(c->ca_bundle) : env("AWS_CA_BUNDLE");
    if (c->ca_bundle && !c->r_ca) {
        free(profile);
        return SKIPPR_NOMEM;
    }
    size_t el = strlen(c->r_endpoint);
    while (el && c->r_endpoint[el - 1] == '/')
        c->r_endpoint[--el] = '\0';
    free(profile);
    if (!c->r_region || !c->r_endpoint)
        return SKIPPR_NOMEM;
    if (strcmp(c->addressing, "path") == 0)
        c->path_style = 1;
    else if (strcmp(c->addressing, "virtual") == 0)
        c->path_style = 0;
    else if (strcmp(c->addressing, "auto") == 0)
        c->path_style = custom;
    else {
        LOG(c, SKIPPR_LOG_ERROR, "addressing must be auto, path or virtual");
        return SKIPPR_INVAL;
    }
    if (c->prefix && c->prefix[0] == '/') {
        LOG(c, SKIPPR_LOG_ERROR, "s3_prefix must not start with '/'");
        return SKIPPR_INVAL;
    }
    if (c->part_size && (c->part_size < (5 << 20) ||
                         c->part_size > (5LL << 30))) {
        LOG(c, SKIPPR_LOG_ERROR, "part_size must be 5 MiB to 5 GiB");
        return SKIPPR_INVAL;
    }
    if (c->read_chunk_bytes && c->read_chunk_bytes < 4096)
        c->read_chunk_bytes = 4096;
    if (c->max_attempts < 1)
        c->max_attempts = 1;
    if (c->concurrency == 0)
        c->concurrency = 64; /* sinks do not declare the option */
    if (c->concurrency < 1 || c->concurrency > 4096) {
        LOG(c, SKIPPR_LOG_ERROR, "concurrency must be 1 to 4096");
        return SKIPPR_INVAL;
    }
    if (c->list_concurrency == 0)
        c->list_concurrency = 32; /* sinks do not declare the option */
    if (c->list_concurrency < 1 || c->list_concurrency > 1024) {
        LOG(c, SKIPPR_LOG_ERROR, "list_concurrency must be 1 to 1024");
        return SKIPPR_INVAL;
    }
    if (c->prefetch_bytes == 0)
        c->prefetch_bytes = SKIPPR_HOST_HAS(host, memory_budget) &&
                                    host->memory_budget > 0
                                ? host->memory_budget / 2
                                : 256LL << 20;
    if (c->prefetch_bytes < (1 << 20))
        c->prefetch_bytes = 1 << 20;
    c->curl = curl_easy_init();
    if (!c->curl)
        return SKIPPR_NOMEM;
    s3_creds_config cc = {host, c->access_key_id, c->secret_access_key,
                          c->session_token, c->profile, c->r_region,
                          c->r_ca, c->verify_tls};
    c->creds = s3_creds_new(&cc);
    if (!c->creds)
        return SKIPPR_INVAL; /* logged */
    LOG(c, SKIPPR_LOG_DEBUG, "s3://%s/%s via %s (%s-style, region %s)",
        c->bucket, c->prefix, c->r_endpoint,
        c->path_style ? "path" : "virtual", c->r_region);
    return SKIPPR_OK;
}

static void pf_stop(s3_ctx *c);

static void destroy(void *ctx)
{
    s3_ctx *c = ctx;
    pf_stop(c);
    if (c->curl)
        curl_easy_cleanup(c->curl);
    for (int64_t i = 0; c->leasy && i < c->list_concurrency; i++)
        if (c->leasy[i])
            curl_easy_cleanup(c->leasy[i]);
    free(c->leasy);
    if (c->lmulti)
        curl_multi_cleanup(c->lmulti);
    free(c->replace_key);
    free(c->r_ca);
    free(c->r_region);
    free(c->r_endpoint);
    s3_creds_free(c->creds);
}

/* ---- fetching ahead --------------------------------------------------------
 *
 * prefetch() queues the units the engine will open next. One I/O thread
 * drives a curl multi handle: it keeps up to `concurrency` GETs in flight,
 * each for the first chunk of one object, as long as the chunks started but
 * not yet consumed fit in `prefetch_bytes` (beyond that it waits: that is
 * the backpressure). open() takes a unit's fetched chunk; the rest of a
 * large object is read with ranged GETs as before. Only the I/O thread
 * touches the multi and easy handles; items move between threads under
 * the mutex.
 */
typedef struct pf_item {
    char *key, *etag;
    int64_t size, len; /* object size; bytes asked for */
    resp r;
    int attempts;
    int state;     /* 0 queued, 1 in flight, 2 finished */
    int abandoned; /* closed before it finished: the thread frees it */
    int taken;     /* opened: out of the queue, never restarted */
    int64_t retry_at; /* monotonic ms before which it is not restarted */
    int ok;        /* finished with the wanted bytes */
    CURL *easy;
    struct curl_slist *hdrs;
    char *url;
    struct pf_item *next;
} pf_item;

typedef struct prefetcher {
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    CURLM *multi;
    pf_item *head, *tail; /* not yet opened, in open order */
    int running;
    int64_t reserved; /* bytes of started, not yet consumed items */
    int stop;
    int max_inflight;
} prefetcher;

static void item_free(pf_item *it)
{
    if (!it)
        return;
    buf_free(&it->r.body);
    curl_slist_free_all(it->hdrs);
    free(it->url);
    free(it->key);
    free(it->etag);
    free(it);
}

/* Start one transfer; called by the I/O thread with the lock held. */
static void pf_start(s3_ctx *c, prefetcher *pf, pf_item *it)
{
    char url[8192], range[64], ifm[300];
    snprintf(range, sizeof range, "bytes=0-%lld", (long long)it->len - 1);
    snprintf(ifm, sizeof ifm, "\"%s\"", it->etag);
    sigv4_kv h[2] = {{"range", range}, {"if-match", ifm}};
    curl_slist_free_all(it->hdrs);
    it->hdrs = NULL;
    buf_free(&it->r.body);
    memset(&it->r, 0, sizeof it->r);
    it->r.body.max = (size_t)it->len;
    if (prepare(c, "GET", it->key, NULL, 0, NULL, 0, h, *it->etag ? 2 : 1,
                url, sizeof url, &it->hdrs) != SKIPPR_OK ||
        !(it->easy = it->easy ? it->easy : curl_easy_init())) {
        it->state = 2;
        it->ok = 0;
        return;
    }
    easy_setup(c, it->easy, url, it->hdrs, &it->r);
    curl_easy_setopt(it->easy, CURLOPT_PRIVATE, it);
    curl_multi_add_handle(pf->multi, it->easy);
    it->state = 1;
    it->attempts++;
    pf->running++;
    if (pf->running > pf->max_inflight)
        pf->max_inflight = pf->running;
}

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void *pf_main(void *arg)
{
    s3_ctx *c = arg;
    prefetcher *pf = c->pf;
    pthread_mutex_lock(&pf->mu);
    while (!pf->stop) {
        /* Start, in open order, what the bounds allow. */
        int64_t now = now_ms();
        for (pf_item *it = pf->head; it && pf->running < c->concurrency;
             it = it->next) {
            if (it->state != 0 || it->retry_at > now)
                continue;
            if (pf->reserved > 0 && pf->reserved + it->len > c->prefetch_bytes)
                break; /* backpressure: wait for the engine to consume */
            pf->reserved += it->len;
            pf_start(c, pf, it);
        }
        if (pf->running == 0) {
            struct timespec ts;
            clock_gettime(CLOCK_REALTIME, &ts);
            ts.tv_nsec += 50000000L;
            if (ts.tv_nsec >= 1000000000L) {
                ts.tv_sec++;
                ts.tv_nsec -= 1000000000L;
            }
            pthread_cond_timedwait(&pf->cv, &pf->mu, &ts);
            continue;
        }
        pthread_mutex_unlock(&pf->mu);
        int still = 0;
        curl_multi_perform(pf->multi, &still);
        curl_multi_poll(pf->multi, NULL, 0, 20, NULL);
        curl_multi_perform(pf->multi, &still);
        pthread_mutex_lock(&pf->mu);
        CURLMsg *m;
        int left;
        while ((m = curl_multi_info_read(pf->multi, &left))) {
            if (m->msg != CURLMSG_DONE)
                continue;
            pf_item *it = NULL;
            curl_easy_getinfo(m->easy_handle, CURLINFO_PRIVATE, (char **)&it);
            CURLcode cc = m->data.result;
            curl_multi_remove_handle(pf->multi, it->easy);
            pf->running--;
            curl_easy_getinfo(it->easy, CURLINFO_RESPONSE_CODE, &it->r.status);
            it->ok = cc == CURLE_OK && it->r.status / 100 == 2 &&
                     (int64_t)it->r.body.n == it->len;
            int transient = cc != CURLE_OK || it->r.status >= 500 ||
                            it->r.status == 429 ||
                            (it->r.status / 100 == 2 && !it->ok);
            if (it->abandoned) {
                pf->reserved -= it->len;
                curl_easy_cleanup(it->easy);
                it->easy = NULL;
                item_free(it);
            } else if (!it->ok && transient && !it->taken &&
                       it->attempts < c->max_attempts) {
                /* Queue it again, after a backoff with jitter. */
                it->retry_at = now_ms() + backoff_ms(it->attempts);
                it->state = 0;
                pf->reserved -= it->len;
            } else {
                it->state = 2; /* done, or given up: open() falls back */
            }
        }
        pthread_cond_broadcast(&pf->cv);
    }
    pthread_mutex_unlock(&pf->mu);
    return NULL;
}

static int src_prefetch(void *ctx, const skippr_unit *units, size_t n)
{
    s3_ctx *c = ctx;
    if (!c->pf) {
        prefetcher *pf = calloc(1, sizeof *pf);
        if (!pf || !(pf->multi = curl_multi_init())) {
            free(pf);
            return SKIPPR_NOMEM;
        }
        /* Keep as many idle connections as may be in use: curl's default
         * cache shrinks with the handles in flight, and each batch would
         * otherwise open its connections anew. */
        curl_multi_setopt(pf->multi, CURLMOPT_MAX_HOST_CONNECTIONS,
                          (long)c->concurrency);
        curl_multi_setopt(pf->multi, CURLMOPT_MAXCONNECTS,
                          (long)c->concurrency);
        pthread_mutex_init(&pf->mu, NULL);
        pthread_cond_init(&pf->cv, NULL);
        c->pf = pf;
        if (pthread_create(&pf->thread, NULL, pf_main, c) != 0) {
            curl_multi_cleanup(pf->multi);
            pthread_mutex_destroy(&pf->mu);
            pthread_cond_destroy(&pf->cv);
            free(pf);
            c->pf = NULL;
            return SKIPPR_NOMEM;
        }
    }
    prefetcher *pf = c->pf;
    int64_t chunk = c->prefetch_bytes / c->concurrency;
    if (chunk > c->read_chunk_bytes)
        chunk = c->read_chunk_bytes;
    if (chunk < 65536)
        chunk = 65536;
    pthread_mutex_lock(&pf->mu);
    for (size_t i = 0; i < n; i++) {
        if (units[i].size <= 0)
            continue; /* nothing to fetch */
        pf_item *it = calloc(1, sizeof *it);
        if (!it || !(it->key = strdup(units[i].id)) ||
            !(it->etag = strdup(units[i].version ? units[i].version : ""))) {
            item_free(it);
            break;
        }
        it->size = units[i].size;
        it->len = it->size < chunk ? it->size : chunk;
        if (pf->tail)
            pf->tail->next = it;
        else
            pf->head = it;
        pf->tail = it;
    }
    pthread_cond_broadcast(&pf->cv);
    pthread_mutex_unlock(&pf->mu);
    return SKIPPR_OK;
}

/* Drop one item no longer wanted; lock held. */
static void pf_drop_locked(prefetcher *pf, pf_item *it)
{
    if (it->state == 1) {
        it->abandoned = 1; /* the I/O thread frees it when it finishes */
        return;
    }
    if (it->state == 2)
        pf->reserved -= it->len;
    if (it->easy)
        curl_easy_cleanup(it->easy);
    item_free(it);
}

/* Take the fetched-ahead item for key out of the queue (NULL if none).
 * Items queued before it were skipped by the engine: they are dropped, so
 * they cannot hold the memory budget. */
static pf_item *pf_take(s3_ctx *c, const char *key)
{
    prefetcher *pf = c->pf;
    if (!pf)
        return NULL;
    pthread_mutex_lock(&pf->mu);
    pf_item *it = pf->head;
    while (it && strcmp(it->key, key) != 0)
        it = it->next;
    if (it) {
        while (pf->head != it) {
            pf_item *skip = pf->head;
            pf->head = skip->next;
            pf_drop_locked(pf, skip);
        }
        pf->head = it->next;
        if (pf->tail == it)
            pf->tail = NULL;
        it->next = NULL;
        it->taken = 1;
        if (it->state == 0) {
            /* Not started (or waiting to retry): read it directly. */
            pf_drop_locked(pf, it);
            it = NULL;
        }
    }
    pthread_cond_broadcast(&pf->cv);
    pthread_mutex_unlock(&pf->mu);
    return it;
}

/* Give an item back to the thread or free it; it is no longer wanted. */
static void pf_release(s3_ctx *c, pf_item *it)
{
    prefetcher *pf = c->pf;
    pthread_mutex_lock(&pf->mu);
    pf_drop_locked(pf, it);
    pthread_cond_broadcast(&pf->cv);
    pthread_mutex_unlock(&pf->mu);
}

static void pf_stop(s3_ctx *c)
{
    prefetcher *pf = c->pf;
    if (!pf)
        return;
    pthread_mutex_lock(&pf->mu);
    pf->stop = 1;
    pthread_cond_broadcast(&pf->cv);
    pthread_mutex_unlock(&pf->mu);
    pthread_join(pf->thread, NULL);
    c->host->log(c->host, SKIPPR_LOG_DEBUG, "fetch-ahead: at most %d GETs "
                 "were in flight", pf->max_inflight);
    for (pf_item *it = pf->head, *n; it; it = n) {
        n = it->next;
        if (it->easy) {
            curl_multi_remove_handle(pf->multi, it->easy);
            curl_easy_cleanup(it->easy);
        }
        item_free(it);
    }
    curl_multi_cleanup(pf->multi);
    pthread_mutex_destroy(&pf->mu);
    pthread_cond_destroy(&pf->cv);
    free(pf);
    c->pf = NULL;
}

/* ---- source -------------------------------------------------------------- */

static const char *child_text(xmlNode *n, const char *name, char *out,
                              size_t cap)
{
    for (xmlNode *k = n->children; k; k = k->next) {
        if (k->type == XML_ELEMENT_NODE &&
            strcmp((const char *)k->name, name) == 0) {
            xmlChar *t = xmlNodeGetContent(k);
            snprintf(out, cap, "%s", t ? (const char *)t : "");
            xmlFree(t);
            return out;
        }
    }
    out[0] = '\0';
    return NULL;
}

/* ---- parallel listing ----------------------------------------------------
 *
 * A huge prefix is listed by many requests at once. A listing with
 * Delimiter '/' finds the sub-prefixes (descending while a level has only
 * one, as in year/month/day layouts). Then a window of up to
 * list_concurrency sub-prefixes is listed concurrently, each one page after
 * another. Keys are reported in order: those of the window's first
 * sub-prefix as its pages arrive; when it ends, the window slides on by
 * one. A sub-prefix ahead of the first holds at most one page and then
 * waits, so memory stays within list_concurrency pages however many keys
 * the prefix has. The keys of one sub-prefix sort together (a key beside
 * the sub-prefixes has no '/' after the level, so it cannot fall among
 * them), which is what lets each be reported whole, in turn.
 *
 * start_after skips whole sub-prefixes below it and starts the one it falls
 * in at start_after, so later batches do not re-list what was reported. A
 * server whose Delimiter answer is empty, or a level with more than
 * LIST_LEVEL_MAX entries, gets the plain, serial listing instead (which
 * holds one page at a time), so nothing can be skipped by a server that
 * ignores delimiters.
 */
#define LIST_LEVEL_MAX 100000 /* entries of one Delimiter level held */

typedef struct lentry {
    char *key, *etag; /* one allocation: etag follows key's NUL */
    int64_t size;
} lentry;

enum { LP_BUSY, LP_WAITING, LP_DONE };

/* A sub-prefix of the window: its request on one of the listing handles,
 * and the keys read but not yet reported. */
typedef struct lprefix {
    const char *prefix; /* borrowed from the level's list */
    const char *from;   /* start-after of its first page, or NULL */
    char token[2048];
    int attempts, state;
    lentry *v;
    size_t n, cap;
    CURL *easy;
    struct curl_slist *hdrs;
    resp r;
} lprefix;

static int lentry_cmp(const void *a, const void *b)
{
    return strcmp(((const lentry *)a)->key, ((const lentry *)b)->key);
}

static int lentry_push(lentry **v, size_t *n, size_t *cap, const char *key,
                       const char *etag, int64_t size)
{
    if (*n == *cap) {
        size_t nc = *cap ? *cap * 2 : 256;
        lentry *nv = realloc(*v, nc * sizeof *nv);
        if (!nv)
            return -1;
        *v = nv;
        *cap = nc;
    }
    size_t kl = strlen(key), el = strlen(etag);
    char *p = malloc(kl + el + 2);
    if (!p)
        return -1;
    memcpy(p, key, kl + 1);
    memcpy(p + kl + 1, etag, el + 1);
    lentry *e = &(*v)[*n];
    e->key = p;
    e->etag = p + kl + 1;
    e->size = size;
    (*n)++;
    return 0;
}

/* Free the n entries' strings; the array itself stays with the caller. */
static void lentries_clear(lentry *v, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(v[i].key);
}

static void lentries_free(lentry *v, size_t n)
{
    lentries_clear(v, n);
    free(v);
}

/* The text of the element the reader is on, up to its end tag, into out
 * (cap bytes with the NUL); the reader is left on the end tag. Returns 0,
 * or -1 when the text does not fit or the XML ends first. */
static int reader_text(xmlTextReaderPtr rd, char *out, size_t cap)
{
    size_t n = 0;
    out[0] = '\0';
    if (xmlTextReaderIsEmptyElement(rd))
        return 0;
    int depth = xmlTextReaderDepth(rd);
    while (xmlTextReaderRead(rd) == 1) {
        int t = xmlTextReaderNodeType(rd);
        if (t == XML_READER_TYPE_END_ELEMENT &&
            xmlTextReaderDepth(rd) == depth)
            return 0;
        if (t != XML_READER_TYPE_TEXT && t != XML_READER_TYPE_CDATA &&
            t != XML_READER_TYPE_WHITESPACE &&
            t != XML_READER_TYPE_SIGNIFICANT_WHITESPACE)
            continue;
        const char *v = (const char *)xmlTextReaderConstValue(rd);
        size_t l = v ? strlen(v) : 0;
        if (l >= cap - n)
            return -1;
        memcpy(out + n, v, l);
        n += l;
        out[n] = '\0';
    }
    return -1;
}

/* One <Contents> entry read: add it to v unless it is a folder marker. */
static int page_entry(lentry **v, size_t *n, size_t *cap, const char *key,
                      char *etag, const char *size)
{
    size_t kl = strlen(key);
    if (!kl)
        return -1; /* S3 has no empty key */
    if (key[kl - 1] == '/' && atoll(size) == 0)
        return 0; /* a "folder" marker */
    char *e = etag;
    size_t el = strlen(e);
    if (el >= 2 && e[0] == '"' && e[el - 1] == '"') {
        e[el - 1] = '\0';
        e++;
    }
    return lentry_push(v, n, cap, key, e, atoll(size));
}

/* Parse one ListObjectsV2 page: Contents into v, CommonPrefixes into cps
 * (when cps is not NULL). Returns 0, or -1 on bad XML or no memory.
 *
 * The page is read with libxml2's streaming reader, not into a tree: a
 * page of 1,000 keys makes a tree of about 1.7 MB, which every poll of the
 * continuous mode would build once per page of the bucket. */
static int parse_page(const buf *body, lentry **v, size_t *n, size_t *cap,
                      char ***cps, size_t *ncp, char *token, size_t tcap,
                      int *truncated)
{
    xmlTextReaderPtr rd = xmlReaderForMemory(body->p ? body->p : "",
                                             (int)body->n, NULL, NULL,
                                             XML_PARSE_NONET);
    if (!rd)
        return -1;
    char key[2048], etag[256], size[32], trunc[16] = "";
    int rc = 0, r = -1;
    int in = 0; /* 1: within <Contents>, 2: within <CommonPrefixes> */
    token[0] = '\0';
    while (!rc && (r = xmlTextReaderRead(rd)) == 1) {
        int t = xmlTextReaderNodeType(rd), d = xmlTextReaderDepth(rd);
        if (t == XML_READER_TYPE_END_ELEMENT && d == 1 && in) {
            if (in == 1) {
                rc = page_entry(v, n, cap, key, etag, size);
            } else {
                char **np = realloc(*cps, (*ncp + 1) * sizeof *np);
                if (!np || !(np[*ncp] = strdup(key)))
                    rc = -1;
                if (np)
                    *cps = np;
                if (!rc)
                    (*ncp)++;
            }
            in = 0;
            continue;
        }
        if (t != XML_READER_TYPE_ELEMENT || d < 1 || d > 2)
            continue;
        const char *name = (const char *)xmlTextReaderConstLocalName(rd);
        if (!name)
            continue;
        if (d == 1) {
            in = 0;
            key[0] = etag[0] = size[0] = '\0';
            if (strcmp(name, "Contents") == 0)
                in = xmlTextReaderIsEmptyElement(rd) ? 0 : 1;
            else if (cps && strcmp(name, "CommonPrefixes") == 0)
                in = xmlTextReaderIsEmptyElement(rd) ? 0 : 2;
            else if (strcmp(name, "IsTruncated") == 0)
                rc = reader_text(rd, trunc, sizeof trunc);
            else if (strcmp(name, "NextContinuationToken") == 0)
                rc = reader_text(rd, token, tcap);
        } else if (in == 1 && strcmp(name, "Key") == 0) {
            rc = reader_text(rd, key, sizeof key);
        } else if (in == 1 && strcmp(name, "ETag") == 0) {
            rc = reader_text(rd, etag, sizeof etag);
        } else if (in == 1 && strcmp(name, "Size") == 0) {
            rc = reader_text(rd, size, sizeof size);
        } else if (in == 2 && strcmp(name, "Prefix") == 0) {
            rc = reader_text(rd, key, sizeof key);
        }
    }
    if (!rc && r != 0)
        rc = -1; /* the XML is malformed */
    xmlFreeTextReader(rd);
    *truncated = strcmp(trunc, "true") == 0 && *token;
    return rc;
}

/* Fetch and parse one ListObjectsV2 page on the instance's handle,
 * retrying transient failures with backoff. */
static int list_page(s3_ctx *c, const sigv4_kv *q, size_t nq,
                     const char *prefix, lentry **v, size_t *n, size_t *cap,
                     char ***cps, size_t *ncp, char *token, size_t tcap,
                     int *truncated)
{
    resp r = {0};
    int rc = SKIPPR_RETRY;
    for (int a = 0; a < c->max_attempts && rc == SKIPPR_RETRY; a++) {
        if (a) {
            buf_free(&r.body);
            backoff(a);
        }
        rc = verdict(c, request(c, "GET", NULL, q, nq, NULL, 0, NULL, 0, &r),
                     &r, "list", prefix);
    }
    if (rc == SKIPPR_RETRY)
        give_up(c, "list", prefix, &r);
    if (!rc && parse_page(&r.body, v, n, cap, cps, ncp, token, tcap,
                          truncated)) {
        LOG(c, SKIPPR_LOG_ERROR, "list s3://%s/%s: unreadable XML answer",
            c->bucket, prefix);
        rc = SKIPPR_FATAL;
    }
    buf_free(&r.body);
    return rc ? SKIPPR_FATAL : SKIPPR_OK;
}

/* One level of a delimiter listing: sub-prefixes and direct objects.
 * Returns SKIPPR_OK, SKIPPR_FATAL, or 1 when the level holds more than
 * LIST_LEVEL_MAX entries (what was read stays in the arrays). */
static int list_level(s3_ctx *c, const char *prefix, char ***cps, size_t *ncp,
                      lentry **v, size_t *n, size_t *cap)
{
    char token[2048] = "";
    int truncated = 1;
    while (truncated) {
        if (*ncp + *n > LIST_LEVEL_MAX)
            return 1;
        sigv4_kv q[4];
        size_t nq = 0;
        q[nq++] = (sigv4_kv){"list-type", "2"};
        q[nq++] = (sigv4_kv){"prefix", prefix};
        q[nq++] = (sigv4_kv){"delimiter", "/"};
        if (*token)
            q[nq++] = (sigv4_kv){"continuation-token", token};
        if (list_page(c, q, nq, prefix, v, n, cap, cps, ncp, token,
                      sizeof token, &truncated))
            return SKIPPR_FATAL;
    }
    return SKIPPR_OK;
}

/* Ask for lp's next page (its first: at lp->from, if set). A request that
 * cannot be prepared is left out of the multi; list_window notices. */
static void lprefix_start(s3_ctx *c, CURLM *m, lprefix *lp)
{
    sigv4_kv q[3];
    size_t nq = 0;
    q[nq++] = (sigv4_kv){"list-type", "2"};
    q[nq++] = (sigv4_kv){"prefix", lp->prefix};
    if (*lp->token)
        q[nq++] = (sigv4_kv){"continuation-token", lp->token};
    else if (lp->from)
        q[nq++] = (sigv4_kv){"start-after", lp->from};
    char url[8192];
    curl_slist_free_all(lp->hdrs);
    lp->hdrs = NULL;
    buf_free(&lp->r.body);
    memset(&lp->r, 0, sizeof lp->r);
    lp->r.body.max = MAX_BODY;
    lp->attempts++;
    lp->state = LP_BUSY;
    if (prepare(c, "GET", NULL, q, nq, NULL, 0, NULL, 0, url, sizeof url,
                &lp->hdrs) != SKIPPR_OK)
        return;
    easy_setup(c, lp->easy, url, lp->hdrs, &lp->r);
    curl_easy_setopt(lp->easy, CURLOPT_PRIVATE, lp);
    curl_multi_add_handle(m, lp->easy);
}

static void sort_entries(lentry *v, size_t n)
{
    if (n > 1) /* v is NULL when a listing found nothing */
        qsort(v, n, sizeof *v, lentry_cmp);
}

/* Report the entries (in key order, see sort_entries()) above `after`.
 * Returns 1 if cb asked to stop. */
static int emit(const lentry *v, size_t n, const char *after,
                skippr_unit_cb cb, void *cb_data)
{
    for (size_t i = 0; i < n; i++) {
        if (after && strcmp(v[i].key, after) <= 0)
            continue;
        skippr_unit u = {v[i].key, v[i].etag, v[i].size};
        if (cb(cb_data, &u))
            return 1;
    }
    return 0;
}

/* List one prefix, one page after another. */
static int list_serial(s3_ctx *c, const char *prefix, const char *after,
                       skippr_unit_cb cb, void *cb_data)
{
    char token[2048] = "";
    int truncated = 1, stop = 0;
    while (truncated && !stop) {
        sigv4_kv q[4];
        size_t nq = 0;
        q[nq++] = (sigv4_kv){"list-type", "2"};
        q[nq++] = (sigv4_kv){"prefix", prefix};
        if (*token)
            q[nq++] = (sigv4_kv){"continuation-token", token};
        else if (after)
            q[nq++] = (sigv4_kv){"start-after", after};
        lentry *v = NULL;
        size_t n = 0, cap = 0;
        int rc = list_page(c, q, nq, prefix, &v, &n, &cap, NULL, NULL, token,
                           sizeof token, &truncated);
        if (!rc) {
            sort_entries(v, n);
            stop = emit(v, n, after, cb, cb_data);
        }
        lentries_free(v, n);
        if (rc)
            return rc;
    }
    return SKIPPR_OK;
}

/* Handle the listing requests that finished: their pages go to their
 * sub-prefix; a sub-prefix with more to read asks for its next page at
 * once if it is `head` (the one being reported) or holds nothing, and
 * otherwise waits. Returns SKIPPR_OK or SKIPPR_FATAL. */
static int list_step(s3_ctx *c, CURLM *m, const lprefix *head)
{
    int still = 0, seen = 0;
    curl_multi_perform(m, &still);
    if (still > 0) {
        curl_multi_poll(m, NULL, 0, 50, NULL);
        curl_multi_perform(m, &still);
    }
    CURLMsg *msg;
    int q;
    while ((msg = curl_multi_info_read(m, &q))) {
        if (msg->msg != CURLMSG_DONE)
            continue;
        seen++;
        lprefix *lp = NULL;
        curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, (char **)&lp);
        CURLcode cc = msg->data.result;
        curl_multi_remove_handle(m, lp->easy);
        curl_easy_getinfo(lp->easy, CURLINFO_RESPONSE_CODE, &lp->r.status);
        int st = SKIPPR_OK;
        if (cc != CURLE_OK)
            st = transport_failure(c, cc, &lp->r);
        st = verdict(c, st, &lp->r, "list", lp->prefix);
        int truncated = 0;
        if (st == SKIPPR_OK &&
            parse_page(&lp->r.body, &lp->v, &lp->n, &lp->cap, NULL, NULL,
                       lp->token, sizeof lp->token, &truncated)) {
            LOG(c, SKIPPR_LOG_ERROR, "list s3://%s/%s: unreadable XML answer",
                c->bucket, lp->prefix);
            st = SKIPPR_FATAL;
        }
        buf_free(&lp->r.body);
        if (st == SKIPPR_RETRY && lp->attempts < c->max_attempts) {
            backoff(lp->attempts);
            lprefix_start(c, m, lp);
        } else if (st != SKIPPR_OK) {
            if (st == SKIPPR_RETRY)
                give_up(c, "list", lp->prefix, &lp->r);
            return SKIPPR_FATAL;
        } else if (!truncated) {
            lp->state = LP_DONE;
        } else {
            lp->attempts = 0;
            if (lp == head || lp->n == 0)
                lprefix_start(c, m, lp);
            else
                lp->state = LP_WAITING;
        }
    }
    if (still == 0 && seen == 0) {
        LOG(c, SKIPPR_LOG_ERROR, "list s3://%s: a listing request could not "
            "be started", c->bucket);
        return SKIPPR_FATAL;
    }
    return SKIPPR_OK;
}

static int cps_cmp(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Counts of one window listing, for the debug log. */
typedef struct lstats {
    size_t reported, held_max;
} lstats;

/* Report the keys of cps[i..] and the direct objects (sorted, from *di on)
 * in order, through a window of sub-prefixes listed concurrently. */
static int list_window(s3_ctx *c, char **cps, size_t ncp, size_t i,
                       lentry *direct, size_t nd, size_t *di,
                       const char *after, skippr_unit_cb cb, void *cb_data,
                       lstats *ls)
{
    size_t lc = (size_t)c->list_concurrency;
    if (!c->lmulti) {
        if (!(c->lmulti = curl_multi_init()))
            return SKIPPR_NOMEM;
        curl_multi_setopt(c->lmulti, CURLMOPT_MAXCONNECTS, (long)lc);
    }
    if (!c->leasy && !(c->leasy = calloc(lc, sizeof *c->leasy)))
        return SKIPPR_NOMEM;
    for (size_t k = 0; k < lc; k++)
        if (!c->leasy[k] && !(c->leasy[k] = curl_easy_init()))
            return SKIPPR_NOMEM;
    lprefix *w = calloc(lc, sizeof *w); /* a ring: cps[k] in w[k % lc] */
    if (!w)
        return SKIPPR_NOMEM;
    CURLM *m = c->lmulti;
    size_t head = i, tail = i;
    int rc = SKIPPR_OK, stopped = 0;
    while (!rc && !stopped) {
        while (tail < ncp && tail - head < lc) {
            lprefix *lp = &w[tail % lc];
            size_t pl = strlen(cps[tail]);
            lp->prefix = cps[tail];
            lp->from = after && strncmp(after, cps[tail], pl) == 0 ? after
                                                                   : NULL;
            lp->token[0] = '\0';
            lp->attempts = 0;
            lp->easy = c->leasy[tail % lc];
            lprefix_start(c, m, lp);
            tail++;
        }
        size_t held = 0;
        for (size_t k = head; k < tail; k++)
            held += w[k % lc].n;
        if (held > ls->held_max)
            ls->held_max = held;
        /* Report what is ready, in order. */
        while (head < tail && !stopped) {
            lprefix *lp = &w[head % lc];
            size_t dn = 0;
            while (*di + dn < nd && strcmp(direct[*di + dn].key, lp->prefix) < 0)
                dn++;
            stopped = emit(direct + *di, dn, after, cb, cb_data);
            *di += dn;
            if (!stopped) {
                sort_entries(lp->v, lp->n);
                stopped = emit(lp->v, lp->n, after, cb, cb_data);
            }
            ls->reported += lp->n;
            lentries_clear(lp->v, lp->n);
            lp->n = 0;
            if (stopped || lp->state == LP_BUSY)
                break;
            if (lp->state == LP_WAITING) {
                lprefix_start(c, m, lp);
                break;
            }
            head++; /* done: its slot takes the next sub-prefix */
        }
        if (stopped || head == ncp)
            break;
        if (head < tail)
            rc = list_step(c, m, &w[head % lc]);
    }
    for (size_t k = 0; k < lc; k++) {
        /* Removing a handle that is not in the multi is harmless; the
         * handles and their connections stay for the next listing. */
        if (w[k].easy)
            curl_multi_remove_handle(m, w[k].easy);
        curl_slist_free_all(w[k].hdrs);
        buf_free(&w[k].r.body);
        lentries_free(w[k].v, w[k].n);
    }
    free(w);
    return rc ? rc : stopped ? 1 : SKIPPR_OK;
}

static int list_parallel(s3_ctx *c, const char *after, skippr_unit_cb cb,
                         void *cb_data)
{
    const char *top = c->prefix ? c->prefix : "";
    char *prefix = strdup(top);
    char **cps = NULL;
    size_t ncp = 0;
    lentry *direct = NULL;
    size_t nd = 0, dcap = 0;
    int rc = SKIPPR_OK;
    if (!prefix)
        return SKIPPR_NOMEM;
    /* Descend while a level has a single sub-prefix and no objects. */
    for (int depth = 0; depth < 8; depth++) {
        rc = list_level(c, prefix, &cps, &ncp, &direct, &nd, &dcap);
        if (rc || ncp != 1 || nd != 0)
            break;
        free(prefix);
        prefix = cps[0];
        free(cps);
        cps = NULL;
        ncp = 0;
    }
    int serial = rc == 1 || (!rc && ncp == 0 && nd == 0);
    if (rc == 1)
        LOG(c, SKIPPR_LOG_DEBUG, "listing s3://%s/%s: over %d entries in one "
            "level; listing one page at a time", c->bucket, prefix,
            LIST_LEVEL_MAX);
    if (!serial && !rc) {
        LOG(c, SKIPPR_LOG_DEBUG, "listing s3://%s/%s: %zu sub-prefixes, %zu "
            "objects beside them", c->bucket, prefix, ncp, nd);
        if (ncp > 1) /* cps is NULL when only objects were found */
            qsort(cps, ncp, sizeof *cps, cps_cmp);
        sort_entries(direct, nd);
        /* Skip the sub-prefixes wholly at or below start_after. */
        size_t i = 0, di = 0;
        lstats ls = {0};
        while (after && i < ncp && strcmp(cps[i], after) < 0 &&
               strncmp(after, cps[i], strlen(cps[i])) != 0)
            i++;
        rc = list_window(c, cps, ncp, i, direct, nd, &di, after, cb, cb_data,
                         &ls);
        if (rc == SKIPPR_OK) /* objects after the last sub-prefix */
            emit(direct + di, nd - di, after, cb, cb_data);
        if (rc == 1)
            rc = SKIPPR_OK; /* cb asked to stop */
        LOG(c, SKIPPR_LOG_DEBUG, "listed s3://%s/%s: %zu keys from "
            "sub-prefixes, at most %zu held at once", c->bucket, prefix,
            ls.reported, ls.held_max);
    }
    /* Nothing, a server that ignores Delimiter, or a level too big to
     * hold: list plainly. */
    lentries_free(direct, nd);
    for (size_t k = 0; k < ncp; k++)
        free(cps[k]);
    free(cps);
    free(prefix);
    if (serial)
        return list_serial(c, top, after, cb, cb_data);
    return rc;
}

static int src_list(void *ctx, const char *start_after, skippr_unit_cb cb,
                    void *cb_data)
{
    s3_ctx *c = ctx;
    const char *after = start_after ? start_after : c->start_after;
    if (c->list_concurrency > 1)
        return list_parallel(c, after, cb, cb_data);
    return list_serial(c, c->prefix ? c->prefix : "", after, cb, cb_data);
}

typedef struct s3_stream {
    char *key;
    char *etag;
    int64_t pos, size;
    buf chunk;
    size_t chunk_off;
    pf_item *ahead; /* first chunk fetched ahead, if any */
} s3_stream;

static int src_open(void *ctx, const skippr_unit *u, int64_t offset,
                    void **stream)
{
    s3_ctx *c = ctx;
    s3_stream *s = calloc(1, sizeof *s);
    if (!s)
        return SKIPPR_NOMEM;
    s->key = strdup(u->id);
    s->etag = strdup(u->version ? u->version : "");
    s->pos = offset;
    s->size = u->size;
    if (!s->key || !s->etag) {
        free(s->key);
        free(s->etag);
        free(s);
        return SKIPPR_NOMEM;
    }
    s->ahead = pf_take(c, u->id);
    if (s->ahead && (offset > 0 || strcmp(s->ahead->etag, s->etag) != 0)) {
        pf_release(c, s->ahead); /* resumed or changed: read directly */
        s->ahead = NULL;
    }
    *stream = s;
    return SKIPPR_OK;
}

/* Fetch the next chunk at s->pos into s->chunk. */
static int fetch_chunk(s3_ctx *c, s3_stream *s)
{
    int64_t last = s->pos + c->read_chunk_bytes - 1;
    if (s->size >= 0 && last >= s->size)
        last = s->size - 1;
    char range[64], ifm[300];
    snprintf(range, sizeof range, "bytes=%lld-%lld", (long long)s->pos,
             (long long)last);
    snprintf(ifm, sizeof ifm, "\"%s\"", s->etag);
    sigv4_kv h[2] = {{"range", range}, {"if-match", ifm}};
    size_t nh = *s->etag ? 2 : 1;
    int rc = SKIPPR_RETRY;
    resp r = {0};
    memset(&r, 0, sizeof r);
    for (int a = 0; a < c->max_attempts && rc == SKIPPR_RETRY; a++) {
        if (a) {
            buf_free(&r.body);
            backoff(a);
        }
        rc = request(c, "GET", s->key, NULL, 0, NULL, 0, h, nh, &r);
        if (rc == SKIPPR_OK && r.status == 412) {
            LOG(c, SKIPPR_LOG_ERROR, "s3://%s/%s changed while it was read "
                "(ETag is no longer %s)", c->bucket, s->key, s->etag);
            buf_free(&r.body);
            return SKIPPR_FATAL;
        }
        rc = verdict(c, rc, &r, "get", s->key);
        /* A short body (connection cut) keeps what arrived: retry the rest
         * from where it stopped, on the next call. */
        if (rc == SKIPPR_OK && r.body.n == 0 && s->pos <= last) {
            LOG(c, SKIPPR_LOG_WARN, "get s3://%s/%s: empty answer; retrying",
                c->bucket, s->key);
            rc = SKIPPR_RETRY;
        }
    }
    if (rc) {
        if (rc == SKIPPR_RETRY) {
            char what[64];
            snprintf(what, sizeof what, "get at byte %lld",
                     (long long)s->pos);
            give_up(c, what, s->key, &r);
        }
        buf_free(&r.body);
        return SKIPPR_FATAL;
    }
    buf_free(&s->chunk);
    s->chunk = r.body;
    s->chunk_off = 0;
    return SKIPPR_OK;
}

static int src_read(void *ctx, void *stream, void *out, size_t cap,
                    size_t *n_out)
{
    s3_ctx *c = ctx;
    s3_stream *s = stream;
    *n_out = 0;
    if (s->ahead) {
        /* Wait for the chunk fetched ahead; if it failed, read directly. */
        prefetcher *pf = c->pf;
        pf_item *it = s->ahead;
        pthread_mutex_lock(&pf->mu);
        while (it->state != 2)
            pthread_cond_wait(&pf->cv, &pf->mu);
        pthread_mutex_unlock(&pf->mu);
        if (it->ok) {
            buf_free(&s->chunk);
            s->chunk = it->r.body;
            memset(&it->r.body, 0, sizeof it->r.body);
            s->chunk_off = 0;
        }
        pf_release(c, it);
        s->ahead = NULL;
    }
    if (s->chunk_off == s->chunk.n) {
        if (s->size >= 0 && s->pos >= s->size)
            return SKIPPR_OK; /* end of unit */
        int rc = fetch_chunk(c, s);
        if (rc)
            return rc;
    }
    size_t n = s->chunk.n - s->chunk_off;
    if (n > cap)
        n = cap;
    memcpy(out, s->chunk.p + s->chunk_off, n);
    s->chunk_off += n;
    s->pos += (int64_t)n;
    *n_out = n;
    c->host->counter_add(c->host, "bytes_read", (int64_t)n);
    return SKIPPR_OK;
}

static void src_close(void *ctx, void *stream)
{
    s3_stream *s = stream;
    if (!s)
        return;
    if (s->ahead)
        pf_release(ctx, s->ahead);
    buf_free(&s->chunk);
    free(s->key);
    free(s->etag);
    free(s);
}

/* ---- sink ------------------------------------------------------------------ */

typedef struct part {
    char etag[128];
    char crc[16]; /* base64 CRC32C of the part; "" when not sent */
} part;

typedef struct s3_obj {
    char *key; /* prefix + object key */
    char slice[128];
    char crc[16];
    char crc_b64[16]; /* x-amz-checksum-crc32c of the whole object, or "" */
    char ctype[64];
    buf data;       /* current part (or the whole small object) */
    char upload_id[1024];
    part *parts;
    size_t nparts, cap;
    int conditional; /* send If-None-Match: * with the final request */
} s3_obj;

static void obj_free(s3_obj *o)
{
    buf_free(&o->data);
    free(o->parts);
    free(o->key);
    free(o);
}

/* S3's form of a CRC32C: base64 of its 4 big-endian bytes. */
static void crc32c_b64(uint32_t crc, char out[16])
{
    unsigned char be[4] = {(unsigned char)(crc >> 24),
                           (unsigned char)(crc >> 16),
                           (unsigned char)(crc >> 8), (unsigned char)crc};
    EVP_EncodeBlock((unsigned char *)out, be, 4);
}

/* Whether to send CRC32C checksums: the option, and a host that computes
 * them for the parts. */
static int checksums(const s3_ctx *c)
{
    return c->checksum && SKIPPR_HOST_HAS(c->host, crc32c) &&
           c->host->crc32c != NULL;
}

/* Headers every written object carries. */
static size_t object_headers(s3_ctx *c, s3_obj *o, sigv4_kv *h)
{
    size_t n = 0;
    h[n++] = (sigv4_kv){"x-amz-meta-skippr-slice", o->slice};
    h[n++] = (sigv4_kv){"x-amz-meta-skippr-crc32c", o->crc};
    h[n++] = (sigv4_kv){"content-type", o->ctype};
    if (c->storage_class)
        h[n++] = (sigv4_kv){"x-amz-storage-class", c->storage_class};
    if (c->sse)
        h[n++] = (sigv4_kv){"x-amz-server-side-encryption", c->sse};
    return n;
}

static int sink_open(void *ctx, const skippr_object_info *info, void **h)
{
    s3_ctx *c = ctx;
    s3_obj *o = calloc(1, sizeof *o);
    if (!o)
        return SKIPPR_RETRY;
    size_t pl = strlen(c->prefix);
    size_t kl = pl + 1 + strlen(info->key) + 1;
    o->key = malloc(kl);
    if (!o->key) {
        free(o);
        return SKIPPR_RETRY;
    }
    snprintf(o->key, kl, "%s%s%s", c->prefix,
             pl && c->prefix[pl - 1] != '/' ? "/" : "", info->key);
    snprintf(o->slice, sizeof o->slice, "%s", info->slice_id);
    snprintf(o->crc, sizeof o->crc, "%08x", info->crc32c);
    if (checksums(c))
        crc32c_b64(info->crc32c, o->crc_b64);
    snprintf(o->ctype, sizeof o->ctype, "%s",
             info->content_type ? info->content_type : "application/octet-stream");
    o->data.max = (size_t)c->part_size;
    o->conditional = c->conditional &&
                     !(c->replace_key && strcmp(c->replace_key, o->key) == 0);
    *h = o;
    return SKIPPR_OK;
}

/* HEAD key and compare its metadata with the slice id and CRC: SKIPPR_OK
 * when they match, SKIPPR_NOENT when there is no object, SKIPPR_CHANGED
 * when it holds something else, or the request's failure. */
static int head_compare(s3_ctx *c, const char *key, const char *slice,
                        const char *crc)
{
    resp r = {0};
    int rc = request(c, "HEAD", key, NULL, 0, NULL, 0, NULL, 0, &r);
    if (rc == SKIPPR_OK && r.status == 404) {
        buf_free(&r.body);
        return SKIPPR_NOENT;
    }
    rc = verdict(c, rc, &r, "head", key);
    buf_free(&r.body);
    if (rc)
        return rc;
    if (strcmp(r.meta_slice, slice) == 0 && strcmp(r.meta_crc, crc) == 0)
        return SKIPPR_OK;
    return SKIPPR_CHANGED;
}

/* The final request of o answered 412: an object is already there. It is
 * ours when an earlier attempt succeeded but its answer was lost; anything
 * else was written by someone else since object_check looked. */
static int settle_existing(s3_ctx *c, s3_obj *o)
{
    int rc = head_compare(c, o->key, o->slice, o->crc);
    if (rc == SKIPPR_OK) {
        LOG(c, SKIPPR_LOG_INFO, "s3://%s/%s is already written (an earlier "
            "attempt succeeded); not replaced", c->bucket, o->key);
        c->host->counter_add(c->host, "objects_already_there", 1);
        return SKIPPR_OK;
    }
    if (rc == SKIPPR_CHANGED) {
        LOG(c, SKIPPR_LOG_ERROR, "s3://%s/%s was written by another writer "
            "while skippr wrote slice %s; not replaced", c->bucket, o->key,
            o->slice);
        return SKIPPR_FATAL;
    }
    return rc == SKIPPR_NOENT ? SKIPPR_RETRY : rc; /* gone again: retry */
}

/* Judge the answer to a conditional final request. Sets *settled when a
 * 412 was resolved (the object is there, or a conflict is fatal). */
static int conditional_verdict(s3_ctx *c, s3_obj *o, int rc, resp *r,
                               const char *what, int *settled)
{
    *settled = 0;
    if (rc == SKIPPR_OK && o->conditional && r->status == 412) {
        *settled = 1;
        return settle_existing(c, o);
    }
    if (rc == SKIPPR_OK && o->conditional && r->status == 501) {
        LOG(c, SKIPPR_LOG_INFO, "%s s3://%s/%s: the server does not support "
            "If-None-Match; writing unconditionally from now on", what,
            c->bucket, o->key);
        c->conditional = 0;
        return SKIPPR_RETRY;
    }
    return verdict(c, rc, r, what, o->key);
}

/* Abort unfinished multipart uploads of this key (a crashed attempt). */
static int abort_orphans(s3_ctx *c, s3_obj *o)
{
    sigv4_kv q[] = {{"uploads", ""}, {"prefix", o->key}};
    resp r = {0};
    int rc = request(c, "GET", NULL, q, 2, NULL, 0, NULL, 0, &r);
    if (rc == SKIPPR_OK && r.status == 501) {
        /* Some S3-compatible servers cannot list uploads. */
        LOG(c, SKIPPR_LOG_DEBUG, "list uploads: not implemented by the "
            "server; unfinished uploads cannot be aborted (set an "
            "AbortIncompleteMultipartUpload lifecycle rule)");
        buf_free(&r.body);
        return SKIPPR_OK;
    }
    rc = verdict(c, rc, &r, "list uploads", o->key);
    if (rc) {
        buf_free(&r.body);
        return rc;
    }
    xmlDoc *doc = xmlReadMemory(r.body.p ? r.body.p : "", (int)r.body.n, NULL,
                                NULL, XML_PARSE_NONET | XML_PARSE_NOBLANKS);
    buf_free(&r.body);
    xmlNode *root = doc ? xmlDocGetRootElement(doc) : NULL;
    for (xmlNode *n = root ? root->children : NULL; n && !rc; n = n->next) {
        if (n->type != XML_ELEMENT_NODE ||
            strcmp((const char *)n->name, "Upload") != 0)
            continue;
        char key[2048], id[1024];
        child_text(n, "Key", key, sizeof key);
        child_text(n, "UploadId", id, sizeof id);
        if (strcmp(key, o->key) != 0)
            continue;
        sigv4_kv dq[] = {{"uploadId", id}};
        resp d = {0};
        /* A failed abort leaves storage behind, not wrong data: warn. */
        if (verdict(c, request(c, "DELETE", o->key, dq, 1, NULL, 0, NULL, 0,
                               &d), &d, "abort orphaned upload",
                    o->key) == SKIPPR_OK)
            LOG(c, SKIPPR_LOG_INFO, "aborted an unfinished upload of "
                "s3://%s/%s left by an earlier attempt", c->bucket, o->key);
        buf_free(&d.body);
    }
    if (doc)
        xmlFreeDoc(doc);
    return rc;
}

/* Tries of one part or one Complete within a write, before the engine's
 * own retry writes the whole object again: a multipart object is several
 * requests, and one failure among them should not cost all of them. */
#define SINK_TRIES 3

static int upload_part(s3_ctx *c, s3_obj *o)
{
    int rc;
    if (!*o->upload_id) {
        if ((rc = abort_orphans(c, o)))
            return rc;
        sigv4_kv q[] = {{"uploads", ""}};
        sigv4_kv h[10];
        size_t nh = object_headers(c, o, h);
        if (*o->crc_b64) {
            /* Parts carry their CRC32C; Complete, the whole object's. */
            h[nh++] = (sigv4_kv){"x-amz-checksum-algorithm", "CRC32C"};
            h[nh++] = (sigv4_kv){"x-amz-checksum-type", "FULL_OBJECT"};
        }
        resp r = {0};
        rc = verdict(c, request(c, "POST", o->key, q, 1, NULL, 0, h, nh, &r),
                     &r, "start multipart upload", o->key);
        if (!rc) {
            const char *s = r.body.p ? strstr(r.body.p, "<UploadId>") : NULL;
            const char *e = s ? strstr(s, "</UploadId>") : NULL;
            if (!s || !e || (size_t)(e - s - 10) >= sizeof o->upload_id) {
                LOG(c, SKIPPR_LOG_ERROR, "start multipart upload s3://%s/%s: "
                    "no UploadId in the answer", c->bucket, o->key);
                rc = SKIPPR_RETRY;
            } else {
                snprintf(o->upload_id, sizeof o->upload_id, "%.*s",
                         (int)(e - s - 10), s + 10);
            }
        }
        buf_free(&r.body);
        if (rc)
            return rc;
    }
    if (o->nparts == o->cap) {
        size_t nc = o->cap ? o->cap * 2 : 16;
        part *np = realloc(o->parts, nc * sizeof *np);
        if (!np)
            return SKIPPR_RETRY;
        o->parts = np;
        o->cap = nc;
    }
    char num[16], md5[32];
    snprintf(num, sizeof num, "%zu", o->nparts + 1);
    md5_b64(o->data.p ? o->data.p : "", o->data.n, md5);
    char pcrc[16] = "";
    if (*o->crc_b64)
        crc32c_b64(c->host->crc32c(0, o->data.p ? o->data.p : "", o->data.n),
                   pcrc);
    sigv4_kv q[] = {{"partNumber", num}, {"uploadId", o->upload_id}};
    sigv4_kv h[] = {{"content-md5", md5}, {"x-amz-checksum-crc32c", pcrc}};
    resp r = {0};
    /* A part is written again in place (same number, same bytes), so any
     * failure is retried here first. */
    for (int attempt = 0; attempt < SINK_TRIES; attempt++) {
        if (attempt) {
            buf_free(&r.body);
            memset(&r, 0, sizeof r);
            if (c->host->should_stop(c->host))
                break;
            backoff(attempt);
        }
        rc = verdict(c, request(c, "PUT", o->key, q, 2, o->data.p, o->data.n,
                                h, *pcrc ? 2 : 1, &r),
                     &r, "upload part", o->key);
        if (rc != SKIPPR_RETRY)
            break;
    }
    if (!rc && !*r.etag) {
        LOG(c, SKIPPR_LOG_ERROR, "upload part of s3://%s/%s: no ETag",
            c->bucket, o->key);
        rc = SKIPPR_RETRY;
    }
    if (!rc) {
        snprintf(o->parts[o->nparts].etag, sizeof o->parts[0].etag, "%s",
                 r.etag);
        memcpy(o->parts[o->nparts].crc, pcrc, sizeof pcrc);
        o->nparts++;
        o->data.n = 0;
        c->host->counter_add(c->host, "parts_uploaded", 1);
    }
    buf_free(&r.body);
    return rc;
}

static int sink_write(void *ctx, void *h, const void *p, size_t n)
{
    s3_ctx *c = ctx;
    s3_obj *o = h;
    const char *d = p;
    while (n > 0) {
        size_t room = (size_t)c->part_size - o->data.n;
        size_t k = n < room ? n : room;
        if (buf_put(&o->data, d, k))
            return SKIPPR_RETRY;
        d += k;
        n -= k;
        if (o->data.n == (size_t)c->part_size) {
            int rc = upload_part(c, o);
            if (rc)
                return rc;
        }
    }
    return SKIPPR_OK;
}

static void sink_abort(void *ctx, void *h)
{
    s3_ctx *c = ctx;
    s3_obj *o = h;
    if (*o->upload_id) {
        sigv4_kv q[] = {{"uploadId", o->upload_id}};
        resp r = {0};
        int rc = request(c, "DELETE", o->key, q, 1, NULL, 0, NULL, 0, &r);
        if (rc == SKIPPR_OK && r.status == 404)
            /* NoSuchUpload: it completed (the answer was lost) or is
             * already gone; the retry settles which. */
            LOG(c, SKIPPR_LOG_DEBUG, "abort upload s3://%s/%s: no such "
                "upload", c->bucket, o->key);
        else
            verdict(c, rc, &r, "abort upload", o->key);
        buf_free(&r.body);
    }
    obj_free(o);
}

/* CompleteMultipartUpload of o's parts. A Complete the server says failed
 * (5xx, or 200 with an <Error> body, which S3 asks to retry) is sent again
 * up to SINK_TRIES times; a transport failure, whose request may have been
 * carried out, goes back to the engine, which first asks object_check.
 * Sets *settled as conditional_verdict does. */
static int complete_upload(s3_ctx *c, s3_obj *o, int *settled)
{
    buf x = {0};
    x.max = 1u << 24;
    int bad = buf_put(&x, "<CompleteMultipartUpload>", 25);
    for (size_t i = 0; i < o->nparts && !bad; i++) {
        char line[320], sum[64] = "";
        if (*o->parts[i].crc)
            snprintf(sum, sizeof sum, "<ChecksumCRC32C>%s</ChecksumCRC32C>",
                     o->parts[i].crc);
        int ln = snprintf(line, sizeof line, "<Part><PartNumber>%zu"
                          "</PartNumber><ETag>\"%s\"</ETag>%s</Part>",
                          i + 1, o->parts[i].etag, sum);
        bad = buf_put(&x, line, (size_t)ln);
    }
    bad = bad || buf_put(&x, "</CompleteMultipartUpload>", 26);
    if (bad) {
        buf_free(&x);
        return SKIPPR_RETRY;
    }
    sigv4_kv q[] = {{"uploadId", o->upload_id}};
    sigv4_kv ch[3];
    size_t nch = 0;
    if (*o->crc_b64) {
        ch[nch++] = (sigv4_kv){"x-amz-checksum-crc32c", o->crc_b64};
        ch[nch++] = (sigv4_kv){"x-amz-checksum-type", "FULL_OBJECT"};
    }
    if (o->conditional)
        ch[nch++] = (sigv4_kv){"if-none-match", "*"};
    int rc = SKIPPR_RETRY;
    for (int attempt = 0; attempt < SINK_TRIES; attempt++) {
        if (attempt) {
            if (c->host->should_stop(c->host))
                break;
            backoff(attempt);
        }
        resp r = {0};
        rc = conditional_verdict(c, o, request(c, "POST", o->key, q, 1, x.p,
                                               x.n, ch, nch, &r),
                                 &r, "complete upload", settled);
        int refused = rc == SKIPPR_RETRY && !r.curl_error && r.status >= 500;
        /* S3 may answer 200 and put the failure in the body. */
        if (!rc && !*settled && r.body.p && strstr(r.body.p, "<Error>")) {
            char code[128];
            error_code(&r.body, code, sizeof code);
            LOG(c, SKIPPR_LOG_WARN, "complete upload s3://%s/%s: 200 with an "
                "error in the body (%s)", c->bucket, o->key, code);
            rc = SKIPPR_RETRY;
            refused = 1;
        }
        buf_free(&r.body);
        if (rc != SKIPPR_RETRY || !refused)
            break;
    }
    buf_free(&x);
    return rc;
}

static int sink_commit(void *ctx, void *h)
{
    s3_ctx *c = ctx;
    s3_obj *o = h;
    int rc;
    if (!*o->upload_id) {
        char md5[32];
        md5_b64(o->data.p ? o->data.p : "", o->data.n, md5);
        sigv4_kv hd[10];
        size_t nh = object_headers(c, o, hd);
        hd[nh++] = (sigv4_kv){"content-md5", md5};
        if (*o->crc_b64)
            hd[nh++] = (sigv4_kv){"x-amz-checksum-crc32c", o->crc_b64};
        if (o->conditional)
            hd[nh++] = (sigv4_kv){"if-none-match", "*"};
        resp r = {0};
        int settled;
        rc = conditional_verdict(c, o,
                                 request(c, "PUT", o->key, NULL, 0,
                                         o->data.p ? o->data.p : "",
                                         o->data.n, hd, nh, &r),
                                 &r, "put", &settled);
        buf_free(&r.body);
    } else {
        rc = o->data.n ? upload_part(c, o) : SKIPPR_OK;
        if (!rc) {
            int settled = 0;
            rc = complete_upload(c, o, &settled);
            if (settled && rc == SKIPPR_OK) {
                /* Ours is already there: drop this upload's parts. */
                sink_abort(ctx, h);
                return SKIPPR_OK;
            }
        }
    }
    if (rc) {
        /* The engine will write the whole object again. */
        sink_abort(ctx, h);
        return rc;
    }
    c->host->counter_add(c->host, "objects_written", 1);
    obj_free(o);
    return SKIPPR_OK;
}

static int sink_check(void *ctx, const skippr_object_info *info)
{
    s3_ctx *c = ctx;
    size_t pl = strlen(c->prefix);
    char key[4096];
    snprintf(key, sizeof key, "%s%s%s", c->prefix,
             pl && c->prefix[pl - 1] != '/' ? "/" : "", info->key);
    char crc[16];
    snprintf(crc, sizeof crc, "%08x", info->crc32c);
    free(c->replace_key);
    c->replace_key = NULL;
    int rc = head_compare(c, key, info->slice_id, crc);
    if (rc == SKIPPR_CHANGED && !(c->replace_key = strdup(key)))
        return SKIPPR_NOMEM; /* the engine replaces it: no If-None-Match */
    return rc;
}

static const skippr_source_ops source = {
    .struct_size = sizeof(skippr_source_ops),
    .ctx_size = sizeof(s3_ctx),
    .options = source_options,
    .init = init,
    .destroy = destroy,
    .list = src_list,
    .open = src_open,
    .read = src_read,
    .close = src_close,
    .prefetch = src_prefetch,
};

static const skippr_sink_ops sink = {
    .struct_size = sizeof(skippr_sink_ops),
    .ctx_size = sizeof(s3_ctx),
    .options = sink_options,
    .init = init,
    .destroy = destroy,
    .object_open = sink_open,
    .object_write = sink_write,
    .object_commit = sink_commit,
    .object_abort = sink_abort,
    .object_check = sink_check,
};

static const skippr_plugin plugin = {
    .abi_version = SKIPPR_ABI_VERSION,
    .struct_size = sizeof(skippr_plugin),
    .name = "S3",
    .description = "Objects in an S3 bucket (AWS or compatible), read with "
                   "ranged GETs and written with PUT or multipart upload.",
    .version = SKIPPR_VERSION_STRING,
    .source = &source,
    .sink = &sink,
};

SKIPPR_PLUGIN_DEFINE(plugin)
