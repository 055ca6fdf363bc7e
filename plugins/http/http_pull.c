/* The HTTP pull source: each URL is a unit, like an object in a bucket.
 *
 * list() asks each URL for its ETag (or Last-Modified) and length with a
 * HEAD request (a GET cut off after the headers where HEAD is refused);
 * the engine skips a URL it has finished with the same version, and
 * reports one whose version changed. With follow_next, each answer's
 * `Link: <...>; rel="next"` is followed and every page is a unit of its
 * own. open() GETs the body from an offset with a Range request and
 * If-Match on the ETag, so a resumed unit reads on from where the WAL
 * says, from the same version; read() streams it through libcurl's multi
 * interface, holding at most one buffer.
 */
#include <ctype.h>
#include <curl/curl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <skippr/plugin.h>

#include "curl_tls.h"
#include "curl_trace.h"
#include <skippr/buf.h>

#include "link.h"
#include "reach.h"

#define HLOG(host, level, ...) (host)->log((host), (level), __VA_ARGS__)
#define BUF_CAP (1u << 20) /* bytes held per open stream, at most */
#define URL_MAX 4096       /* longest URL taken, with the NUL */

typedef struct hpull {
    const char *urls;
    int follow_next;
    int64_t max_pages;
    int64_t timeout_seconds;
    const skippr_kv *headers;
    const char *ca_file;
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
    {"follow_next", SKIPPR_OPT_BOOL, "false", 0, offsetof(hpull, follow_next),
     "Follow Link: <...>; rel=\"next\" from each URL; each page is a "
     "unit."},
    {"max_pages", SKIPPR_OPT_INT, "100000", 0, offsetof(hpull, max_pages),
     "With follow_next: more pages than this from one URL is an error."},
    {"timeout_seconds", SKIPPR_OPT_INT, "300", 0,
     offsetof(hpull, timeout_seconds), "Per request."},
    {"ca_file", SKIPPR_OPT_STRING, NULL, 0, offsetof(hpull, ca_file),
     "CA certificates (PEM) that an https server's certificate must chain "
     "to; default: the system's. Verification is always on."},
    {"header.", SKIPPR_OPT_PREFIX, NULL, 0, offsetof(hpull, headers),
     "Extra request headers, e.g. header.X-Api-Key (values never logged)."},
    {NULL, 0, NULL, 0, 0, NULL}};

static int init(void *ctx, const skippr_host *host)
{
    hpull *c = ctx;
    c->host = host;
    curl_global_init(CURL_GLOBAL_DEFAULT);
    /* the extra headers; destroy() frees the list */
    return skippr_curl_add_headers(&c->base, c->headers);
}

static void destroy(void *ctx)
{
    hpull *c = ctx;
    curl_slist_free_all(c->base);
}

typedef struct head_info {
    char version[256];
    int64_t size;
    char next[URL_MAX]; /* Link rel="next" target as sent; "" if none */
    int next_too_long;
} head_info;

