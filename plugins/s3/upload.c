/* The requests that write an object: see upload.h. */
#include "upload.h"

#include <libxml/parser.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "answer.h"
#include "request.h"

int s3_abort_orphans(s3_ctx *c, s3_obj *o)
{
    sigv4_kv q[] = {{"uploads", ""}, {"prefix", o->key}};
    resp r = {0};
    int rc = s3_request(c, "GET", NULL, q, 2, NULL, 0, NULL, 0, &r);
    if (rc == SKIPPR_OK && r.status == 501) {
        /* Some S3-compatible servers cannot list uploads. */
        LOG(c, SKIPPR_LOG_DEBUG, "list uploads: not implemented by the "
            "server; unfinished uploads cannot be aborted (set an "
            "AbortIncompleteMultipartUpload lifecycle rule)");
        skippr_buf_free(&r.body);
        return SKIPPR_OK;
    }
    rc = s3_verdict(c, rc, &r, "list uploads", o->key);
    if (rc) {
        skippr_buf_free(&r.body);
        return rc;
    }
    xmlDoc *doc = xmlReadMemory(skippr_buf_cstr(&r.body), (int)r.body.len,
                                NULL, NULL, XML_PARSE_NONET | XML_PARSE_NOBLANKS);
    skippr_buf_free(&r.body);
    xmlNode *root = doc ? xmlDocGetRootElement(doc) : NULL;
    for (xmlNode *n = root ? root->children : NULL; n && !rc; n = n->next) {
        if (n->type != XML_ELEMENT_NODE ||
            strcmp((const char *)n->name, "Upload") != 0)
            continue;
        char key[2048], id[1024];
        s3_child_text(n, "Key", key, sizeof key);
        s3_child_text(n, "UploadId", id, sizeof id);
        if (strcmp(key, o->key) != 0)
            continue;
        sigv4_kv dq[] = {{"uploadId", id}};
        resp d = {0};
        /* A failed abort leaves storage behind, not wrong data: warn. */
        if (s3_verdict(c, s3_request(c, "DELETE", o->key, dq, 1, NULL, 0, NULL, 0,
                               &d), &d, "abort orphaned upload",
                    o->key) == SKIPPR_OK)
            LOG(c, SKIPPR_LOG_INFO, "aborted an unfinished upload of "
                "s3://%s/%s left by an earlier attempt", c->bucket, o->key);
        skippr_buf_free(&d.body);
    }
    if (doc)
        xmlFreeDoc(doc);
    return rc;
}

int s3_start_upload(s3_ctx *c, s3_obj *o)
{
    if (*o->upload_id)
        return SKIPPR_OK;
    int rc = s3_abort_orphans(c, o);
    if (rc)
        return rc;
    sigv4_kv q[] = {{"uploads", ""}};
    sigv4_kv h[10];
    size_t nh = s3_object_headers(c, o, h);
    if (*o->crc_b64 || o->part_sums) {
        /* Parts carry their CRC32C; Complete, the whole object's (a
         * growing object's is known by then). */
        h[nh++] = (sigv4_kv){"x-amz-checksum-algorithm", "CRC32C"};
        h[nh++] = (sigv4_kv){"x-amz-checksum-type", "FULL_OBJECT"};
    }
    resp r = {0};
    rc = s3_verdict(c, s3_request(c, "POST", o->key, q, 1, NULL, 0, h, nh, &r),
                    &r, "start multipart upload", o->key);
    if (!rc) {
        s3_xml_value(&r.body, "UploadId", o->upload_id, sizeof o->upload_id);
        if (!*o->upload_id) {
            LOG(c, SKIPPR_LOG_ERROR, "start multipart upload s3://%s/%s: "
                "no UploadId in the answer", c->bucket, o->key);
            rc = SKIPPR_RETRY;
        }
    }
    skippr_buf_free(&r.body);
    return rc;
}

int s3_answered(resp *r, long status, const char *want)
{
    char code[128];
    if (r->status != status)
        return 0;
    s3_error_code(&r->body, code, sizeof code);
    return strcmp(code, want) == 0;
}

void s3_add_part(s3_ctx *c, s3_obj *o, const char *etag,
              const char *crc, uint64_t size, const char *counter)
{
    part *pt = &o->parts[o->nparts++];
    snprintf(pt->etag, sizeof pt->etag, "%s", etag);
    snprintf(pt->crc, sizeof pt->crc, "%s", crc);
    pt->size = size;
    c->host->counter_add(c->host, counter, 1);
}

