/* The preflight (plugin.h, probe): before a run reads anything, reach the
 * bucket with the credentials the run will use and try what it will do
 * there, so that a missing bucket, a wrong secret or a missing permission
 * is one line at start, not an error per object later.
 *
 * Source: one page of one key under the prefix (s3:ListBucket). An
 * Inventory source lists nothing itself; its manifest is read at the first
 * listing, which names any problem then.
 * Sink: a probe key under the prefix, read (it is not there: the answer
 * says whether the bucket and the identity are), then written with
 * If-Match on an ETag no object has: S3 decides the permission before the
 * condition, so 404 or 412 means s3:PutObject is granted, and nothing is
 * written, whatever fails afterwards. A server that ignores If-Match
 * stores it, and the probe removes it.
 *
 * Thread: the instance's. */
#include "probe.h"
#include "request.h"
#include "store.h"

#include <inttypes.h>
#include <stdio.h>
#include <time.h>
#include <unistd.h>

int src_probe(void *ctx)
{
    s3_ctx *c = ctx;
    if (c->inventory_manifest)
        return SKIPPR_OK;
    sigv4_kv q[3] = {{"list-type", "2"}, {"max-keys", "1"},
                     {"prefix", c->prefix}};
    resp r = {0};
    int rc = s3_request_retried(c, "list", c->prefix, NULL, "GET", NULL, q,
                                3, NULL, 0, NULL, 0, &r);
    skippr_buf_free(&r.body);
    return rc;
}

int sink_probe(void *ctx)
{
    s3_ctx *c = ctx;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    char key[96];
    snprintf(key, sizeof key, "_skippr/probe-%ld-%" PRIx64, (long)getpid(),
             (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec);
    /* A GET of the probe's key first: its answer names the problem (a
     * HEAD's has no body), and 404 NoSuchKey is the answer hoped for. */
    char buf[1], etag[8];
    size_t got;
    uint64_t size;
    int rc = sink_store_get(c, key, 0, buf, sizeof buf, &got, &size, etag,
                            sizeof etag);
    if (rc && rc != SKIPPR_NOENT)
        return rc;
    /* A write that cannot take place: S3 checks the permission first, then
     * If-Match, which no object matches (404 or 412: allowed, nothing
     * written). A server that ignores If-Match writes it: remove it. */
    static const char body[] = "skippr preflight\n";
    rc = sink_store_put(c, key, body, sizeof body - 1, "skippr-probe-none",
                        NULL, 0);
    if (rc == SKIPPR_CHANGED)
        return SKIPPR_OK;
    return rc ? rc : sink_store_delete(c, key);
}
