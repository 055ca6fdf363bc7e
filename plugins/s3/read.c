/* Reading a unit: the object fetched ahead when there is one, else ranged
 * GETs of read_chunk_bytes with If-Match on the listed ETag, so memory is
 * bounded, a resumed unit starts at its offset, and an object that changes
 * while it is read is an error rather than a mix of two versions.
 *
 * Thread: the pipeline thread.
 */
#include "prefetch.h"
#include "read.h"
#include "request.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct s3_stream {
    char *key;
    char *etag;
    int64_t pos, size;
    buf chunk;
    size_t chunk_off;
    pf_item *ahead; /* first chunk fetched ahead, if any */
    int size_checked; /* a unit listed empty: its HEAD agreed */
} s3_stream;

int src_open(void *ctx, const skippr_unit *u, int64_t offset,
                    void **stream)
{
    s3_ctx *c = ctx;
    s3_stream *s = calloc(1, sizeof *s);
    if (!s)
        return SKIPPR_NOMEM;
    s->key = strdup(u->id);
    s->etag = strdup(u->version ? u->version : "");
    s->pos = offset;
    s->size = u->size;
    if (!s->key || !s->etag) {
        free(s->key);
        free(s->etag);
        free(s);
        return SKIPPR_NOMEM;
    }
    s->ahead = s3_pf_take(c, u->id);
    if (s->ahead && (offset > 0 || strcmp(s->ahead->etag, s->etag) != 0)) {
        s3_pf_release(c, s->ahead); /* resumed or changed: read directly */
        s->ahead = NULL;
        c->host->counter_add(c->host, "fetch_ahead_unused", 1);
    }
    *stream = s;
    return SKIPPR_OK;
}

/* The object's size in an answer's Content-Range ("bytes a-b/TOTAL"), or
 * -1 when it gives none. */
static long long range_total(const char *cr)
{
    const char *slash = strrchr(cr, '/');
    if (!slash || slash[1] < '0' || slash[1] > '9')
        return -1;
    return strtoll(slash + 1, NULL, 10);
}

/* Whether total, the object's size as an answer gave it (-1: not given),
 * is the listed size. The request carried If-Match on the listed ETag, so
 * another size means the listing was not settled when it was taken (a
 * server that lists an object before its bytes are stored): copying by
 * the listed size would record the unit done short. Logged. */
static int total_is_listed(s3_ctx *c, const s3_stream *s, long long total)
{
    if (s->size < 0 || total < 0 || total == s->size)
        return 1;
    LOG(c, SKIPPR_LOG_ERROR, "s3://%s/%s has %lld bytes but was listed "
        "with %lld under the same ETag: the listing was stale; nothing of "
        "it is recorded, run again to copy it", c->bucket, s->key, total,
        (long long)s->size);
    return 0;
}

/* A 412 to a request with If-Match on the listed ETag: said, fatal. */
static int changed_while_read(s3_ctx *c, const s3_stream *s)
{
    LOG(c, SKIPPR_LOG_ERROR, "s3://%s/%s changed while it was read "
        "(ETag is no longer %s)", c->bucket, s->key, s->etag);
    return SKIPPR_FATAL;
}

/* A unit listed with 0 bytes is read with no GET; one HEAD (If-Match on
 * the listed ETag) checks that it is empty, so that an object listed
 * before its bytes were stored is not recorded done and empty. */
static int check_empty(s3_ctx *c, s3_stream *s)
{
    char ifm[300];
    snprintf(ifm, sizeof ifm, "\"%s\"", s->etag);
    sigv4_kv h[1] = {{"if-match", ifm}};
    static const long also[] = {412, 0};
    resp r = {0};
    int rc = s3_request_retried(c, "head", s->key, also, "HEAD", s->key, NULL,
                                0, NULL, 0, h, *s->etag ? 1 : 0, &r);
    skippr_buf_free(&r.body);
    if (rc)
        return SKIPPR_FATAL;
    if (r.status == 412)
        return changed_while_read(c, s);
    long long total = *r.content_length ? strtoll(r.content_length, NULL, 10)
                                        : -1;
    if (!total_is_listed(c, s, total))
        return SKIPPR_FATAL;
    s->size_checked = 1;
    return SKIPPR_OK;
}