int s3_upload_part(s3_ctx *c, s3_obj *o, const void *p, size_t n)
{
    int rc = s3_start_upload(c, o);
    if (rc)
        return rc;
    if ((rc = skippr_array_grow(&o->parts, o->nparts, &o->cap,
                                sizeof *o->parts, 16)))
        return rc;
    char num[16], pcrc[16] = "", sum[32];
    snprintf(num, sizeof num, "%zu", o->nparts + 1);
    if (!p)
        p = "";
    /* A part of an upload with checksums carries its CRC32C (which the
     * Complete's FULL_OBJECT checksum needs); else what s3_body_check
     * picks. */
    sigv4_kv h[1] = {{"x-amz-checksum-crc32c", pcrc}};
    if (*o->crc_b64 || o->part_sums)
        s3_crc32c_b64(c->host->crc32c(0, p, n), pcrc);
    else
        h[0] = s3_body_check(c, p, n, sum);
    sigv4_kv q[] = {{"partNumber", num}, {"uploadId", o->upload_id}};
    resp r = {0};
    /* A part is written again in place (same number, same bytes), so any
     * failure is retried here first. */
    for (int attempt = 0; attempt < SINK_TRIES; attempt++) {
        if (attempt) {
            skippr_buf_free(&r.body);
            memset(&r, 0, sizeof r);
            if (c->host->should_stop(c->host))
                break;
            s3_backoff(c, attempt);
        }
        rc = s3_request(c, "PUT", o->key, q, 2, p, n, h, 1, &r);
        if (rc == SKIPPR_OK && s3_answered(&r, 404, "NoSuchUpload")) {
            /* Completed (a request of a crashed run that landed late) or
             * aborted: never sent to again; the engine's next attempt
             * asks object_check first. */
            LOG(c, SKIPPR_LOG_WARN, "upload part of s3://%s/%s: "
                "NoSuchUpload; the object is checked next", c->bucket,
                o->key);
            *o->upload_id = '\0';
            o->nparts = 0;
            rc = SKIPPR_RETRY;
            break;
        }
        rc = s3_verdict(c, rc, &r, "upload part", o->key);
        if (rc != SKIPPR_RETRY)
            break;
    }
    if (!rc && !*r.etag) {
        LOG(c, SKIPPR_LOG_ERROR, "upload part of s3://%s/%s: no ETag",
            c->bucket, o->key);
        rc = SKIPPR_RETRY;
    }
    if (!rc)
        s3_add_part(c, o, r.etag, pcrc, n, "parts_uploaded");
    skippr_buf_free(&r.body);
    return rc;
}

/* The CompleteMultipartUpload body of o's parts into x (at most 16 MiB).
 * SKIPPR_OK, NOMEM or RANGE. */
static int complete_body(const s3_obj *o, buf *x)
{
    x->max = 1u << 24;
    int bad = skippr_buf_append(x, "<CompleteMultipartUpload>", 25);
    for (size_t i = 0; i < o->nparts && !bad; i++) {
        char line[320], sum[64] = "";
        if (*o->parts[i].crc)
            snprintf(sum, sizeof sum, "<ChecksumCRC32C>%s</ChecksumCRC32C>",
                     o->parts[i].crc);
        int ln = snprintf(line, sizeof line, "<Part><PartNumber>%zu"
                          "</PartNumber><ETag>\"%s\"</ETag>%s</Part>",
                          i + 1, o->parts[i].etag, sum);
        bad = skippr_buf_append(x, line, (size_t)ln);
    }
    return bad ? bad
               : skippr_buf_append(x, "</CompleteMultipartUpload>", 26);
}

/* The answers to a Complete that are no verdict on it: 400 BadDigest (a
 * grown object's part holds other bytes than this upload sent under its
 * number: a request of a crashed run that landed late; the engine's next
 * attempt uploads again every part past the recorded ones) and 404
 * NoSuchUpload (completed by an earlier attempt whose answer was lost,
 * or aborted: the object itself says which). 1 when r was one of them,
 * *rc its result. */
