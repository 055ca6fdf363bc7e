/* The HTTP pull source: each URL is a unit, like an object in a bucket.
 *
 * list() asks each URL for its ETag (or Last-Modified) and length with a
 * HEAD request; the engine skips a URL it has finished with the same
 * version, and reports one whose version changed. open() GETs the body
 * from an offset with a Range request and If-Match on the ETag, so a
 * resumed unit reads on from where the WAL says, from the same version;
 * read() streams it through libcurl's multi interface, holding at most
 * one buffer. Paged endpoints are not followed.
 */
#include <ctype.h>
#include <curl/curl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <skippr/plugin.h>

#define HLOG(host, level, ...) (host)->log((host), (level), __VA_ARGS__)
#define BUF_CAP (1u << 20) /* bytes held per open stream, at most */

typedef struct hpull {
    const char *urls;
    int64_t timeout_seconds;
    const skippr_kv *headers;
    const skippr_host *host;
    struct curl_slist *base;
} hpull;

typedef struct hstream {
    CURLM *multi;
    CURL *easy;
    struct curl_slist *hdrs;
    char *buf;
    size_t len, pos;
    int done;
    int paused;
    int64_t skip;   /* bytes to drop: a server that ignored Range */
    long status;    /* the answer's, once its first bytes arrive */
    int64_t offset;
} hstream;

static const skippr_option options[] = {
    {"urls", SKIPPR_OPT_STRING, NULL, 1, offsetof(hpull, urls),
     "URL to read, or a list of them; each is a unit."},
    {"timeout_seconds", SKIPPR_OPT_INT, "300", 0,
     offsetof(hpull, timeout_seconds), "Per request."},
    {"header.", SKIPPR_OPT_PREFIX, NULL, 0, offsetof(hpull, headers),
     "Extra request headers, e.g. header.X-Api-Key (values never logged)."},
    {NULL, 0, NULL, 0, 0, NULL}};

static int init(void *ctx, const skippr_host *host)
{
    hpull *c = ctx;
    c->host = host;
    curl_global_init(CURL_GLOBAL_DEFAULT);
    for (const skippr_kv *kv = c->headers; kv && kv->key; kv++) {
        char line[4096];
        snprintf(line, sizeof line, "%s: %s", kv->key, kv->value);
        struct curl_slist *l = curl_slist_append(c->base, line);
        if (!l)
            return SKIPPR_NOMEM;
        c->base = l;
    }
    return SKIPPR_OK;
}

static void destroy(void *ctx)
{
    hpull *c = ctx;
    curl_slist_free_all(c->base);
}

typedef struct head_info {
    char version[256];
    int64_t size;
} head_info;

/* ETag, else Last-Modified, from the headers. */
static size_t on_header(char *p, size_t size, size_t n, void *ud)
{
    head_info *h = ud;
    size_t len = size * n;
    int etag = len > 5 && strncasecmp(p, "ETag:", 5) == 0;
    int lm = len > 14 && strncasecmp(p, "Last-Modified:", 14) == 0;
    if (etag || (lm && !h->version[0])) {
        size_t k = etag ? 5 : 14;
        while (k < len && isspace((unsigned char)p[k]))
            k++;
        size_t e = len;
        while (e > k && isspace((unsigned char)p[e - 1]))
            e--;
        snprintf(h->version, sizeof h->version, "%s%.*s", etag ? "" : "lm:",
                 (int)(e - k), p + k);
    }
    return len;
}

