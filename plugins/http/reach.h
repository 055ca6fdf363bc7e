/* The preflight of the HTTP plugins (the ops' probe): reach a URL's server
 * the way a request would, and send nothing. Shared by the HTTP sink and
 * HTTPPull.
 */
#ifndef SKIPPR_HTTP_REACH_H
#define SKIPPR_HTTP_REACH_H

#include <stdint.h>

#include <skippr/plugin.h>

/* Connect to url's server: TCP, and for https the TLS handshake with the
 * certificate checked (against ca_file when given). No request is sent,
 * so a receiver sees nothing. Waits at most timeout_seconds (10 at most).
 * On failure, one error line naming the option (opt) and what to check;
 * SKIPPR_FATAL. */
int http_reach(const skippr_host *host, const char *url, const char *opt,
               const char *ca_file, int64_t timeout_seconds);

/* http_reach for each URL of a comma-separated list, up to the first
 * that fails. */
int http_reach_each(const skippr_host *host, const char *urls,
                    const char *opt, const char *ca_file,
                    int64_t timeout_seconds);

#endif
