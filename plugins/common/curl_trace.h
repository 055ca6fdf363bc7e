/* libcurl helpers for the plugins that use it (S3, the HTTP sink,
 * HTTPPull): the verbose trace, and header.* options as request headers.
 * Plugin-side code: it uses only the public ABI.
 *
 * With SKIPPR_CURL_VERBOSE=1 in the environment, every transfer's trace
 * goes to host->log at debug level (shown with -vv): curl's own notes,
 * request and status lines, and header lines. A header's value is shown
 * only for headers known to carry no credential (Host, Content-Length,
 * ETag, Range, ...); any other value, a configured header.NAME included,
 * is printed as "[hidden]". Bodies are counted, never printed. */
#ifndef SKIPPR_CURL_TRACE_H
#define SKIPPR_CURL_TRACE_H

#include <curl/curl.h>

#include <skippr/plugin.h>

/* Turn the trace on for handle h when SKIPPR_CURL_VERBOSE=1. Call after
 * any curl_easy_reset(). host must outlive the transfers. */
void skippr_curl_trace(CURL *h, const skippr_host *host);

/* Append "KEY: VALUE" for each of kv (a header.* prefix option, ended by
 * a NULL key; may be NULL) to *list, which the caller owns and frees with
 * curl_slist_free_all() whatever this returns. SKIPPR_OK or SKIPPR_NOMEM. */
int skippr_curl_add_headers(struct curl_slist **list, const skippr_kv *kv);

#endif
