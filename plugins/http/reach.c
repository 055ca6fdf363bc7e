/* The HTTP plugins' preflight: a connection to the server, no request.
 * See reach.h.
 */
#include "reach.h"

#include <curl/curl.h>
#include <stdlib.h>
#include <string.h>

#include "curl_tls.h"

#define REACH_MAX_SECONDS 10

int http_reach(const skippr_host *host, const char *url, const char *opt,
               const char *ca_file, int64_t timeout_seconds)
{
    CURL *e = curl_easy_init(); /* curl_global_init: the plugin's init() */
    if (!e)
        return SKIPPR_NOMEM;
    long wait = timeout_seconds > 0 && timeout_seconds < REACH_MAX_SECONDS
                    ? (long)timeout_seconds
                    : REACH_MAX_SECONDS;
    curl_easy_setopt(e, CURLOPT_URL, url);
    curl_easy_setopt(e, CURLOPT_CONNECT_ONLY, 1L);
    curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT, wait);
    curl_easy_setopt(e, CURLOPT_TIMEOUT, wait);
    curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
    if (ca_file)
        curl_easy_setopt(e, CURLOPT_CAINFO, ca_file);
    CURLcode rc = curl_easy_perform(e);
    curl_easy_cleanup(e);
    if (rc == CURLE_OK)
        return SKIPPR_OK;
    if (http_tls_refused(rc))
        host->log(host, SKIPPR_LOG_ERROR, "cannot reach %s: %s: give the "
                  "CA of its certificate as ca_file", url,
                  curl_easy_strerror(rc));
    else
        host->log(host, SKIPPR_LOG_ERROR, "cannot reach %s: %s: check `%s` "
                  "and that the server is up", url, curl_easy_strerror(rc),
                  opt);
    return SKIPPR_FATAL;
}

int http_reach_each(const skippr_host *host, const char *urls,
                    const char *opt, const char *ca_file,
                    int64_t timeout_seconds)
{
    char *copy = strdup(urls);
    if (!copy)
        return SKIPPR_NOMEM;
    int rc = SKIPPR_OK;
    for (char *save = NULL, *t = strtok_r(copy, ",", &save); t && !rc;
         t = strtok_r(NULL, ",", &save))
        rc = http_reach(host, t, opt, ca_file, timeout_seconds);
    free(copy);
    return rc;
}
