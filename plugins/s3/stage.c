/* Staging pieces (SKIPPR_SINK_STAGES): when the engine's disk budget
 * cannot hold the tails of growing objects, each tail becomes an object
 * of its own under staging_prefix, named by the growing object's slice id
 * and the tail's offset in it:
 *
 *     {staging_prefix}/{slice id}/{offset}-{tag} (16 hex digits each)
 *
 * The engine records each piece in its WAL and reads it back (ranged GETs)
 * into the object's next part; once the object is complete, every piece
 * of its slice is deleted (a listing of {staging_prefix}/{slice id}/).
 * A lifecycle rule that expires objects under staging_prefix after a few
 * days cleans up after a state folder that was lost (docs/CONFIG.md).
 *
 * Thread: the instance's own, as the rest of the sink.
 */
#include "s3.h"

#include <libxml/parser.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* GETs of a piece are at most this long (a response body's bound). */
#define STAGE_CHUNK ((size_t)8 << 20)

/* The key of info's piece at offset with tag, or (offset UINT64_MAX) the
 * folder of all its pieces, with the trailing slash. */
static void stage_key(const s3_ctx *c, const skippr_object_info *info,
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
    char key[1024], md5[32];
    stage_key(c, info, offset, tag, key, sizeof key);
    s3_md5_b64(p, n, md5);
    sigv4_kv h[2] = {{"content-md5", md5},
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
    stage_key(c, info, offset, tag, key, sizeof key);
    for (size_t at = 0; at < n;) {
        size_t k = n - at < STAGE_CHUNK ? n - at : STAGE_CHUNK;
        char range[64];
        snprintf(range, sizeof range, "bytes=%zu-%zu", at, at + k - 1);
        sigv4_kv h[1] = {{"range", range}};
        resp r = {0};
        int rc = s3_verdict(c, s3_request(c, "GET", key, NULL, 0, NULL, 0, h,
                                          1, &r),
                            &r, "read staged piece", key);
        if (!rc && r.body.n != k) {
            LOG(c, SKIPPR_LOG_ERROR, "read staged piece s3://%s/%s: %zu "
                "bytes where %zu were stored", c->bucket, key, r.body.n, k);
            rc = SKIPPR_CORRUPT;
        }
        if (!rc)
            memcpy((char *)buf + at, r.body.p, k);
        skippr_buf_free(&r.body);
        if (rc)
            return rc;
        at += k;
    }
    return SKIPPR_OK;
}

int sink_stage_clear(void *ctx, const skippr_object_info *info)
{
    s3_ctx *c = ctx;
    char folder[1024];
    stage_key(c, info, UINT64_MAX, 0, folder, sizeof folder);
    sigv4_kv q[] = {{"list-type", "2"}, {"prefix", folder}};
    resp r = {0};
    int rc = s3_verdict(c, s3_request(c, "GET", NULL, q, 2, NULL, 0, NULL, 0,
                                      &r),
                        &r, "list staged pieces", folder);
    if (rc) {
        skippr_buf_free(&r.body);
        return rc;
    }
    xmlDoc *doc = xmlReadMemory(r.body.p ? r.body.p : "", (int)r.body.n, NULL,
                                NULL, XML_PARSE_NONET | XML_PARSE_NOBLANKS);
    skippr_buf_free(&r.body);
    xmlNode *root = doc ? xmlDocGetRootElement(doc) : NULL;
    for (xmlNode *e = root ? root->children : NULL; e && !rc; e = e->next) {
        if (e->type != XML_ELEMENT_NODE ||
            strcmp((const char *)e->name, "Contents") != 0)
            continue;
        char key[1024];
        s3_child_text(e, "Key", key, sizeof key);
        if (strncmp(key, folder, strlen(folder)) != 0)
            continue;
        resp d = {0};
        rc = s3_verdict(c, s3_request(c, "DELETE", key, NULL, 0, NULL, 0,
                                      NULL, 0, &d),
                        &d, "delete staged piece", key);
        skippr_buf_free(&d.body);
        if (!rc)
            c->host->counter_add(c->host, "pieces_deleted", 1);
    }
    if (doc)
        xmlFreeDoc(doc);
    return rc;
}
