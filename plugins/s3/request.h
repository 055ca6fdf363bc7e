/* request.c: requests to S3: sign, send, retry, the verdict on an
 * answer, and the retry counts by cause. */
#ifndef SK_S3_REQUEST_H
#define SK_S3_REQUEST_H

#include <curl/curl.h>
#include <stddef.h>
#include <stdint.h>

#include "answer.h"
#include "ctx.h"
#include "sigv4.h"

/* Count a retry by cause for the metrics: retries_transport (no answer),
 * retries_throttled (503, 429), retries_timeout (408), retries_server. */
void s3_count_retry(s3_ctx *c, int transport, long status);

char *s3_env(const char *name);
void s3_md5_b64(const void *d, size_t n, char out[32]);
void s3_crc32c_b64(uint32_t crc, char out[16]);
int s3_checksums(const s3_ctx *c);
sigv4_kv s3_body_check(const s3_ctx *c, const void *p, size_t n,
                       char out[32]);
int s3_prepare(const s3_ctx *c, const char *method, const char *key,
               const sigv4_kv *query, size_t nq, const void *body,
               size_t blen, const sigv4_kv *hdrs, size_t nh, char *url,
               size_t url_cap, struct curl_slist **list);
void s3_easy_setup(const s3_ctx *c, CURL *h, const char *url,
                   struct curl_slist *list, resp *r);
int s3_transport_failure(s3_ctx *c, CURLcode cc, resp *r);
int s3_request(s3_ctx *c, const char *method, const char *key,
               const sigv4_kv *query, size_t nq, const void *body,
               size_t blen, const sigv4_kv *hdrs, size_t nh, resp *r);
/* s3_request, sent again (with backoff, up to max_attempts) while the
 * verdict is RETRY; then s3_give_up and SKIPPR_FATAL. `what` and `name`
 * (a key or prefix) are for the messages. Statuses in ok_also (0-ended,
 * may be NULL) come back as SKIPPR_OK for the caller to tell apart. *r
 * is the last answer; its body is the caller's to free. */
int s3_request_retried(s3_ctx *c, const char *what, const char *name,
                       const long *ok_also, const char *method,
                       const char *key, const sigv4_kv *query, size_t nq,
                       const void *body, size_t blen, const sigv4_kv *hdrs,
                       size_t nh, resp *r);
int s3_verdict(s3_ctx *c, int rc, resp *r, const char *what,
               const char *key);
void s3_give_up(s3_ctx *c, const char *what, const char *key,
                const resp *r);
void s3_backoff(s3_ctx *c, int attempt);

#endif
