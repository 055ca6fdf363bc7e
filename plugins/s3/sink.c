/* The sink: an object smaller than part_size is one PutObject, a larger
 * one a multipart upload of part_size parts, each part retried in place.
 * Growing objects (the engine's open slices, grow_*) are multipart uploads
 * whose parts the engine hands over as they fill; see "growing objects"
 * below.
 * Every body carries its CRC32C (checksum_crc32c) or else its MD5; the PUT
 * or Complete carries If-None-Match: * so a retry after a lost answer
 * gets 412, and a HEAD then tells our own slice from someone else's.
 * object_check() compares the slice id and CRC kept in the metadata.
 *
 * Thread: one upload thread per instance (the engine gives each upload
 * thread its own instance).
 */
#include "list.h"
#include "request.h"
#include "settle.h"
#include "sink.h"
#include "stage.h"

#include <inttypes.h>
#include <libxml/parser.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct part {
    char etag[128];
    char crc[16]; /* base64 CRC32C of the part; "" when not sent */
    uint64_t size;
} part;

typedef struct s3_obj {
    char *key; /* prefix + object key */
    char slice[128];
    char crc[16];
    char crc_b64[16]; /* x-amz-checksum-crc32c of the whole object, or "" */
    char ctype[64];
    buf data;       /* current part (or the whole small object) */
    char upload_id[1024];
    part *parts;
    size_t nparts, cap;
    int conditional; /* the final request is conditional: If-Match
                      * if_match when set, else If-None-Match: * */
    char if_match[130]; /* quoted ETag of the object this one replaces */
    int replace_now; /* settle_existing chose If-Match: send again now */
    uint64_t size;   /* the whole object's bytes, once known */
    int part_sums;   /* parts carry their CRC32C (growing objects) */
    int grown;       /* a growing object: a failure keeps its upload */
    size_t noted;    /* parts told to the engine (grow_note) */
    int id_noted;    /* upload id told */
    int put_done;    /* a grown object's one write was its PutObject */
    /* A growing object opened after its slice was sealed: its size and
     * CRC32C as the engine computed them while framing (0: unknown). */
    uint64_t known_size;
    uint32_t known_crc;
} s3_obj;

static void obj_free(s3_obj *o)
{
    skippr_buf_free(&o->data);
    free(o->parts);
    free(o->key);
    free(o);
}

/* Headers every written object carries. */
static size_t object_headers(s3_ctx *c, s3_obj *o, sigv4_kv *h)
{
    size_t n = 0;
    h[n++] = (sigv4_kv){"x-amz-meta-skippr-slice", o->slice};
    if (*o->crc) /* a growing object's CRC is not known when it starts */
        h[n++] = (sigv4_kv){"x-amz-meta-skippr-crc32c", o->crc};
    h[n++] = (sigv4_kv){"content-type", o->ctype};
    if (c->storage_class)
        h[n++] = (sigv4_kv){"x-amz-storage-class", c->storage_class};
    if (c->sse)
        h[n++] = (sigv4_kv){"x-amz-server-side-encryption", c->sse};
    return n;
}

/* The full key of info's object (prefix and key). Caller frees; NULL on
 * allocation failure. */
static char *full_key(const s3_ctx *c, const skippr_object_info *info)
{
    size_t pl = strlen(c->prefix);
    size_t kl = pl + 1 + strlen(info->key) + 1;
    char *key = malloc(kl);
    if (key)
        snprintf(key, kl, "%s%s%s", c->prefix,
                 pl && c->prefix[pl - 1] != '/' ? "/" : "", info->key);
    return key;
}

/* A new handle for info's object; grown: a growing object, whose size and
 * CRC are not known yet. NULL on allocation failure. */
