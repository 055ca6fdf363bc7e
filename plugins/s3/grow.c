/* Growing objects (SKIPPR_SINK_GROWS | SKIPPR_SINK_PARTS).
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
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "object.h"
#include "request.h"
#include "sink.h"
#include "stage.h"
#include "upload.h"

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
    s3_obj *o = s3_obj_new(c, info, 1);
    if (!o)
        return SKIPPR_NOMEM;
    if (length > 0) {
        int rc = parse_notes(c, o, notes ? notes : "", notes_len, length);
        if (rc) {
            s3_obj_free(o);
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
        int rc = s3_put_whole(c, o, p, n);
        o->put_done = rc == SKIPPR_OK;
        return rc;
    }
    return s3_upload_part(c, o, p, n);
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
        rc = s3_upload_part(c, o, p, (size_t)len);
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
    int rc = s3_start_upload(c, o);
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
        char code[128];
        if (rc == SKIPPR_OK && s3_error_in_body(&r.body, code, sizeof code))
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
        s3_add_part(c, o, etag, crc, len, "parts_copied");
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
        s3_obj_free(o);
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
    s3_obj_free(h);
}

int sink_grow_discard(void *ctx, const skippr_object_info *info)
{
    s3_ctx *c = ctx;
    s3_obj o = {0};
    if (!(o.key = s3_full_key(c, info)))
        return SKIPPR_NOMEM;
    int rc = s3_abort_orphans(c, &o);
    free(o.key);
    return rc;
}

uint64_t sink_grow_part_bytes(void *ctx)
{
    return (uint64_t)((s3_ctx *)ctx)->part_size;
}
