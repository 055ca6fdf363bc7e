/* Staging pieces (SKIPPR_SINK_STAGES): when the engine's disk budget
 * cannot hold the tails of growing objects, each tail becomes an object
 * of its own under staging_prefix, named by the growing object's slice id
 * and the tail's offset in it:
 *
 *     {staging_prefix}/{slice id}/{offset}-{tag} (16 hex digits each)
 *
 * The engine records each piece in its WAL; a piece of 5 MiB or more
 * becomes a part of the object by UploadPartCopy (sink.c,
 * sink_stage_copy), a smaller one is read back (ranged GETs) into the
 * object's next part; once the object is complete, every piece
 * of its slice is deleted (a listing of {staging_prefix}/{slice id}/).
 * A lifecycle rule that expires objects under staging_prefix after a few
 * days cleans up after a state folder that was lost (docs/CONFIG.md).
 *
 * Thread: the instance's own, as the rest of the sink.
 */
#include "list.h"
#include "request.h"
#include "stage.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* GETs of a piece are at most this long (a response body's bound). */
#define STAGE_CHUNK ((size_t)8 << 20)

/* The key of info's piece at offset with tag, or (offset UINT64_MAX) the
 * folder of all its pieces, with the trailing slash. */
void s3_stage_key(const s3_ctx *c, const skippr_object_info *info,
                  uint64_t offset, uint64_t tag, char *out, size_t cap)
{
    size_t pl = strlen(c->staging_prefix);
    const char *sep = pl && c->staging_prefix[pl - 1] != '/' ? "/" : "";
    if (offset == UINT64_MAX)
        snprintf(out, cap, "%s%s%s/", c->staging_prefix, sep, info->slice_id);
    else
        snprintf(out, cap, "%s%s%s/%016" PRIx64 "-%016" PRIx64,
                 c->staging_prefix, sep, info->slice_id, offset, tag);
}

int sink_stage_put(void *ctx, const skippr_object_info *info,
                   uint64_t offset, uint64_t tag, const void *p, size_t n)
{
    s3_ctx *c = ctx;
    char key[1024], sum[32];
    s3_stage_key(c, info, offset, tag, key, sizeof key);
    sigv4_kv h[2] = {s3_body_check(c, p, n, sum),
                     {"content-type", "application/octet-stream"}};
    resp r = {0};
    int rc = s3_verdict(c, s3_request(c, "PUT", key, NULL, 0, p, n, h, 2, &r),
                        &r, "stage", key);
    skippr_buf_free(&r.body);
    if (!rc)
        c->host->counter_add(c->host, "pieces_staged", 1);
    return rc;
}

int sink_stage_get(void *ctx, const skippr_object_info *info,
                   uint64_t offset, uint64_t tag, void *buf, size_t n)
{
    s3_ctx *c = ctx;
    char key[1024];
    s3_stage_key(c, info, offset, tag, key, sizeof key);
    for (size_t at = 0; at < n;) {
        size_t k = n - at < STAGE_CHUNK ? n - at : STAGE_CHUNK;
        char range[64];
        snprintf(range, sizeof range, "bytes=%zu-%zu", at, at + k - 1);
        sigv4_kv h[1] = {{"range", range}};
        resp r = {0};
        int rc = s3_request(c, "GET", key, NULL, 0, NULL, 0, h, 1, &r);
        if (rc == SKIPPR_OK && r.status == 404) {
            skippr_buf_free(&r.body);
            return SKIPPR_NOENT;
        }
        rc = s3_verdict(c, rc, &r, "read staged piece", key);
        if (!rc && r.body.len != k) {
            LOG(c, SKIPPR_LOG_ERROR, "read staged piece s3://%s/%s: %zu "
                "bytes where %zu were stored", c->bucket, key, r.body.len, k);
            rc = SKIPPR_CORRUPT;
        }
        if (!rc)
            memcpy((char *)buf + at, r.body.data, k);
        skippr_buf_free(&r.body);
        if (rc)
            return rc;
        at += k;
    }
    return SKIPPR_OK;
}

