/* The engine's state in a bucket (SKIPPR_SINK_STORE, for
 * skipprd_el_storage_mode: s3): objects under s3_prefix read with ranged
 * GETs, written with PUT (conditional on request: If-None-Match: * or
 * If-Match with an ETag), or, unconditional and larger than part_size (a
 * big ledger run), as a multipart upload; deleted and listed. What the
 * objects hold is the engine's business (runtime/state/remote.c).
 *
 * store_put_file sends a file (a ledger run) the same way, reading it a
 * part at a time: at most one part of it is in memory.
 *
 * A conditional PUT that answers 412 (or 409, S3's answer to a
 * conditional write racing another) is SKIPPR_CHANGED. When the 412
 * answers a retry, the first attempt may have been carried out with its
 * answer lost: the object is read back, and if it holds exactly our
 * bytes the write counts as done.
 *
 * Thread: the instance's own, as the rest of the sink.
 */
#include "list.h"
#include "request.h"
#include "store.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* key under the instance's prefix into out; 0, or -1 if it does not fit. */
static int full_key(const s3_ctx *c, const char *key, char *out, size_t cap)
{
    size_t pl = strlen(c->prefix);
    const char *sep = pl && c->prefix[pl - 1] != '/' ? "/" : "";
    int n = snprintf(out, cap, "%s%s%s", c->prefix, sep, key);
    if (n < 0 || (size_t)n >= cap) {
        LOG(c, SKIPPR_LOG_ERROR, "state key %s%s%s: too long", c->prefix,
            sep, key);
        return -1;
    }
    return 0;
}

int sink_store_get(void *ctx, const char *key, uint64_t offset, void *buf,
                   size_t cap, size_t *got, uint64_t *size, char *etag,
                   size_t etag_cap)
{
    s3_ctx *c = ctx;
    char full[1024], range[64];
    *got = 0;
    *size = 0;
    if (full_key(c, key, full, sizeof full))
        return SKIPPR_INVAL;
    if (cap == 0 || cap > MAX_BODY)
        return SKIPPR_RANGE;
    snprintf(range, sizeof range, "bytes=%" PRIu64 "-%" PRIu64, offset,
             offset + cap - 1);
    sigv4_kv h[1] = {{"range", range}};
    static const long also[] = {404, 416, 0};
    resp r = {0};
    int rc = s3_request_retried(c, "get", full, also, "GET", full,
                                NULL, 0, NULL, 0, h, 1, &r);
    if (!rc && r.status == 404) {
        rc = SKIPPR_NOENT;
    } else if (!rc && r.status == 416) {
        *size = offset; /* nothing at or after offset: an empty object */
    } else if (!rc) {
        const char *slash = strrchr(r.content_range, '/');
        *size = slash ? strtoull(slash + 1, NULL, 10)
                      : offset + (uint64_t)r.body.len;
        if (r.body.len > cap) {
            rc = SKIPPR_CORRUPT;
        } else {
            memcpy(buf, r.body.data, r.body.len);
            *got = r.body.len;
        }
    }
    if (!rc && etag)
        snprintf(etag, etag_cap, "%s", r.etag);
    skippr_buf_free(&r.body);
    return rc;
}

/* After a retried conditional PUT met 412: 1 when key holds exactly
 * buf[0..len) (our first attempt was carried out), with its ETag. */
static int holds_ours(s3_ctx *c, const char *key, const void *buf,
                      size_t len, char *etag, size_t etag_cap)
{
    if (len > MAX_BODY)
        return 0;
    char *back = malloc(len ? len : 1);
    size_t got;
    uint64_t size;
    int same = back &&
               sink_store_get(c, key, 0, back, len ? len : 1, &got, &size,
                              etag, etag_cap) == SKIPPR_OK &&
               size == len && got == len && memcmp(back, buf, len) == 0;
    free(back);
    return same;
}

/* The bytes of an unconditional state write: p[0..len), or, p NULL, the
 * first len bytes of the file fd, read a part at a time into buf. */
typedef struct body {
    const char *p;
    int fd;
    uint64_t len;
    char *buf;
} body;

