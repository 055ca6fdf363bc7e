/* Telling the sink's own objects from others. Every object skippr writes
 * carries its slice id (x-amz-meta-skippr-slice) and, when known at its
 * start, its CRC32C (x-amz-meta-skippr-crc32c); a grown object's whole
 * CRC32C is S3's own full-object checksum, which HEAD gives with
 * x-amz-checksum-mode: ENABLED. An object is ours only when the slice id
 * and the whole object's checksum (else, where no checksum is kept, its
 * size) match. One that is there without skippr's metadata may be ours
 * becoming visible (a Complete carried out late; a store that writes
 * bytes before metadata): it is looked at again before anything is
 * decided, and the caller never replaces an object it has not identified
 * except with If-Match on the ETag it saw.
 *
 * Thread: the instance's upload thread.
 */
#include "request.h"
#include "settle.h"

#include <stdlib.h>
#include <string.h>

/* Looks at a bare object: the retry waits between them (s3_backoff),
 * about 3 s in all. */
#define BARE_CHECKS 5

static s3_found compare(const resp *r, const s3_expect *want)
{
    if (!*r->meta_slice)
        return S3_FOUND_BARE;
    if (strcmp(r->meta_slice, want->slice) != 0)
        return S3_FOUND_FOREIGN;
    if (*r->meta_crc && *want->crc_hex)
        return strcmp(r->meta_crc, want->crc_hex) == 0 ? S3_FOUND_OURS
                                                        : S3_FOUND_STALE;
    /* A composite checksum ("...-N") is not the whole object's. */
    if (*r->checksum && !strchr(r->checksum, '-') && *want->crc_b64)
        return strcmp(r->checksum, want->crc_b64) == 0 ? S3_FOUND_OURS
                                                        : S3_FOUND_STALE;
    if (want->size != UINT64_MAX)
        return strtoull(r->content_length, NULL, 10) == want->size
                   ? S3_FOUND_OURS
                   : S3_FOUND_STALE;
    return S3_FOUND_OURS; /* nothing more to compare than the slice id */
}

int s3_head_found(s3_ctx *c, const char *key, const s3_expect *want,
                  s3_found *found, char *etag, size_t etag_cap)
{
    sigv4_kv h[] = {{"x-amz-checksum-mode", "ENABLED"}};
    resp r = {0};
    int rc = s3_request(c, "HEAD", key, NULL, 0, NULL, 0, h, 1, &r);
    if (rc == SKIPPR_OK && r.status == 404) {
        skippr_buf_free(&r.body);
        *found = S3_FOUND_NONE;
        return SKIPPR_OK;
    }
    rc = s3_verdict(c, rc, &r, "head", key);
    skippr_buf_free(&r.body);
    if (rc)
        return rc;
    snprintf(etag, etag_cap, "%s", r.etag);
    *found = compare(&r, want);
    return SKIPPR_OK;
}

int s3_head_settled(s3_ctx *c, const char *key, const s3_expect *want,
                    s3_found *found, char *etag, size_t etag_cap)
{
    for (int i = 0;; i++) {
        int rc = s3_head_found(c, key, want, found, etag, etag_cap);
        if (rc || *found != S3_FOUND_BARE || i + 1 == BARE_CHECKS ||
            c->host->should_stop(c->host))
            return rc;
        LOG(c, SKIPPR_LOG_INFO, "s3://%s/%s is there without skippr's "
            "metadata (not yet settled, or not ours); looking again",
            c->bucket, key);
        s3_backoff(c, i + 1);
    }
}