/* Pieces are deleted in DeleteObjects batches of up to this many keys
 * (S3's limit per request). */
#define DELETE_BATCH 1000

/* The pieces listed so far and not yet deleted: a DeleteObjects body. */
typedef struct {
    s3_ctx *c;
    skippr_buf body;
    size_t nkeys;
    int rc;
} clear_walk;

/* Append s to b with XML's five special characters escaped. */
static int put_xml_text(skippr_buf *b, const char *s)
{
    int rc = SKIPPR_OK;
    for (const char *p = s; *p && !rc; p++) {
        const char *e = *p == '&' ? "&amp;" : *p == '<' ? "&lt;"
                      : *p == '>' ? "&gt;" : *p == '"' ? "&quot;"
                      : *p == '\'' ? "&apos;" : NULL;
        rc = e ? skippr_buf_append(b, e, strlen(e)) : skippr_buf_append(b, p, 1);
    }
    return rc;
}

/* Send the batch in w (if any): one POST ?delete, quiet, so the answer
 * lists only the keys that failed; any such key makes it RETRY. */
static int delete_batch(clear_walk *w)
{
    static const char tail[] = "</Delete>";
    if (!w->nkeys)
        return SKIPPR_OK;
    int rc = skippr_buf_append(&w->body, tail, sizeof tail - 1);
    if (rc)
        return rc;
    char md5[32];
    s3_md5_b64(w->body.data, w->body.len, md5);
    sigv4_kv q[] = {{"delete", ""}};
    sigv4_kv h[] = {{"content-md5", md5},
                    {"content-type", "application/xml"}};
    resp r = {0};
    rc = s3_verdict(w->c, s3_request(w->c, "POST", NULL, q, 1, w->body.data,
                                     w->body.len, h, 2, &r),
                    &r, "delete staged pieces", "");
    char code[128];
    if (!rc && s3_error_in_body(&r.body, code, sizeof code)) {
        LOG(w->c, SKIPPR_LOG_WARN, "delete staged pieces in s3://%s: some "
            "were not deleted (%s)", w->c->bucket, *code ? code : "?");
        rc = SKIPPR_RETRY;
    }
    skippr_buf_free(&r.body);
    if (!rc)
        w->c->host->counter_add(w->c->host, "pieces_deleted",
                                (int64_t)w->nkeys);
    skippr_buf_free(&w->body);
    w->nkeys = 0;
    return rc;
}

/* A listed piece joins the batch, which goes once it is full. */
static int delete_piece(void *data, const skippr_unit *u)
{
    static const char head[] = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>"
                               "<Delete><Quiet>true</Quiet>";
    clear_walk *w = data;
    if (!w->nkeys)
        w->rc = skippr_buf_append(&w->body, head, sizeof head - 1);
    if (!w->rc)
        w->rc = skippr_buf_append(&w->body, "<Object><Key>", 13);
    if (!w->rc)
        w->rc = put_xml_text(&w->body, u->id);
    if (!w->rc)
        w->rc = skippr_buf_append(&w->body, "</Key></Object>", 15);
    if (!w->rc && ++w->nkeys == DELETE_BATCH)
        w->rc = delete_batch(w);
    return w->rc != SKIPPR_OK;
}

/* Every piece of info's slice goes, page after page of the listing, in
 * batches. */
int sink_stage_clear(void *ctx, const skippr_object_info *info)
{
    s3_ctx *c = ctx;
    char folder[1024];
    s3_stage_key(c, info, UINT64_MAX, 0, folder, sizeof folder);
    clear_walk w = {c, {0}, 0, SKIPPR_OK};
    /* A listing that failed (logged) is tried again by the engine: the
     * pieces are still there to find. */
    int rc = s3_list_serial(c, folder, NULL, delete_piece, &w);
    if (!rc && !w.rc)
        w.rc = delete_batch(&w);
    skippr_buf_free(&w.body);
    if (rc)
        return SKIPPR_RETRY;
    return w.rc;
}
