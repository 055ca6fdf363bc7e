/* An object being written and the settling of what is at its key: see
 * object.h. */
#include "object.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "request.h"

void s3_obj_free(s3_obj *o)
{
    skippr_buf_free(&o->data);
    free(o->parts);
    free(o->key);
    free(o);
}

size_t s3_object_headers(s3_ctx *c, s3_obj *o, sigv4_kv *h)
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

char *s3_full_key(const s3_ctx *c, const skippr_object_info *info)
{
    size_t pl = strlen(c->prefix);
    size_t kl = pl + 1 + strlen(info->key) + 1;
    char *key = malloc(kl);
    if (key)
        snprintf(key, kl, "%s%s%s", c->prefix,
                 pl && c->prefix[pl - 1] != '/' ? "/" : "", info->key);
    return key;
}

s3_obj *s3_obj_new(s3_ctx *c, const skippr_object_info *info, int grown)
{
    s3_obj *o = calloc(1, sizeof *o);
    if (!o || !(o->key = s3_full_key(c, info))) {
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

const char *s3_found_text(s3_found found)
{
    return found == S3_FOUND_BARE    ? "an object without skippr's metadata"
           : found == S3_FOUND_STALE ? "our slice id with other bytes"
                                     : "another slice's object";
}

/* What o, once written, is: for a HEAD to tell it from others. */
static s3_expect s3_expect_of(const s3_obj *o)
{
    return (s3_expect){o->slice, o->crc, o->crc_b64,
                       o->size ? o->size : UINT64_MAX};
}

int s3_settle_existing(s3_ctx *c, s3_obj *o, int can_replace)
{
    s3_expect want = s3_expect_of(o);
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
        s3_found_text(found),
        now ? "replacing it only if still the same (If-Match)"
            : "checked again before it is replaced (by If-Match)");
    if (now) {
        snprintf(o->if_match, sizeof o->if_match, "\"%s\"", etag);
        o->replace_now = 1;
    }
    return SKIPPR_RETRY;
}

size_t s3_condition(const s3_obj *o, sigv4_kv *h)
{
    if (!o->conditional)
        return 0;
    *h = *o->if_match ? (sigv4_kv){"if-match", o->if_match}
                      : (sigv4_kv){"if-none-match", "*"};
    return 1;
}

int s3_conditional_verdict(s3_ctx *c, s3_obj *o, int rc, resp *r,
                        const char *what, int *settled)
{
    *settled = 0;
    if (rc == SKIPPR_OK && o->conditional && r->status == 412) {
        *settled = 1;
        return s3_settle_existing(c, o, 1);
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
