/* settle.c: is the object at a key ours? (slice id, checksum, size) */
#ifndef SK_S3_SETTLE_H
#define SK_S3_SETTLE_H

#include <stddef.h>
#include <stdint.h>

#include "ctx.h"

typedef enum s3_found {
    S3_FOUND_NONE,    /* no object */
    S3_FOUND_OURS,    /* our slice id and our bytes (checksum or size) */
    S3_FOUND_BARE,    /* no skippr metadata: settling, or not ours */
    S3_FOUND_STALE,   /* our slice id, other bytes (a late or stale write) */
    S3_FOUND_FOREIGN  /* another slice's */
} s3_found;
/* What our object would be: slice id; its CRC32C as the metadata holds it
 * (8 hex digits, "" for a grown object, whose metadata has none) and as
 * S3's checksum gives it (base64, "" when not sent); size, UINT64_MAX
 * when not known. */
typedef struct s3_expect {
    const char *slice, *crc_hex, *crc_b64;
    uint64_t size;
} s3_expect;
/* HEAD key (with its checksum) and say what is there in *found, its ETag
 * in etag. SKIPPR_OK, or the request's failure. */
int s3_head_found(s3_ctx *c, const char *key, const s3_expect *want,
                  s3_found *found, char *etag, size_t etag_cap);
/* The same, looking again for about 3 s while the object is bare. */
int s3_head_settled(s3_ctx *c, const char *key, const s3_expect *want,
                    s3_found *found, char *etag, size_t etag_cap);

#endif
