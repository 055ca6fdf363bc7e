/* TLS with libcurl, shared by the HTTP sink and HTTPPull. */
#ifndef SKIPPR_HTTP_CURL_TLS_H
#define SKIPPR_HTTP_CURL_TLS_H

#include <curl/curl.h>

/* Results that mean the server's certificate was refused (or the CA file
 * given cannot be used): no retry changes them, so they are fatal. */
static inline int http_tls_refused(CURLcode e)
{
    return e == CURLE_PEER_FAILED_VERIFICATION ||
           e == CURLE_SSL_CACERT_BADFILE || e == CURLE_SSL_CERTPROBLEM ||
           e == CURLE_SSL_ISSUER_ERROR;
}

#endif