static s3_obj *obj_new(s3_ctx *c, const skippr_object_info *info, int grown)
{
    s3_obj *o = calloc(1, sizeof *o);
    if (!o || !(o->key = full_key(c, info))) {
        free(o);
        return NULL;
    }
    snprintf(o->slice, sizeof o->slice, "%s", info->slice_id);
    o->grown = grown;
    if (grown) {
        o->part_sums = s3_checksums(c);
        o->known_size = info->size;
        o->known_crc = info->crc32c;
    } else
        snprintf(o->crc, sizeof o->crc, "%08x", info->crc32c);
    if (!grown && s3_checksums(c))
        s3_crc32c_b64(info->crc32c, o->crc_b64);
    snprintf(o->ctype, sizeof o->ctype, "%s",
             info->content_type ? info->content_type : "application/octet-stream");
    o->data.max = (size_t)c->part_size;
    o->conditional = c->conditional;
    if (c->replace_key && strcmp(c->replace_key, o->key) == 0 &&
        *c->replace_etag)
        snprintf(o->if_match, sizeof o->if_match, "\"%s\"", c->replace_etag);
    return o;
}

int sink_open(void *ctx, const skippr_object_info *info, void **h)
{
    s3_obj *o = obj_new(ctx, info, 0);
    if (!o)
        return SKIPPR_NOMEM;
    *h = o;
    return SKIPPR_OK;
}

/* What a HEAD found that is not ours, for a log line. Static text. */
static const char *found_text(s3_found found)
{
    return found == S3_FOUND_BARE    ? "an object without skippr's metadata"
           : found == S3_FOUND_STALE ? "our slice id with other bytes"
                                     : "another slice's object";
}

/* What o, once written, is: for a HEAD to tell it from others. */
static s3_expect expect_of(const s3_obj *o)
{
    return (s3_expect){o->slice, o->crc, o->crc_b64,
                       o->size ? o->size : UINT64_MAX};
}

/* The final request of o answered 412 (or its upload is gone): an object
 * is already there (with If-Match: not the one we meant to replace). It
 * is ours when an earlier attempt succeeded but its answer was lost, or
 * when ours is becoming visible (looked at again for a while). Another
 * slice's object where no replace was meant was written by someone else:
 * fatal. Else, with can_replace (the request can be sent again), o
 * replaces it with If-Match on the ETag just seen (replace_now), never
 * blindly; without, the engine's next attempt checks again. */
static int settle_existing(s3_ctx *c, s3_obj *o, int can_replace)
{
    s3_expect want = expect_of(o);
    s3_found found;
    char etag[128];
    int rc = s3_head_settled(c, o->key, &want, &found, etag, sizeof etag);
    if (rc)
        return rc;
    if (found == S3_FOUND_OURS) {
        LOG(c, SKIPPR_LOG_INFO, "s3://%s/%s is already written (an earlier "
            "attempt succeeded); not replaced", c->bucket, o->key);
        c->host->counter_add(c->host, "objects_already_there", 1);
        return SKIPPR_OK;
    }
    if (found == S3_FOUND_FOREIGN && !*o->if_match) {
        LOG(c, SKIPPR_LOG_ERROR, "s3://%s/%s was written by another writer "
            "while skippr wrote slice %s; not replaced", c->bucket, o->key,
            o->slice);
        return SKIPPR_FATAL;
    }
    if (found == S3_FOUND_NONE)
        return SKIPPR_RETRY; /* gone again */
    int now = can_replace && *etag;
    LOG(c, SKIPPR_LOG_WARN, "s3://%s/%s holds %s; %s", c->bucket, o->key,
        found_text(found),
        now ? "replacing it only if still the same (If-Match)"
            : "checked again before it is replaced (by If-Match)");
    if (now) {
        snprintf(o->if_match, sizeof o->if_match, "\"%s\"", etag);
        o->replace_now = 1;
    }
    return SKIPPR_RETRY;
}

/* The condition of o's final request, into h: If-Match on the ETag of
 * the object it replaces, else If-None-Match: *. Returns 0 or 1. */