static int head(hpull *c, const char *url, head_info *h)
{
    CURL *e = curl_easy_init();
    if (!e)
        return SKIPPR_NOMEM;
    h->version[0] = '\0';
    h->size = -1;
    curl_easy_setopt(e, CURLOPT_URL, url);
    curl_easy_setopt(e, CURLOPT_NOBODY, 1L);
    curl_easy_setopt(e, CURLOPT_HTTPHEADER, c->base);
    curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(e, CURLOPT_HEADERDATA, h);
    curl_easy_setopt(e, CURLOPT_TIMEOUT, (long)c->timeout_seconds);
    curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(e, CURLOPT_FOLLOWLOCATION, 1L);
    CURLcode rc = curl_easy_perform(e);
    long status = 0;
    curl_off_t len = -1;
    curl_easy_getinfo(e, CURLINFO_RESPONSE_CODE, &status);
    curl_easy_getinfo(e, CURLINFO_CONTENT_LENGTH_DOWNLOAD_T, &len);
    curl_easy_cleanup(e);
    if (rc != CURLE_OK) {
        HLOG(c->host, SKIPPR_LOG_ERROR, "HEAD %s: %s", url,
             curl_easy_strerror(rc));
        return SKIPPR_RETRY;
    }
    if (status == 404) {
        HLOG(c->host, SKIPPR_LOG_ERROR, "%s: 404 not found", url);
        return SKIPPR_NOENT;
    }
    if (status >= 400 && status != 405) {
        HLOG(c->host, SKIPPR_LOG_ERROR, "HEAD %s: %ld", url, status);
        return status >= 500 || status == 429 ? SKIPPR_RETRY : SKIPPR_FATAL;
    }
    h->size = status == 405 ? -1 : (int64_t)len;
    return SKIPPR_OK;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static int list(void *ctx, const char *start_after, skippr_unit_cb cb,
                void *cb_data)
{
    hpull *c = ctx;
    char *copy = strdup(c->urls);
    if (!copy)
        return SKIPPR_NOMEM;
    char *urls[1024];
    size_t n = 0;
    for (char *save = NULL, *t = strtok_r(copy, ",", &save); t && n < 1024;
         t = strtok_r(NULL, ",", &save))
        urls[n++] = t;
    qsort(urls, n, sizeof *urls, cmp_str);
    int rc = SKIPPR_OK;
    for (size_t i = 0; i < n && !rc; i++) {
        if ((start_after && strcmp(urls[i], start_after) <= 0) ||
            (i && strcmp(urls[i], urls[i - 1]) == 0))
            continue;
        head_info h;
        if ((rc = head(c, urls[i], &h)))
            break;
        skippr_unit u = {urls[i], h.version, h.size};
        if (cb(cb_data, &u))
            break;
    }
    free(copy);
    return rc;
}

static size_t on_data(char *p, size_t size, size_t n, void *ud)
{
    hstream *s = ud;
    size_t len = size * n;
    if (!s->status) {
        /* The first bytes: a server that ignored Range sent everything
         * (200); an error answer's body is not data. */
        curl_easy_getinfo(s->easy, CURLINFO_RESPONSE_CODE, &s->status);
        if (s->status >= 400)
            return 0;
        if (s->offset > 0 && s->status == 200)
            s->skip = s->offset;
    }
    if (s->skip > 0) {
        size_t k = (int64_t)len < s->skip ? len : (size_t)s->skip;
        s->skip -= (int64_t)k;
        p += k;
        len -= k;
        if (!len)
            return size * n;
    }
    if (s->len - s->pos + len > BUF_CAP && s->len > s->pos) {
        s->paused = 1;
        return CURL_WRITEFUNC_PAUSE;
    }
    if (s->pos > 0) {
        memmove(s->buf, s->buf + s->pos, s->len - s->pos);
        s->len -= s->pos;
        s->pos = 0;
    }
    if (s->len + len > BUF_CAP + CURL_MAX_WRITE_SIZE) {
        s->paused = 1;
        return CURL_WRITEFUNC_PAUSE;
    }
    memcpy(s->buf + s->len, p, len);
    s->len += len;
    return size * n;
}

static void stream_free(hstream *s)
{
    if (s->multi && s->easy)
        curl_multi_remove_handle(s->multi, s->easy);
    if (s->easy)
        curl_easy_cleanup(s->easy);
    if (s->multi)
        curl_multi_cleanup(s->multi);
    curl_slist_free_all(s->hdrs);
    free(s->buf);
    free(s);
}

static int src_open(void *ctx, const skippr_unit *unit, int64_t offset,
                    void **stream)
{
    hpull *c = ctx;
    hstream *s = calloc(1, sizeof *s);
    if (!s || !(s->buf = malloc(BUF_CAP + CURL_MAX_WRITE_SIZE))) {
        free(s);
        return SKIPPR_NOMEM;
    }
    s->offset = offset;
    for (struct curl_slist *l = c->base; l; l = l->next)
        if (!(s->hdrs = curl_slist_append(s->hdrs, l->data)))
            goto oom;
    char line[512];
    if (offset > 0) {
        snprintf(line, sizeof line, "Range: bytes=%" PRId64 "-", offset);
        if (!(s->hdrs = curl_slist_append(s->hdrs, line)))
            goto oom;
    }
    if (unit->version && unit->version[0] && strncmp(unit->version, "lm:", 3)) {
        snprintf(line, sizeof line, "If-Match: %s", unit->version);
        if (!(s->hdrs = curl_slist_append(s->hdrs, line)))
            goto oom;
    }
    s->multi = curl_multi_init();
    s->easy = curl_easy_init();
    if (!s->multi || !s->easy)
        goto oom;
    curl_easy_setopt(s->easy, CURLOPT_URL, unit->id);
    curl_easy_setopt(s->easy, CURLOPT_HTTPHEADER, s->hdrs);
    curl_easy_setopt(s->easy, CURLOPT_WRITEFUNCTION, on_data);
    curl_easy_setopt(s->easy, CURLOPT_WRITEDATA, s);
    curl_easy_setopt(s->easy, CURLOPT_TIMEOUT, (long)c->timeout_seconds);
    curl_easy_setopt(s->easy, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(s->easy, CURLOPT_FOLLOWLOCATION, 1L);
    curl_multi_add_handle(s->multi, s->easy);
    *stream = s;
    return SKIPPR_OK;
oom:
    stream_free(s);
    return SKIPPR_NOMEM;
}

/* An error answer: 412 means the URL changed since it was listed. */
static int status_error(hpull *c, long status, const char *url)
{
    if (status == 412) {
        HLOG(c->host, SKIPPR_LOG_ERROR, "%s changed since it was listed",
             url);
        return SKIPPR_CHANGED;
    }
    HLOG(c->host, SKIPPR_LOG_ERROR, "GET %s: %ld", url, status);
    return status >= 500 || status == 429 ? SKIPPR_RETRY : SKIPPR_FATAL;
}

static int src_read(void *ctx, void *stream, void *buf, size_t cap,
                    size_t *n_out)
{
    hpull *c = ctx;
    hstream *s = stream;
    *n_out = 0;
    while (s->len == s->pos && !s->done) {
        if (s->paused) {
            s->paused = 0;
            curl_easy_pause(s->easy, CURLPAUSE_CONT);
        }
        int running = 0;
        if (curl_multi_perform(s->multi, &running) != CURLM_OK)
            return SKIPPR_IO;
        char *url = NULL;
        curl_easy_getinfo(s->easy, CURLINFO_EFFECTIVE_URL, &url);
        if (s->status >= 400)
            return status_error(c, s->status, url ? url : "?");
        int left;
        CURLMsg *m;
        while ((m = curl_multi_info_read(s->multi, &left))) {
            if (m->msg != CURLMSG_DONE)
                continue;
            long status = 0;
            curl_easy_getinfo(s->easy, CURLINFO_RESPONSE_CODE, &status);
            if (status >= 400)
                return status_error(c, status, url ? url : "?");
            if (m->data.result != CURLE_OK) {
                HLOG(c->host, SKIPPR_LOG_ERROR, "GET %s: %s", url ? url : "?",
                     curl_easy_strerror(m->data.result));
                return SKIPPR_RETRY;
            }
            s->done = 1;
        }
        if (!running)
            s->done = 1;
        if (s->len == s->pos && !s->done)
            curl_multi_poll(s->multi, NULL, 0, 100, NULL);
    }
    size_t k = s->len - s->pos < cap ? s->len - s->pos : cap;
    memcpy(buf, s->buf + s->pos, k);
    s->pos += k;
    *n_out = k;
    return SKIPPR_OK;
}

static void src_close(void *ctx, void *stream)
{
    (void)ctx;
    stream_free(stream);
}

static const skippr_source_ops source = {
    .struct_size = sizeof(skippr_source_ops),
    .ctx_size = sizeof(hpull),
    .options = options,
    .init = init,
    .destroy = destroy,
    .list = list,
    .open = src_open,
    .read = src_read,
    .close = src_close,
};

static const skippr_plugin plugin = {
    .abi_version = SKIPPR_ABI_VERSION,
    .struct_size = sizeof(skippr_plugin),
    .name = "HTTPPull",
    .description = "HTTP pull: each URL is a unit keyed by URL and ETag, "
                   "read with Range requests",
    .version = "0.2.0",
    .source = &source,
    .sink = NULL,
};

SKIPPR_PLUGIN_DEFINE(plugin)
