/* An object being written (s3_obj, its parts) and how an object already
 * at its key is settled: ours (an earlier attempt landed), another's
 * (fatal), or replaced only by If-Match on what was seen. upload.c sends
 * its requests; sink.c and grow.c hold the handles. */
#ifndef SK_S3_OBJECT_H
#define SK_S3_OBJECT_H

#include <stddef.h>
#include <stdint.h>

#include "ctx.h"
#include "settle.h"
#include "sigv4.h"

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

void s3_obj_free(s3_obj *o);

/* Headers every written object carries. */
size_t s3_object_headers(s3_ctx *c, s3_obj *o, sigv4_kv *h);

/* The full key of info's object (prefix and key). Caller frees; NULL on
 * allocation failure. */
char *s3_full_key(const s3_ctx *c, const skippr_object_info *info);

/* A new handle for info's object; grown: a growing object, whose size and
 * CRC are not known yet. NULL on allocation failure. */
s3_obj *s3_obj_new(s3_ctx *c, const skippr_object_info *info, int grown);

/* What a HEAD found that is not ours, for a log line. Static text. */
const char *s3_found_text(s3_found found);

/* The final request of o answered 412 (or its upload is gone): an object
 * is already there (with If-Match: not the one we meant to replace). It
 * is ours when an earlier attempt succeeded but its answer was lost, or
 * when ours is becoming visible (looked at again for a while). Another
 * slice's object where no replace was meant was written by someone else:
 * fatal. Else, with can_replace (the request can be sent again), o
 * replaces it with If-Match on the ETag just seen (replace_now), never
 * blindly; without, the engine's next attempt checks again. */
int s3_settle_existing(s3_ctx *c, s3_obj *o, int can_replace);

/* The condition of o's final request, into h: If-Match on the ETag of
 * the object it replaces, else If-None-Match: *. Returns 0 or 1. */
size_t s3_condition(const s3_obj *o, sigv4_kv *h);

/* Judge the answer to a conditional final request. Sets *settled when a
 * 412 was resolved (the object is there, or a conflict is fatal). */
int s3_conditional_verdict(s3_ctx *c, s3_obj *o, int rc, resp *r,
                        const char *what, int *settled);

#endif