static size_t condition(const s3_obj *o, sigv4_kv *h)
{
    if (!o->conditional)
        return 0;
    *h = *o->if_match ? (sigv4_kv){"if-match", o->if_match}
                      : (sigv4_kv){"if-none-match", "*"};
    return 1;
}

/* Judge the answer to a conditional final request. Sets *settled when a
 * 412 was resolved (the object is there, or a conflict is fatal). */
static int conditional_verdict(s3_ctx *c, s3_obj *o, int rc, resp *r,
                               const char *what, int *settled)
{
    *settled = 0;
    if (rc == SKIPPR_OK && o->conditional && r->status == 412) {
        *settled = 1;
        return settle_existing(c, o, 1);
    }
    if (rc == SKIPPR_OK && o->conditional && *o->if_match &&
        r->status == 404) {
        /* The object meant to be replaced is gone: look again. */
        LOG(c, SKIPPR_LOG_WARN, "%s s3://%s/%s: the object it replaces is "
            "gone; checking again", what, c->bucket, o->key);
        return SKIPPR_RETRY;
    }
    if (rc == SKIPPR_OK && o->conditional && r->status == 501) {
        LOG(c, SKIPPR_LOG_INFO, "%s s3://%s/%s: the server does not support "
            "If-None-Match; writing unconditionally from now on", what,
            c->bucket, o->key);
        c->conditional = 0;
        return SKIPPR_RETRY;
    }
    return s3_verdict(c, rc, r, what, o->key);
}

/* Abort unfinished multipart uploads of this key (a crashed attempt). */
static int abort_orphans(s3_ctx *c, s3_obj *o)
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

/* Tries of one part or one Complete within a write, before the engine's
 * own retry writes the whole object again: a multipart object is several
 * requests, and one failure among them should not cost all of them. */
#define SINK_TRIES 3