/* Bytes [off, off + n) of b; NULL (logged) when the file cannot give them. */
static const char *body_at(s3_ctx *c, const char *full, body *b,
                           uint64_t off, size_t n)
{
    if (b->p)
        return b->p + off;
    size_t got = 0;
    while (got < n) {
        ssize_t k = pread(b->fd, b->buf + got, n - got, (off_t)(off + got));
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0) {
            LOG(c, SKIPPR_LOG_ERROR, "write state %s: reading its file: %s",
                full, k < 0 ? strerror(errno) : "shorter than its size");
            return NULL;
        }
        got += (size_t)k;
    }
    return b->buf;
}

/* An unconditional state write larger than a part (a ledger run of a big
 * ledger: one PutObject takes at most 5 GiB) as a multipart upload of
 * full from b, parts of part_size (larger when 10,000 would not hold
 * it), each retried; aborted on failure. */
static int put_parts(s3_ctx *c, const char *full, body *b, char *etag,
                     size_t etag_cap)
{
    uint64_t part = (uint64_t)c->part_size;
    if (b->len / part >= 10000)
        part = b->len / 9999 + 1;
    if (!b->p && !(b->buf = malloc((size_t)part)))
        return SKIPPR_NOMEM;
    char id[512], num[16], sum[32], ptag[128];
    sigv4_kv q[2] = {{"uploads", ""}};
    resp r = {0};
    int rc = s3_request_retried(c, "put", full, NULL, "POST", full, q,
                                1, NULL, 0, NULL, 0, &r);
    if (!rc)
        s3_xml_value(&r.body, "UploadId", id, sizeof id);
    if (!rc && !*id) {
        LOG(c, SKIPPR_LOG_ERROR, "write state %s: no UploadId in the answer",
            full);
        rc = SKIPPR_FATAL;
    }
    skippr_buf_free(&r.body);
    if (rc)
        return rc;
    buf x = {0};
    x.max = 1u << 24;
    rc = skippr_buf_append(&x, "<CompleteMultipartUpload>", 25);
    q[0] = (sigv4_kv){"partNumber", num};
    q[1] = (sigv4_kv){"uploadId", id};
    for (uint64_t off = 0, i = 1; off < b->len && !rc; off += part, i++) {
        size_t n = (size_t)(b->len - off < part ? b->len - off : part);
        const char *p = body_at(c, full, b, off, n);
        if (!p) {
            rc = SKIPPR_IO;
            break;
        }
        snprintf(num, sizeof num, "%" PRIu64, i);
        sigv4_kv h[1] = {s3_body_check(c, p, n, sum)};
        memset(&r, 0, sizeof r);
        rc = s3_request_retried(c, "put", full, NULL, "PUT", full, q,
                                2, p, n, h, 1, &r);
        snprintf(ptag, sizeof ptag, "%s", r.etag);
        skippr_buf_free(&r.body);
        char line[256];
        int ln = snprintf(line, sizeof line, "<Part><PartNumber>%" PRIu64
                          "</PartNumber><ETag>\"%s\"</ETag></Part>", i, ptag);
        if (!rc)
            rc = skippr_buf_append(&x, line, (size_t)ln);
    }
    if (!rc)
        rc = skippr_buf_append(&x, "</CompleteMultipartUpload>", 26);
    if (!rc) {
        memset(&r, 0, sizeof r);
        rc = s3_request_retried(c, "put", full, NULL, "POST", full,
                                q + 1, 1, x.data, x.len, NULL, 0, &r);
        char code[128];
        if (!rc && s3_error_in_body(&r.body, code, sizeof code)) {
            LOG(c, SKIPPR_LOG_ERROR, "write state %s: the upload did not "
                "complete", full);
            rc = SKIPPR_FATAL;
        }
        if (!rc && etag)
            s3_xml_value(&r.body, "ETag", etag, etag_cap);
        skippr_buf_free(&r.body);
    }
    skippr_buf_free(&x);
    if (rc) {
        memset(&r, 0, sizeof r);
        static const long gone[] = {404, 0};
        s3_request_retried(c, "abort upload", full, gone, "DELETE",
                           full, q + 1, 1, NULL, 0, NULL, 0, &r);
        skippr_buf_free(&r.body);
    }
    return rc;
}

