/* The fence on S3 writes (fence.h).
 *
 * Why two checks. libcurl's CURLOPT_PREREQFUNCTION runs when the
 * connection is ready and before the request's first byte; a process
 * stopped right after it returns (SIGSTOP, a paused pod, a stalled Spot
 * box) would, once resumed, send the whole request late. So a body is not
 * handed to libcurl as one buffer sent with the headers: it is read
 * through fenced_read, which libcurl (7.88, Debian 12's) calls only after
 * the headers are on the wire, and which asks the fence before each
 * piece. Stopped anywhere, the process either finds itself fenced at its
 * next check or leaves S3 holding headers without their body, which S3
 * answers 400 RequestTimeout after about 20 s of silence.
 *
 * Requests with no body (CreateMultipartUpload, UploadPartCopy,
 * AbortMultipartUpload, DeleteObject) have only the first check; what one
 * of them can do when it lands late is said in docs/OPERATIONS.md.
 *
 * SKIPPR_TEST_STOP_AFTER_FENCE=METHOD:N (tests only) stops the whole
 * process with SIGSTOP once, right after the first check let the Nth
 * write of METHOD with a body through: the moment described above.
 */
#include "fence.h"

#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int s3_fence_closed(const skippr_host *host)
{
    return SKIPPR_HOST_HAS(host, fenced) && host->fenced &&
           host->fenced(host);
}

/* The test stop (installed only when the variable is set): at most one
 * stop a process. */
static atomic_int stop_seen, stop_done;

static void maybe_stop_for_test(const char *method)
{
    const char *v = getenv("SKIPPR_TEST_STOP_AFTER_FENCE");
    if (!v || atomic_load(&stop_done))
        return;
    char m[8];
    int nth = 0;
    if (sscanf(v, "%7[A-Z]:%d", m, &nth) != 2 || strcmp(m, method) != 0)
        return;
    if (atomic_fetch_add(&stop_seen, 1) + 1 == nth &&
        !atomic_exchange(&stop_done, 1))
        raise(SIGSTOP);
}

/* CURLOPT_PREREQFUNCTION: the first check (ud is the request's body
 * struct, which names the host). */
static int prereq_fence(void *ud, char *ip, char *lip, int rport, int lport)
{
    (void)ip;
    (void)lip;
    (void)rport;
    (void)lport;
    const s3_fenced_body *b = ud;
    if (s3_fence_closed(b->host))
        return CURL_PREREQFUNC_ABORT;
    return CURL_PREREQFUNC_OK;
}

/* CURLOPT_READFUNCTION: the body, a piece at a time, each after a check. */
static size_t fenced_read(char *out, size_t size, size_t nitems, void *ud)
{
    s3_fenced_body *b = ud;
    if (s3_fence_closed(b->host))
        return CURL_READFUNC_ABORT;
    size_t n = size * nitems, left = b->len - b->off;
    if (n > left)
        n = left;
    memcpy(out, b->p + b->off, n);
    b->off += n;
    return n;
}

/* CURLOPT_SEEKFUNCTION: libcurl rewinds a body to send it again on a new
 * connection (the reused one was closed under it). */
static int fenced_seek(void *ud, curl_off_t offset, int origin)
{
    s3_fenced_body *b = ud;
    if (origin != SEEK_SET || offset < 0 || (size_t)offset > b->len)
        return CURL_SEEKFUNC_CANTSEEK;
    b->off = (size_t)offset;
    return CURL_SEEKFUNC_OK;
}

/* The test stop sits in a second prereq so that the real one stays one
 * comparison: it runs only when the variable is set at the request. */
static int prereq_fence_test(void *ud, char *ip, char *lip, int rport,
                             int lport)
{
    int rc = prereq_fence(ud, ip, lip, rport, lport);
    const s3_fenced_body *b = ud;
    if (rc == CURL_PREREQFUNC_OK && b->len)
        maybe_stop_for_test(b->method);
    return rc;
}

/* The body of a write on h: read through the fence when there is one; a
 * PUT or POST without one says Content-Length: 0; a DELETE says nothing. */
static void set_body(CURL *h, s3_fenced_body *b)
{
    if (!b->len && strcmp(b->method, "PUT") != 0 &&
        strcmp(b->method, "POST") != 0)
        return;
    /* As a POST, whatever the method: the headers libcurl adds are those
     * it added when the body was given as POSTFIELDS. */
    curl_easy_setopt(h, CURLOPT_POST, 1L);
    curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)b->len);
    if (!b->len) {
        curl_easy_setopt(h, CURLOPT_POSTFIELDS, "");
        return;
    }
    curl_easy_setopt(h, CURLOPT_READFUNCTION, fenced_read);
    curl_easy_setopt(h, CURLOPT_READDATA, b);
    curl_easy_setopt(h, CURLOPT_SEEKFUNCTION, fenced_seek);
    curl_easy_setopt(h, CURLOPT_SEEKDATA, b);
}

void s3_fence_request(const skippr_host *host, CURL *h, const char *method,
                      const void *p, size_t n, s3_fenced_body *b)
{
    *b = (s3_fenced_body){p, n, 0, host, method};
    if (strcmp(method, "GET") == 0 || strcmp(method, "HEAD") == 0)
        return;
    curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, method);
    set_body(h, b);
    if (!SKIPPR_HOST_HAS(host, fenced) || !host->fenced)
        return;
    curl_easy_setopt(h, CURLOPT_PREREQFUNCTION,
                     getenv("SKIPPR_TEST_STOP_AFTER_FENCE") ? prereq_fence_test
                                                            : prereq_fence);
    curl_easy_setopt(h, CURLOPT_PREREQDATA, (void *)b);
}