/* Start o's multipart upload unless it has one. */
static int start_upload(s3_ctx *c, s3_obj *o)
{
    if (*o->upload_id)
        return SKIPPR_OK;
    int rc = abort_orphans(c, o);
    if (rc)
        return rc;
    sigv4_kv q[] = {{"uploads", ""}};
    sigv4_kv h[10];
    size_t nh = object_headers(c, o, h);
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

/* Non-zero when r is S3's error answer with this HTTP status and code
 * (400 BadDigest: a checksum refused; 404 NoSuchUpload: an upload id it
 * does not know). */
static int s3_answered(resp *r, long status, const char *want)
{
    char code[128];
    if (r->status != status)
        return 0;
    s3_error_code(&r->body, code, sizeof code);
    return strcmp(code, want) == 0;
}

/* o's next part is in the upload now: its ETag, base64 CRC32C ("" when
 * not known) and size (o->parts has room for it). */
static void add_part(s3_ctx *c, s3_obj *o, const char *etag,
                     const char *crc, uint64_t size, const char *counter)
{
    part *pt = &o->parts[o->nparts++];
    snprintf(pt->etag, sizeof pt->etag, "%s", etag);
    snprintf(pt->crc, sizeof pt->crc, "%s", crc);
    pt->size = size;
    c->host->counter_add(c->host, counter, 1);
}

/* Upload p[0..n) as o's next part, starting the upload first if need
 * be. */
static int upload_part(s3_ctx *c, s3_obj *o, const void *p, size_t n)
{
    int rc = start_upload(c, o);
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
        add_part(c, o, r.etag, pcrc, n, "parts_uploaded");
    skippr_buf_free(&r.body);
    return rc;
}

int sink_write(void *ctx, void *h, const void *p, size_t n)
{
    s3_ctx *c = ctx;
    s3_obj *o = h;
    const char *d = p;
    while (n > 0) {
        size_t room = (size_t)c->part_size - o->data.len;
        size_t k = n < room ? n : room;
        int rc = skippr_buf_append(&o->data, d, k);
        if (rc)
            return rc; /* NOMEM: part_size bytes did not fit */
        d += k;
        n -= k;
        if (o->data.len == (size_t)c->part_size) {
            if ((rc = upload_part(c, o, o->data.data, o->data.len)))
                return rc;
            o->data.len = 0;
        }
    }
    return SKIPPR_OK;
}

void sink_abort(void *ctx, void *h)
{
    s3_ctx *c = ctx;
    s3_obj *o = h;
    if (*o->upload_id) {
        sigv4_kv q[] = {{"uploadId", o->upload_id}};
        resp r = {0};
        int rc = s3_request(c, "DELETE", o->key, q, 1, NULL, 0, NULL, 0, &r);
        if (rc == SKIPPR_OK && r.status == 404)
            /* NoSuchUpload: it completed (the answer was lost) or is
             * already gone; the retry settles which. */
            LOG(c, SKIPPR_LOG_DEBUG, "abort upload s3://%s/%s: no such "
                "upload", c->bucket, o->key);
        else
            s3_verdict(c, rc, &r, "abort upload", o->key);
        skippr_buf_free(&r.body);
    }
    obj_free(o);
}

/* CompleteMultipartUpload of o's parts. A Complete the server says failed
 * (5xx, or 200 with an <Error> body, which S3 asks to retry) is sent again
 * up to SINK_TRIES times; a transport failure, whose request may have been
 * carried out, goes back to the engine, which first asks object_check.
 * Sets *settled as conditional_verdict does. */
static int complete_upload(s3_ctx *c, s3_obj *o, int *settled)
{
    buf x = {0};
    x.max = 1u << 24;
    int bad = skippr_buf_append(&x, "<CompleteMultipartUpload>", 25);
    for (size_t i = 0; i < o->nparts && !bad; i++) {
        char line[320], sum[64] = "";
        if (*o->parts[i].crc)
            snprintf(sum, sizeof sum, "<ChecksumCRC32C>%s</ChecksumCRC32C>",
                     o->parts[i].crc);
        int ln = snprintf(line, sizeof line, "<Part><PartNumber>%zu"
                          "</PartNumber><ETag>\"%s\"</ETag>%s</Part>",
                          i + 1, o->parts[i].etag, sum);
        bad = skippr_buf_append(&x, line, (size_t)ln);
    }
    if (!bad)
        bad = skippr_buf_append(&x, "</CompleteMultipartUpload>", 26);
    if (bad) {
        skippr_buf_free(&x);
        return bad; /* NOMEM, or RANGE past 16 MiB of part list */
    }
    sigv4_kv q[] = {{"uploadId", o->upload_id}};
    sigv4_kv ch[3];
    size_t nch = 0;
    if (*o->crc_b64) {
        ch[nch++] = (sigv4_kv){"x-amz-checksum-crc32c", o->crc_b64};
        ch[nch++] = (sigv4_kv){"x-amz-checksum-type", "FULL_OBJECT"};
    }
    size_t base = nch;
    o->size = 0;
    for (size_t i = 0; i < o->nparts; i++)
        o->size += o->parts[i].size;
    int rc = SKIPPR_RETRY;
    for (int attempt = 0; attempt < SINK_TRIES; attempt++) {
        if (attempt) {
            if (c->host->should_stop(c->host))
                break;
            s3_backoff(c, attempt);
        }
        nch = base + condition(o, &ch[base]);
        resp r = {0};
        rc = s3_request(c, "POST", o->key, q, 1, x.data, x.len, ch, nch, &r);
        if (rc == SKIPPR_OK && o->grown && s3_answered(&r, 400, "BadDigest")) {
            /* A part holds other bytes than the ones this upload sent
             * under its number: a request of a crashed run that landed
             * late. The engine's next attempt uploads again every part
             * past the recorded ones (a recorded part that is wrong
             * keeps failing, and the slice stays for the next run). */
            LOG(c, SKIPPR_LOG_WARN, "complete upload s3://%s/%s: HTTP 400 "
                "BadDigest (a part holds other bytes than were sent); its "
                "unrecorded parts are uploaded again", c->bucket, o->key);
            s3_count_retry(c, 0, r.status);
            skippr_buf_free(&r.body);
            rc = SKIPPR_RETRY;
            break;
        }
        if (rc == SKIPPR_OK && s3_answered(&r, 404, "NoSuchUpload")) {
            /* Completed by an earlier attempt whose answer was lost, or
             * aborted: the object itself says which. */
            LOG(c, SKIPPR_LOG_WARN, "complete upload s3://%s/%s: "
                "NoSuchUpload; checking the object", c->bucket, o->key);
            skippr_buf_free(&r.body);
            *settled = 1;
            rc = settle_existing(c, o, 0); /* the upload is gone */
            break;
        }
        rc = conditional_verdict(c, o, rc, &r, "complete upload", settled);
        if (o->replace_now) {
            o->replace_now = 0; /* again, If-Match what is there */
            *settled = 0;
            skippr_buf_free(&r.body);
            continue;
        }
        int refused = rc == SKIPPR_RETRY && !r.curl_error && r.status >= 500;
        /* S3 may answer 200 and put the failure in the body. */
        if (!rc && !*settled && r.body.data && strstr((const char *)r.body.data, "<Error>")) {
            char code[128];
            s3_error_code(&r.body, code, sizeof code);
            LOG(c, SKIPPR_LOG_WARN, "complete upload s3://%s/%s: 200 with an "
                "error in the body (%s)", c->bucket, o->key, code);
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

/* o as one PutObject of p[0..n): with its MD5, CRC32C and metadata, and
 * If-None-Match (a 412 settled as conditional_verdict does). */
static int put_whole(s3_ctx *c, s3_obj *o, const void *p, size_t n)
{
    char md5[32];
    sigv4_kv hd[10];
    size_t nh = object_headers(c, o, hd);
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
        nh = base + condition(o, &hd[base]);
        resp r = {0};
        int settled;
        rc = conditional_verdict(c, o,
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

int sink_commit(void *ctx, void *h)
{
    s3_ctx *c = ctx;
    s3_obj *o = h;
    int rc;
    if (o->put_done) {
        rc = SKIPPR_OK; /* a grown object written whole by grow_write */
    } else if (!*o->upload_id) {
        rc = put_whole(c, o, o->data.data, o->data.len);
    } else {
        rc = o->data.len ? upload_part(c, o, o->data.data, o->data.len)
                       : SKIPPR_OK;
        if (!rc) {
            int settled = 0;
            rc = complete_upload(c, o, &settled);
            if (settled && rc == SKIPPR_OK) {
                /* Ours is already there: drop this upload's parts. */
                sink_abort(ctx, h);
                return SKIPPR_OK;
            }
        }
    }
    if (rc && o->grown) {
        /* Its parts are the only copy of their bytes: the upload stays
         * for the engine's next attempt, which asks object_check first. */
        obj_free(o);
        return rc;
    }
    if (rc) {
        /* The engine will write the whole object again. */
        sink_abort(ctx, h);
        return rc;
    }
    c->host->counter_add(c->host, "objects_written", 1);
    obj_free(o);
    return SKIPPR_OK;
}

/* object_check: SKIPPR_OK when the object at info's key is ours (slice
 * id, and checksum or size), SKIPPR_NOENT when there is none. Else
 * SKIPPR_CHANGED, and the engine's rewrite replaces what is there with
 * If-Match on the ETag seen (a bare object is looked at again first: it
 * may be ours becoming visible); a rewrite is never blind. */
int sink_check(void *ctx, const skippr_object_info *info)
{
    s3_ctx *c = ctx;
    char *key = full_key(c, info);
    if (!key)
        return SKIPPR_NOMEM;
    char crc[16], b64[16] = "";
    snprintf(crc, sizeof crc, "%08x", info->crc32c);
    if (s3_checksums(c))
        s3_crc32c_b64(info->crc32c, b64);
    s3_expect want = {info->slice_id, crc, b64, info->size};
    free(c->replace_key);
    c->replace_key = NULL;
    *c->replace_etag = '\0';
    s3_found found;
    int rc = s3_head_settled(c, key, &want, &found, c->replace_etag,
                             sizeof c->replace_etag);
    if (!rc && (found == S3_FOUND_OURS || found == S3_FOUND_NONE)) {
        free(key);
        return found == S3_FOUND_OURS ? SKIPPR_OK : SKIPPR_NOENT;
    }
    if (rc) {
        free(key);
        return rc;
    }
    LOG(c, SKIPPR_LOG_WARN, "s3://%s/%s holds %s; it is replaced only if "
        "still the same (If-Match %s)", c->bucket, key,
        found_text(found), c->replace_etag);
    c->replace_key = key;
    return SKIPPR_CHANGED;
}

/* ---- growing objects (SKIPPR_SINK_GROWS | SKIPPR_SINK_PARTS) ----------
 * An open slice is a multipart upload. Each grow_write() is one part,
 * uploaded from the engine's buffer as it stands (no copy); grow_note()
 * then tells the engine the upload id and each new part's number, size,
 * ETag and CRC32C ("U id" and "P number size etag crc" lines), which it
 * records with the slice's length and hands back to grow_open() after a
 * crash: the upload resumes from those notes, without ListParts (which
 * not every server has). Parts a crashed run uploaded past the recorded
 * ones are uploaded again under the same numbers, or left out of the
 * Complete, which drops them. A slice smaller than a part never starts an
 * upload: its one write, the whole object, is a PutObject at once (from
 * the engine's buffer; grow_commit() then checks its CRC).
 * A grown object's metadata holds its slice id but no CRC (not known when
 * the upload starts); object_check compares its size instead.
 */

/* Parse notes into o: the upload id and the parts, which must add up to
 * length. */
static int parse_notes(s3_ctx *c, s3_obj *o, const char *notes, size_t n,
                       uint64_t length)
{
    uint64_t sum = 0;
    const char *p = notes, *end = notes + n;
    while (p < end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        if (!nl)
            break;
        char line[1200];
        size_t ll = (size_t)(nl - p);
        if (ll >= sizeof line)
            break;
        memcpy(line, p, ll);
        line[ll] = '\0';
        p = nl + 1;
        if (line[0] == 'U' && line[1] == ' ') {
            if (ll - 2 >= sizeof o->upload_id)
                break;
            memcpy(o->upload_id, line + 2, ll - 1); /* and its NUL */
            o->nparts = 0; /* a new upload starts its parts again */
            continue;
        }
        size_t num;
        unsigned long long size;
        char etag[128], crc[16];
        if (sscanf(line, "P %zu %llu %127s %15s", &num, &size, etag, crc) !=
                4 ||
            num == 0 || num > o->nparts + 1)
            break;
        o->nparts = num - 1; /* a part uploaded again replaces it */
        if (skippr_array_grow(&o->parts, o->nparts, &o->cap,
                              sizeof *o->parts, 16))
            return SKIPPR_NOMEM;
        part *pt = &o->parts[o->nparts++];
        snprintf(pt->etag, sizeof pt->etag, "%s", etag);
        snprintf(pt->crc, sizeof pt->crc, "%s", strcmp(crc, "-") ? crc : "");
        pt->size = size;
    }
    for (size_t i = 0; i < o->nparts; i++)
        sum += o->parts[i].size;
    if (p != end || !*o->upload_id || sum != length) {
        LOG(c, SKIPPR_LOG_ERROR, "resume s3://%s/%s: the recorded parts "
            "(%zu, %llu bytes) do not make the %llu bytes recorded", c->bucket,
            o->key, o->nparts, (unsigned long long)sum,
            (unsigned long long)length);
        return SKIPPR_NOENT;
    }
    o->noted = o->nparts;
    o->id_noted = 1;
    return SKIPPR_OK;
}

int sink_grow_open(void *ctx, const skippr_object_info *info,
                   uint64_t length, const char *notes, size_t notes_len,
                   void **h)
{
    s3_ctx *c = ctx;
    s3_obj *o = obj_new(c, info, 1);
    if (!o)
        return SKIPPR_NOMEM;
    if (length > 0) {
        int rc = parse_notes(c, o, notes ? notes : "", notes_len, length);
        if (rc) {
            obj_free(o);
            return rc;
        }
    }
    *h = o;
    return SKIPPR_OK;
}

int sink_grow_write(void *ctx, void *h, const void *p, size_t n)
{
    s3_ctx *c = ctx;
    s3_obj *o = h;
    if (!*o->upload_id && n < (size_t)c->part_size) {
        /* Shorter than a part and no upload: the last write and the only
         * one, so the whole object, written now as one PutObject (from
         * the engine's buffer, no copy). The engine calls this only for a
         * sealed slice, so the object is complete, and its info then gave
         * the CRC32C the engine took of the records as it framed them:
         * sent as is, S3 checks the bytes against it, end to end, and
         * they are not read once more here. */
        uint32_t crc = o->known_size == n ? o->known_crc
                                          : c->host->crc32c(0, p, n);
        snprintf(o->crc, sizeof o->crc, "%08x", crc);
        if (o->part_sums)
            s3_crc32c_b64(crc, o->crc_b64);
        int rc = put_whole(c, o, p, n);
        o->put_done = rc == SKIPPR_OK;
        return rc;
    }
    return upload_part(c, o, p, n);
}

/* The server does not copy parts: the piece is read back and uploaded. */
static int copy_by_hand(s3_ctx *c, s3_obj *o, const skippr_object_info *info,
                        uint64_t offset, uint64_t tag, uint64_t len)
{
    if (len > ((uint64_t)5 << 30))
        return SKIPPR_RANGE; /* S3's largest part */
    char *p = malloc((size_t)len);
    if (!p)
        return SKIPPR_NOMEM;
    int rc = sink_stage_get(c, info, offset, tag, p, (size_t)len);
    if (!rc)
        rc = upload_part(c, o, p, (size_t)len);
    free(p);
    return rc;
}

/* UploadPartCopy of the whole piece (its range too, so that a shorter
 * piece fails rather than making a short part); the ETag and CRC32C are in
 * the answer's body, which may also be an error after a 200. */
int sink_stage_copy(void *ctx, void *h, const skippr_object_info *info,
                    uint64_t offset, uint64_t tag, uint64_t len)
{
    s3_ctx *c = ctx;
    s3_obj *o = h;
    if (c->no_copy)
        return copy_by_hand(c, o, info, offset, tag, len);
    int rc = start_upload(c, o);
    if (rc || (rc = skippr_array_grow(&o->parts, o->nparts, &o->cap,
                                      sizeof *o->parts, 16)))
        return rc;
    char key[1024], src[3200], range[64], num[16];
    s3_stage_key(c, info, offset, tag, key, sizeof key);
    int n = snprintf(src, sizeof src, "/%s/", c->bucket);
    if (n < 0 || (size_t)n >= sizeof src ||
        sigv4_uri_encode(key, 1, src + n, sizeof src - (size_t)n) < 0)
        return SKIPPR_RANGE;
    snprintf(range, sizeof range, "bytes=0-%" PRIu64, len - 1);
    snprintf(num, sizeof num, "%zu", o->nparts + 1);
    sigv4_kv q[] = {{"partNumber", num}, {"uploadId", o->upload_id}};
    sigv4_kv hd[] = {{"x-amz-copy-source", src},
                     {"x-amz-copy-source-range", range}};
    resp r = {0};
    for (int attempt = 0; attempt < SINK_TRIES; attempt++) {
        if (attempt) {
            skippr_buf_free(&r.body);
            memset(&r, 0, sizeof r);
            if (c->host->should_stop(c->host))
                break;
            s3_backoff(c, attempt);
        }
        rc = s3_request(c, "PUT", o->key, q, 2, NULL, 0, hd, 2, &r);
        if (rc == SKIPPR_OK && r.status == 501) {
            LOG(c, SKIPPR_LOG_WARN, "s3://%s: the server does not copy "
                "parts (UploadPartCopy: HTTP 501); staged pieces are read "
                "back and uploaded instead", c->bucket);
            skippr_buf_free(&r.body);
            c->no_copy = 1;
            return copy_by_hand(c, o, info, offset, tag, len);
        }
        rc = s3_verdict(c, rc, &r, "copy staged piece into", o->key);
        if (rc == SKIPPR_OK && r.body.data && strstr((const char *)r.body.data, "<Error>"))
            rc = SKIPPR_RETRY;
        if (rc != SKIPPR_RETRY)
            break;
    }
    char etag[128], crc[16];
    s3_xml_value(&r.body, "ETag", etag, sizeof etag);
    s3_xml_value(&r.body, "ChecksumCRC32C", crc, sizeof crc);
    if (!rc && !*etag) {
        LOG(c, SKIPPR_LOG_ERROR, "copy staged piece into s3://%s/%s: no "
            "ETag in the answer", c->bucket, o->key);
        rc = SKIPPR_RETRY;
    }
    if (!rc)
        add_part(c, o, etag, crc, len, "parts_copied");
    skippr_buf_free(&r.body);
    return rc;
}

int sink_grow_note(void *ctx, void *h, char *buf, size_t cap, size_t *len)
{
    (void)ctx;
    s3_obj *o = h;
    size_t n = 0;
    if (!o->id_noted && *o->upload_id) {
        int k = snprintf(buf, cap, "U %s\n", o->upload_id);
        if (k < 0 || (size_t)k >= cap)
            return SKIPPR_RANGE;
        n = (size_t)k;
        o->id_noted = 1;
    }
    for (; o->noted < o->nparts; o->noted++) {
        const part *pt = &o->parts[o->noted];
        int k = snprintf(buf + n, cap - n, "P %zu %llu %s %s\n", o->noted + 1,
                         (unsigned long long)pt->size, pt->etag,
                         *pt->crc ? pt->crc : "-");
        if (k < 0 || (size_t)k >= cap - n)
            return SKIPPR_RANGE;
        n += (size_t)k;
    }
    *len = n;
    return SKIPPR_OK;
}

/* Now the object's CRC32C is known: a PutObject carries it (and in its
 * metadata), a Complete declares it for the whole object (the upload
 * started as FULL_OBJECT). */
int sink_grow_commit(void *ctx, void *h, const skippr_object_info *info)
{
    s3_ctx *c = ctx;
    s3_obj *o = h;
    if (o->put_done && strtoul(o->crc, NULL, 16) != info->crc32c) {
        LOG(c, SKIPPR_LOG_ERROR, "s3://%s/%s: written with CRC32C %s, "
            "sealed as %08x", c->bucket, o->key, o->crc, info->crc32c);
        obj_free(o);
        return SKIPPR_CORRUPT;
    }
    if (!*o->upload_id)
        snprintf(o->crc, sizeof o->crc, "%08x", info->crc32c);
    if (o->part_sums)
        s3_crc32c_b64(info->crc32c, o->crc_b64);
    o->size = info->size;
    return sink_commit(c, h);
}

void sink_grow_close(void *ctx, void *h)
{
    (void)ctx;
    obj_free(h);
}

int sink_grow_discard(void *ctx, const skippr_object_info *info)
{
    s3_ctx *c = ctx;
    s3_obj o = {0};
    if (!(o.key = full_key(c, info)))
        return SKIPPR_NOMEM;
    int rc = abort_orphans(c, &o);
    free(o.key);
    return rc;
}

uint64_t sink_grow_part_bytes(void *ctx)
{
    return (uint64_t)((s3_ctx *)ctx)->part_size;
}
