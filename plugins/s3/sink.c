/* The sink: an object smaller than part_size is one PutObject, a larger
 * one a multipart upload of part_size parts, each part retried in place.
 * Growing objects (the engine's open slices, grow_*) are multipart uploads
 * whose parts the engine hands over as they fill: grow.c. The object and
 * its settling are object.c's; its requests upload.c's.
 * Every body carries its CRC32C (checksum_crc32c) or else its MD5; the PUT
 * or Complete carries If-None-Match: * so a retry after a lost answer
 * gets 412, and a HEAD then tells our own slice from someone else's.
 * object_check() compares the slice id and CRC kept in the metadata.
 *
 * Thread: one upload thread per instance (the engine gives each upload
 * thread its own instance).
 */

#include "sink.h"

#include <stdio.h>
#include <stdlib.h>

#include "object.h"
#include "request.h"
#include "upload.h"

int sink_open(void *ctx, const skippr_object_info *info, void **h)
{
    s3_obj *o = s3_obj_new(ctx, info, 0);
    if (!o)
        return SKIPPR_NOMEM;
    *h = o;
    return SKIPPR_OK;
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
            if ((rc = s3_upload_part(c, o, o->data.data, o->data.len)))
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
    s3_obj_free(o);
}

int sink_commit(void *ctx, void *h)
{
    s3_ctx *c = ctx;
    s3_obj *o = h;
    int rc;
    if (o->put_done) {
        rc = SKIPPR_OK; /* a grown object written whole by grow_write */
    } else if (!*o->upload_id) {
        rc = s3_put_whole(c, o, o->data.data, o->data.len);
    } else {
        rc = o->data.len ? s3_upload_part(c, o, o->data.data, o->data.len)
                       : SKIPPR_OK;
        if (!rc) {
            int settled = 0;
            rc = s3_complete_upload(c, o, &settled);
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
        s3_obj_free(o);
        return rc;
    }
    if (rc) {
        /* The engine will write the whole object again. */
        sink_abort(ctx, h);
        return rc;
    }
    c->host->counter_add(c->host, "objects_written", 1);
    s3_obj_free(o);
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
    char *key = s3_full_key(c, info);
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
        s3_found_text(found), c->replace_etag);
    c->replace_key = key;
    return SKIPPR_CHANGED;
}