/* ETag, else Last-Modified, and Link rel="next", from the headers. */
static size_t on_header(char *p, size_t size, size_t n, void *ud)
{
    head_info *h = ud;
    size_t len = size * n;
    if (len > 5 && strncasecmp(p, "Link:", 5) == 0 &&
        http_link_next(p + 5, len - 5, h->next, sizeof h->next) < 0)
        h->next_too_long = 1;
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

/* A GET that wants only the headers: the body is refused at its first
 * bytes (libcurl then ends the transfer with CURLE_WRITE_ERROR). */
static size_t no_body(char *p, size_t size, size_t n, void *ud)
{
    (void)p;
    (void)size;
    (void)n;
    (void)ud;
    return 0;
}

/* The headers of url, by HEAD or (get) by a GET cut off after them. */
static int head(hpull *c, const char *url, head_info *h, int get)
{
    CURL *e = curl_easy_init();
    if (!e)
        return SKIPPR_NOMEM;
    memset(h, 0, sizeof *h);
    h->size = -1;
    curl_easy_setopt(e, CURLOPT_URL, url);
    if (get)
        curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, no_body);
    else
        curl_easy_setopt(e, CURLOPT_NOBODY, 1L);
    curl_easy_setopt(e, CURLOPT_HTTPHEADER, c->base);
    curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(e, CURLOPT_HEADERDATA, h);
    curl_easy_setopt(e, CURLOPT_TIMEOUT, (long)c->timeout_seconds);
    curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(e, CURLOPT_FOLLOWLOCATION, 1L);
    if (c->ca_file)
        curl_easy_setopt(e, CURLOPT_CAINFO, c->ca_file);
    skippr_curl_trace(e, c->host);
    char why[CURL_ERROR_SIZE] = "";
    curl_easy_setopt(e, CURLOPT_ERRORBUFFER, why);
    CURLcode rc = curl_easy_perform(e);
    long status = 0;
    curl_off_t len = -1;
    curl_easy_getinfo(e, CURLINFO_RESPONSE_CODE, &status);
    curl_easy_getinfo(e, CURLINFO_CONTENT_LENGTH_DOWNLOAD_T, &len);
    curl_easy_cleanup(e);
    const char *verb = get ? "GET" : "HEAD";
    if (http_tls_refused(rc)) {
        HLOG(c->host, SKIPPR_LOG_ERROR, "%s %s: %s (%s); give the server's "
             "CA as ca_file", verb, url, curl_easy_strerror(rc), why);
        return SKIPPR_FATAL;
    }
    if (rc != CURLE_OK && !(get && rc == CURLE_WRITE_ERROR && status)) {
        HLOG(c->host, SKIPPR_LOG_ERROR, "%s %s: %s", verb, url,
             curl_easy_strerror(rc));
        return SKIPPR_RETRY;
    }
    if (status == 405 && !get)
        return head(c, url, h, 1); /* HEAD refused: ask with a GET */
    if (status == 404) {
        HLOG(c->host, SKIPPR_LOG_ERROR, "%s: 404 not found", url);
        return SKIPPR_NOENT;
    }
    if (status >= 400) {
        HLOG(c->host, SKIPPR_LOG_ERROR, "%s %s: %ld", verb, url, status);
        return status >= 500 || status == 429 ? SKIPPR_RETRY : SKIPPR_FATAL;
    }
    if (h->next_too_long) {
        HLOG(c->host, SKIPPR_LOG_ERROR, "%s: its next page's URL is over "
             "%d bytes", url, URL_MAX - 1);
        return SKIPPR_FATAL;
    }
    h->size = (int64_t)len;
    return SKIPPR_OK;
}

/* A unit found by list(): a URL (owned) with what its headers said. */
typedef struct page {
    char *url;
    char version[256];
    int64_t size;
} page;

typedef struct page_list {
    page *v;
    size_t n, cap;
} page_list;

static int pages_add(page_list *l, const char *url, const head_info *h)
{
    if (skippr_array_grow(&l->v, l->n, &l->cap, sizeof *l->v, 64))
        return SKIPPR_NOMEM;
    page *p = &l->v[l->n];
    if (!(p->url = strdup(url)))
        return SKIPPR_NOMEM;
    snprintf(p->version, sizeof p->version, "%s", h ? h->version : "");
    p->size = h ? h->size : -1;
    l->n++;
    return SKIPPR_OK;
}

static void pages_free(page_list *l)
{
    for (size_t i = 0; i < l->n; i++)
        free(l->v[i].url);
    free(l->v);
}

static int cmp_page(const void *a, const void *b)
{
    return strcmp(((const page *)a)->url, ((const page *)b)->url);
}

/* target resolved against base (a relative Link is usual) into out. */
static int resolve(hpull *c, const char *base, const char *target,
                   char out[URL_MAX])
{
    CURLU *u = curl_url();
    if (!u)
        return SKIPPR_NOMEM;
    char *full = NULL;
    int rc = SKIPPR_OK;
    if (curl_url_set(u, CURLUPART_URL, base, 0) != CURLUE_OK ||
        curl_url_set(u, CURLUPART_URL, target, 0) != CURLUE_OK ||
        curl_url_get(u, CURLUPART_URL, &full, 0) != CURLUE_OK) {
        HLOG(c->host, SKIPPR_LOG_ERROR, "%s: its next page '%s' is no URL",
             base, target);
        rc = SKIPPR_FATAL;
    } else if (strlen(full) >= URL_MAX) {
        HLOG(c->host, SKIPPR_LOG_ERROR, "%s: its next page's URL is over "
             "%d bytes", base, URL_MAX - 1);
        rc = SKIPPR_FATAL;
    } else {
        snprintf(out, URL_MAX, "%s", full);
    }
    curl_free(full);
    curl_url_cleanup(u);
    return rc;
}

