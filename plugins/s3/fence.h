/* fence.c: the fence on S3 writes of a process whose lease lapsed. A
 * write is refused before its first byte goes out and, when it has a
 * body, again after its headers went out and before each piece of the
 * body: a process paused between a check and its request cannot send a
 * whole write late (docs/OPERATIONS.md, "State off the box"). */
#ifndef SK_S3_FENCE_H
#define SK_S3_FENCE_H

#include <curl/curl.h>
#include <stddef.h>

#include <skippr/plugin.h>

/* A write's body, read by libcurl through the fence. The caller owns it
 * and the bytes it points to, until the request is done. */
typedef struct s3_fenced_body {
    const unsigned char *p;
    size_t len, off;
    const skippr_host *host;
    const char *method;
} s3_fenced_body;

/* Non-zero when the engine offers the fence and this process is fenced. */
int s3_fence_closed(const skippr_host *host);

/* Set up h for a request of `method` with body p[0..n) (n may be 0):
 * a write (any method but GET and HEAD) is checked by the fence as
 * described above; the body goes through *b (filled here). A write the
 * fence refuses ends with CURLE_ABORTED_BY_CALLBACK. */
void s3_fence_request(const skippr_host *host, CURL *h, const char *method,
                      const void *p, size_t n, s3_fenced_body *b);

#endif
