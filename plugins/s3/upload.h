/* The requests that write an object: a multipart upload (started after
 * aborting a crashed attempt's, a part at a time, completed) or one
 * PutObject, each conditional (object.h) and checked. */
#ifndef SK_S3_UPLOAD_H
#define SK_S3_UPLOAD_H

#include <stddef.h>

#include "object.h"

/* Tries of one part or one Complete within a write, before the engine's
 * own retry writes the whole object again: a multipart object is several
 * requests, and one failure among them should not cost all of them. */
#define SINK_TRIES 3

/* Abort unfinished multipart uploads of this key (a crashed attempt). */
int s3_abort_orphans(s3_ctx *c, s3_obj *o);

/* Start o's multipart upload unless it has one. */
int s3_start_upload(s3_ctx *c, s3_obj *o);

/* Non-zero when r is S3's error answer with this HTTP status and code
 * (400 BadDigest: a checksum refused; 404 NoSuchUpload: an upload id it
 * does not know). */
int s3_answered(resp *r, long status, const char *want);

/* o's next part is in the upload now: its ETag, base64 CRC32C ("" when
 * not known) and size (o->parts has room for it). */
void s3_add_part(s3_ctx *c, s3_obj *o, const char *etag,
              const char *crc, uint64_t size, const char *counter);

/* Upload p[0..n) as o's next part, starting the upload first if need
 * be. */
int s3_upload_part(s3_ctx *c, s3_obj *o, const void *p, size_t n);

/* CompleteMultipartUpload of o's parts. A Complete the server says failed
 * (5xx, or 200 with an <Error> body, which S3 asks to retry) is sent again
 * up to SINK_TRIES times; a transport failure, whose request may have been
 * carried out, goes back to the engine, which first asks object_check.
 * Sets *settled as conditional_verdict does. */
int s3_complete_upload(s3_ctx *c, s3_obj *o, int *settled);

/* o as one PutObject of p[0..n): with its MD5, CRC32C and metadata, and
 * If-None-Match (a 412 settled as conditional_verdict does). */
int s3_put_whole(s3_ctx *c, s3_obj *o, const void *p, size_t n);

#endif