/* url and, with follow_next, every page after it, into l (headed). */
static int add_pages(hpull *c, const char *url, page_list *l)
{
    char cur[URL_MAX];
    if (strlen(url) >= sizeof cur) {
        HLOG(c->host, SKIPPR_LOG_ERROR, "a URL is over %d bytes",
             URL_MAX - 1);
        return SKIPPR_INVAL;
    }
    snprintf(cur, sizeof cur, "%s", url);
    size_t first = l->n;
    for (int64_t k = 0;; k++) {
        if (k >= c->max_pages) {
            HLOG(c->host, SKIPPR_LOG_ERROR, "%s: more than max_pages (%" PRId64
                 ") pages", url, c->max_pages);
            return SKIPPR_RANGE;
        }
        head_info h;
        int rc = head(c, cur, &h, 0);
        if (!rc)
            rc = pages_add(l, cur, &h);
        if (rc || !c->follow_next || !h.next[0])
            return rc;
        char next[URL_MAX];
        if ((rc = resolve(c, cur, h.next, next)))
            return rc;
        for (size_t i = first; i < l->n; i++)
            if (strcmp(l->v[i].url, next) == 0) {
                HLOG(c->host, SKIPPR_LOG_ERROR, "%s: the next pages lead "
                     "back to %s", url, next);
                return SKIPPR_FATAL;
            }
        memcpy(cur, next, sizeof cur);
    }
}

static int list(void *ctx, const char *start_after, skippr_unit_cb cb,
                void *cb_data)
{
    hpull *c = ctx;
    char *copy = strdup(c->urls);
    if (!copy)
        return SKIPPR_NOMEM;
    page_list given = {0}, units = {0};
    int rc = SKIPPR_OK;
    for (char *save = NULL, *t = strtok_r(copy, ",", &save); t && !rc;
         t = strtok_r(NULL, ",", &save))
        rc = pages_add(&given, t, NULL);
    free(copy);
    if (!rc && given.n > 1) /* .v is NULL while empty */
        qsort(given.v, given.n, sizeof *given.v, cmp_page);
    /* Without follow_next only the URLs after start_after are asked; with
     * it every chain is walked, since a page may sort anywhere. */
    for (size_t i = 0; i < given.n && !rc; i++) {
        const char *u = given.v[i].url;
        if ((i && strcmp(u, given.v[i - 1].url) == 0) ||
            (!c->follow_next && start_after && strcmp(u, start_after) <= 0))
            continue;
        rc = add_pages(c, u, &units);
    }
    if (!rc && units.n > 1)
        qsort(units.v, units.n, sizeof *units.v, cmp_page);
    for (size_t i = 0; i < units.n && !rc; i++) {
        const page *p = &units.v[i];
        if ((i && strcmp(p->url, units.v[i - 1].url) == 0) ||
            (start_after && strcmp(p->url, start_after) <= 0))
            continue;
        skippr_unit u = {p->url, p->version, p->size, 0};
        if (cb(cb_data, &u))
            break;
    }
    pages_free(&given);
    pages_free(&units);
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
    if (c->ca_file)
        curl_easy_setopt(s->easy, CURLOPT_CAINFO, c->ca_file);
    skippr_curl_trace(s->easy, c->host);
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
            if (http_tls_refused(m->data.result)) {
                HLOG(c->host, SKIPPR_LOG_ERROR, "GET %s: %s; give the "
                     "server's CA as ca_file", url ? url : "?",
                     curl_easy_strerror(m->data.result));
                return SKIPPR_FATAL;
            }
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

/* The preflight: every URL's server answers a connection. */
static int probe(void *ctx)
{
    hpull *c = ctx;
    return http_reach_each(c->host, c->urls, "urls", c->ca_file,
                           c->timeout_seconds);
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
    .probe = probe,
};

/* --source http[s]://...: the URL to read. */
static const skippr_url_form urls[] = {
    {.scheme = "http", .roles = SKIPPR_URL_SOURCE, .url_option = "urls",
     .usage = "http://HOST[:PORT]/PATH"},
    {.scheme = "https", .roles = SKIPPR_URL_SOURCE, .url_option = "urls",
     .usage = "https://HOST[:PORT]/PATH"},
    {0},
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
    .urls = urls,
};

SKIPPR_PLUGIN_DEFINE(plugin)