/* Fetch the next chunk at s->pos into s->chunk. */
static int fetch_chunk(s3_ctx *c, s3_stream *s)
{
    int64_t last = s->pos + c->read_chunk_bytes - 1;
    if (s->size >= 0 && last >= s->size)
        last = s->size - 1;
    char range[64], ifm[300];
    snprintf(range, sizeof range, "bytes=%lld-%lld", (long long)s->pos,
             (long long)last);
    snprintf(ifm, sizeof ifm, "\"%s\"", s->etag);
    sigv4_kv h[2] = {{"range", range}, {"if-match", ifm}};
    size_t nh = *s->etag ? 2 : 1;
    int rc = SKIPPR_RETRY;
    resp r = {0};
    memset(&r, 0, sizeof r);
    for (int a = 0; a < c->max_attempts && rc == SKIPPR_RETRY; a++) {
        if (a) {
            skippr_buf_free(&r.body);
            s3_backoff(c, a);
        }
        rc = s3_request(c, "GET", s->key, NULL, 0, NULL, 0, h, nh, &r);
        if (rc == SKIPPR_OK && r.status == 412) {
            skippr_buf_free(&r.body);
            return changed_while_read(c, s);
        }
        rc = s3_verdict(c, rc, &r, "get", s->key);
        if (rc == SKIPPR_OK &&
            !total_is_listed(c, s, range_total(r.content_range))) {
            skippr_buf_free(&r.body);
            return SKIPPR_FATAL;
        }
        /* A short body (connection cut) keeps what arrived: retry the rest
         * from where it stopped, on the next call. */
        if (rc == SKIPPR_OK && r.body.len == 0 && s->pos <= last) {
            LOG(c, SKIPPR_LOG_WARN, "get s3://%s/%s: empty answer; retrying",
                c->bucket, s->key);
            rc = SKIPPR_RETRY;
        }
    }
    if (rc) {
        if (rc == SKIPPR_RETRY) {
            char what[64];
            snprintf(what, sizeof what, "get at byte %lld",
                     (long long)s->pos);
            s3_give_up(c, what, s->key, &r);
        }
        skippr_buf_free(&r.body);
        return SKIPPR_FATAL;
    }
    skippr_buf_free(&s->chunk);
    s->chunk = r.body;
    s->chunk_off = 0;
    return SKIPPR_OK;
}

int src_read(void *ctx, void *stream, void *out, size_t cap,
                    size_t *n_out)
{
    s3_ctx *c = ctx;
    s3_stream *s = stream;
    *n_out = 0;
    if (s->ahead) {
        /* Wait for the chunk fetched ahead; if it failed, read directly. */
        prefetcher *pf = c->pf;
        pf_item *it = s->ahead;
        pthread_mutex_lock(&pf->mu);
        while (it->state != PF_FINISHED)
            pthread_cond_wait(&pf->cv, &pf->mu);
        pthread_mutex_unlock(&pf->mu);
        if (it->ok &&
            !total_is_listed(c, s, range_total(it->r.content_range))) {
            s3_pf_release(c, it);
            s->ahead = NULL;
            return SKIPPR_FATAL;
        }
        if (it->ok) {
            skippr_buf_free(&s->chunk);
            s->chunk = it->r.body;
            memset(&it->r.body, 0, sizeof it->r.body);
            s->chunk_off = 0;
        }
        s3_pf_release(c, it);
        s->ahead = NULL;
    }
    if (s->chunk_off == s->chunk.len) {
        if (s->size == 0 && !s->size_checked) {
            int rc = check_empty(c, s);
            if (rc)
                return rc;
        }
        if (s->size >= 0 && s->pos >= s->size)
            return SKIPPR_OK; /* end of unit */
        int rc = fetch_chunk(c, s);
        if (rc)
            return rc;
    }
    size_t n = s->chunk.len - s->chunk_off;
    if (n > cap)
        n = cap;
    memcpy(out, s->chunk.data + s->chunk_off, n);
    s->chunk_off += n;
    s->pos += (int64_t)n;
    *n_out = n;
    c->host->counter_add(c->host, "bytes_read", (int64_t)n);
    return SKIPPR_OK;
}

void src_close(void *ctx, void *stream)
{
    s3_stream *s = stream;
    if (!s)
        return;
    if (s->ahead)
        s3_pf_release(ctx, s->ahead);
    s3_pf_give(ctx, &s->chunk);
    free(s->key);
    free(s->etag);
    free(s);
}