static int complete_special(s3_ctx *c, s3_obj *o, resp *r, int *settled,
                            int *rc)
{
    if (o->grown && s3_answered(r, 400, "BadDigest")) {
        LOG(c, SKIPPR_LOG_WARN, "complete upload s3://%s/%s: HTTP 400 "
            "BadDigest (a part holds other bytes than were sent); its "
            "unrecorded parts are uploaded again", c->bucket, o->key);
        s3_count_retry(c, 0, r->status);
        *rc = SKIPPR_RETRY;
        return 1;
    }
    if (s3_answered(r, 404, "NoSuchUpload")) {
        LOG(c, SKIPPR_LOG_WARN, "complete upload s3://%s/%s: "
            "NoSuchUpload; checking the object", c->bucket, o->key);
        *settled = 1;
        *rc = s3_settle_existing(c, o, 0); /* the upload is gone */
        return 1;
    }
    return 0;
}

/* S3 may answer a Complete 200 and put the failure in the body: 1 then. */
static int error_in_body(s3_ctx *c, const s3_obj *o, resp *r)
{
    char code[128];
    if (!s3_error_in_body(&r->body, code, sizeof code))
        return 0;
    LOG(c, SKIPPR_LOG_WARN, "complete upload s3://%s/%s: 200 with an "
        "error in the body (%s)", c->bucket, o->key, code);
    return 1;
}

int s3_complete_upload(s3_ctx *c, s3_obj *o, int *settled)
{
    buf x = {0};
    int rc = complete_body(o, &x);
    if (rc) {
        skippr_buf_free(&x);
        return rc;
    }
    sigv4_kv q[] = {{"uploadId", o->upload_id}};
    sigv4_kv ch[3];
    size_t base = 0;
    if (*o->crc_b64) {
        ch[base++] = (sigv4_kv){"x-amz-checksum-crc32c", o->crc_b64};
        ch[base++] = (sigv4_kv){"x-amz-checksum-type", "FULL_OBJECT"};
    }
    o->size = 0;
    for (size_t i = 0; i < o->nparts; i++)
        o->size += o->parts[i].size;
    rc = SKIPPR_RETRY;
    for (int attempt = 0; attempt < SINK_TRIES; attempt++) {
        if (attempt) {
            if (c->host->should_stop(c->host))
                break;
            s3_backoff(c, attempt);
        }
        size_t nch = base + s3_condition(o, &ch[base]);
        resp r = {0};
        rc = s3_request(c, "POST", o->key, q, 1, x.data, x.len, ch, nch, &r);
        if (rc == SKIPPR_OK && complete_special(c, o, &r, settled, &rc)) {
            skippr_buf_free(&r.body);
            break;
        }
        rc = s3_conditional_verdict(c, o, rc, &r, "complete upload",
                                    settled);
        if (o->replace_now) {
            o->replace_now = 0; /* again, If-Match what is there */
            *settled = 0;
            skippr_buf_free(&r.body);
            continue;
        }
        int refused = rc == SKIPPR_RETRY && !r.curl_error && r.status >= 500;
        if (!rc && !*settled && error_in_body(c, o, &r)) {
            rc = SKIPPR_RETRY;
            refused = 1;
        }
        skippr_buf_free(&r.body);
        if (rc != SKIPPR_RETRY || !refused)
            break;
    }
    skippr_buf_free(&x);
    return rc;
}

int s3_put_whole(s3_ctx *c, s3_obj *o, const void *p, size_t n)
{
    char md5[32];
    sigv4_kv hd[10];
    size_t nh = s3_object_headers(c, o, hd);
    /* The object's CRC32C, known from the engine, lets S3 check the
     * bytes; without it, their MD5. */
    if (*o->crc_b64) {
        hd[nh++] = (sigv4_kv){"x-amz-checksum-crc32c", o->crc_b64};
    } else {
        s3_md5_b64(p ? p : "", n, md5);
        hd[nh++] = (sigv4_kv){"content-md5", md5};
    }
    size_t base = nh;
    o->size = n;
    int rc = SKIPPR_RETRY;
    /* Twice at most: the second time If-Match what the first found. */
    for (int round = 0; round < 2; round++) {
        nh = base + s3_condition(o, &hd[base]);
        resp r = {0};
        int settled;
        rc = s3_conditional_verdict(c, o,
                                 s3_request(c, "PUT", o->key, NULL, 0,
                                            p ? p : "", n, hd, nh, &r),
                                 &r, "put", &settled);
        skippr_buf_free(&r.body);
        if (!o->replace_now)
            break;
        o->replace_now = 0;
    }
    return rc;
}
