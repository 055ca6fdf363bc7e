/* libcurl's verbose trace with credentials left out (curl_trace.h). */
#include "curl_trace.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* Headers whose values are shown; every other value is hidden. */
static const char *const shown[] = {
    "host", "content-type", "content-length", "content-range",
    "content-encoding", "content-md5", "user-agent", "accept",
    "accept-encoding", "etag", "if-match", "if-none-match", "range",
    "x-amz-date", "x-amz-content-sha256", "x-amz-request-id", "x-amz-id-2",
    "idempotency-key", "date", "server", "connection", "keep-alive",
    "transfer-encoding", "location", "link", "retry-after",
    "last-modified", "expect", "vary", "cache-control", NULL};

static int is_shown(const char *name, size_t n)
{
    for (size_t i = 0; shown[i]; i++)
        if (strlen(shown[i]) == n && strncasecmp(shown[i], name, n) == 0)
            return 1;
    return 0;
}

static void header_line(const skippr_host *host, const char *dir,
                        const char *p, size_t n)
{
    while (n && (p[n - 1] == '\r' || p[n - 1] == '\n'))
        n--;
    if (!n)
        return;
    const char *colon = memchr(p, ':', n);
    if (!colon || memchr(p, ' ', (size_t)(colon - p))) {
        /* a request or status line: "GET /b/k HTTP/1.1", "HTTP/1.1 200" */
        host->log(host, SKIPPR_LOG_DEBUG, "curl %s %.*s", dir, (int)n, p);
        return;
    }
    size_t nl = (size_t)(colon - p);
    if (is_shown(p, nl))
        host->log(host, SKIPPR_LOG_DEBUG, "curl %s %.*s", dir, (int)n, p);
    else
        host->log(host, SKIPPR_LOG_DEBUG, "curl %s %.*s: [hidden]", dir,
                  (int)nl, p);
}

static int trace(CURL *h, curl_infotype type, char *data, size_t size,
                 void *ud)
{
    (void)h;
    const skippr_host *host = ud;
    switch (type) {
    case CURLINFO_TEXT: {
        size_t n = size;
        while (n && (data[n - 1] == '\n' || data[n - 1] == '\r'))
            n--;
        host->log(host, SKIPPR_LOG_DEBUG, "curl * %.*s", (int)n, data);
        break;
    }
    case CURLINFO_HEADER_OUT:
    case CURLINFO_HEADER_IN: {
        const char *dir = type == CURLINFO_HEADER_OUT ? ">" : "<";
        size_t i = 0;
        while (i < size) {
            const char *nl = memchr(data + i, '\n', size - i);
            size_t end = nl ? (size_t)(nl - data) + 1 : size;
            header_line(host, dir, data + i, end - i);
            i = end;
        }
        break;
    }
    case CURLINFO_DATA_OUT:
    case CURLINFO_DATA_IN:
        host->log(host, SKIPPR_LOG_DEBUG, "curl %s %zu bytes of body",
                  type == CURLINFO_DATA_OUT ? ">" : "<", size);
        break;
    default:
        break; /* TLS records */
    }
    return 0;
}

void skippr_curl_trace(CURL *h, const skippr_host *host)
{
    const char *v = getenv("SKIPPR_CURL_VERBOSE");
    if (!v || strcmp(v, "1") != 0)
        return;
    curl_easy_setopt(h, CURLOPT_DEBUGFUNCTION, trace);
    curl_easy_setopt(h, CURLOPT_DEBUGDATA, (void *)host);
    curl_easy_setopt(h, CURLOPT_VERBOSE, 1L);
}

int skippr_curl_add_headers(struct curl_slist **list, const skippr_kv *kv)
{
    for (; kv && kv->key; kv++) {
        size_t n = strlen(kv->key) + strlen(kv->value) + 3;
        char *h = malloc(n);
        struct curl_slist *l = NULL;
        if (h) {
            snprintf(h, n, "%s: %s", kv->key, kv->value);
            l = curl_slist_append(*list, h);
            free(h);
        }
        if (!l)
            return SKIPPR_NOMEM;
        *list = l;
    }
    return SKIPPR_OK;
}