int sink_store_put(void *ctx, const char *key, const void *buf, size_t len,
                   const char *cond, char *etag, size_t etag_cap)
{
    s3_ctx *c = ctx;
    char full[1024], sum[32], match[160];
    if (full_key(c, key, full, sizeof full))
        return SKIPPR_INVAL;
    if (!cond && len > (size_t)c->part_size) {
        body b = {buf, -1, len, NULL};
        return put_parts(c, full, &b, etag, etag_cap);
    }
    sigv4_kv h[3] = {s3_body_check(c, buf, len, sum),
                     {"content-type", "application/octet-stream"}};
    size_t nh = 2;
    if (cond && strcmp(cond, "*") == 0) {
        h[nh++] = (sigv4_kv){"if-none-match", "*"};
    } else if (cond) {
        snprintf(match, sizeof match, "\"%s\"", cond);
        h[nh++] = (sigv4_kv){"if-match", match};
    }
    static const long also[] = {409, 412, 404, 0};
    resp r = {0};
    int rc = s3_request_retried(c, "put", full, cond ? also : NULL,
                                "PUT", full, NULL, 0, buf, len, h, nh, &r);
    long status = r.status;
    if (!rc && etag)
        snprintf(etag, etag_cap, "%s", r.etag);
    skippr_buf_free(&r.body);
    if (rc || status < 300)
        return rc;
    /* The condition did not hold. A 412 may answer a retry of an attempt
     * that was carried out with its answer lost: then the key holds our
     * bytes. */
    if (status == 412 && holds_ours(c, key, buf, len, etag, etag_cap))
        return SKIPPR_OK;
    return SKIPPR_CHANGED;
}

int sink_store_delete(void *ctx, const char *key)
{
    s3_ctx *c = ctx;
    char full[1024];
    if (full_key(c, key, full, sizeof full))
        return SKIPPR_INVAL;
    static const long also[] = {404, 0};
    resp r = {0};
    int rc = s3_request_retried(c, "delete", full, also, "DELETE",
                                full, NULL, 0, NULL, 0, NULL, 0, &r);
    skippr_buf_free(&r.body);
    return rc;
}

/* The engine's callback, given keys relative to the instance's prefix. */
typedef struct store_walk {
    skippr_unit_cb cb;
    void *ud;
    size_t skip; /* the prefix and its separator */
} store_walk;

static int store_one(void *ud, const skippr_unit *u)
{
    store_walk *w = ud;
    skippr_unit rel = *u;
    rel.id = u->id + w->skip;
    return w->cb(w->ud, &rel);
}

int sink_store_list(void *ctx, const char *prefix, skippr_unit_cb cb,
                    void *cb_data)
{
    s3_ctx *c = ctx;
    char full[1024];
    if (full_key(c, prefix, full, sizeof full))
        return SKIPPR_INVAL;
    store_walk w = {cb, cb_data, strlen(full) - strlen(prefix)};
    return s3_list_serial(c, full, NULL, store_one, &w);
}

int sink_store_put_file(void *ctx, const char *key, int fd, uint64_t len,
                        char *etag, size_t etag_cap)
{
    s3_ctx *c = ctx;
    char full[1024];
    if (full_key(c, key, full, sizeof full))
        return SKIPPR_INVAL;
    /* One part or less: one PUT of the whole file (at most part_size
     * bytes in memory, as a part would be). */
    body b = {NULL, fd, len, NULL};
    int rc;
    if (len > (uint64_t)c->part_size) {
        rc = put_parts(c, full, &b, etag, etag_cap);
    } else if (!(b.buf = malloc(len ? (size_t)len : 1))) {
        rc = SKIPPR_NOMEM;
    } else {
        const char *p = body_at(c, full, &b, 0, (size_t)len);
        rc = p ? sink_store_put(c, key, p, (size_t)len, NULL, etag, etag_cap)
               : SKIPPR_IO;
    }
    free(b.buf);
    return rc;
}
