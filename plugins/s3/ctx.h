/* The S3 plugin's instance (s3_ctx) and the answer type every request
 * fills. Each file of the plugin has a header for what it offers the
 * others, and no two files need each other:
 *
 *   s3.c        options, init/destroy, the descriptor: uses all below
 *   creds/      the AWS credential chain by provider (creds/creds.h)
 *   sigv4.c     Signature Version 4 (sigv4.h)
 *   request.c   requests: sign, send, retry, the verdict (request.h)
 *   list.c      listing, serial or by sub-prefix in parallel (list.h)
 *   inventory.c listing from an S3 Inventory report (inventory.h)
 *   prefetch.c  whole objects fetched ahead on an I/O thread (prefetch.h)
 *   read.c      a unit read with ranged GETs (read.h)
 *   probe.c     the preflight (probe.h)
 *   sink.c      objects written, PUT or multipart; growing objects (sink.h)
 *   settle.c    is the object at a key ours? (settle.h)
 *   stage.c     staging pieces: tails the disk cannot hold (stage.h)
 *   store.c     the engine's own state (store.h)
 *
 * Functions shared across files carry the prefix s3_ (the source and
 * sink entry points keep src_ and sink_). Everything is hidden in the
 * shared object but the plugin's entry point.
 */
#ifndef SK_S3_CTX_H
#define SK_S3_CTX_H

#include <curl/curl.h>
#include <pthread.h>
#include <libxml/tree.h>
#include <stddef.h>
#include <stdint.h>

#include <skippr/backoff.h>
#include <skippr/buf.h>
#include <skippr/plugin.h>

#include "creds.h"

#define MAX_BODY (16u << 20) /* bound on any buffered response body */

typedef struct s3_ctx {
    const skippr_host *host;
    /* options */
    const char *bucket, *prefix, *start_after, *region, *endpoint;
    const char *access_key_id, *secret_access_key, *session_token, *profile;
    const char *addressing, *ca_bundle, *storage_class, *sse;
    const char *staging_prefix;
    int verify_tls, checksum;
    int64_t part_size, read_chunk_bytes, max_attempts, timeout_seconds;
    /* resolved at init */
    char *r_region, *r_endpoint;
    s3_creds *creds; /* the credential chain's pick; refreshes itself */
    char *r_ca; /* ca_bundle, else AWS_CA_BUNDLE; NULL: the system's */
    int path_style;
    CURL *curl;
    /* source: listing handles, kept so that connections are reused across
     * listings and polls (list_concurrency of them, made on first use) */
    CURLM *lmulti;
    CURL **leasy;
    /* source: fetching ahead on an I/O thread */
    int64_t concurrency, prefetch_bytes, list_concurrency;
    char *list_last; /* the last key list() gave (list.c); malloc'd */
    const char *inventory_manifest; /* option: list from this report */
    struct s3_inventory *inv;       /* inventory.c's state; owned */
    size_t list_last_cap;
    int prefetch_auto; /* prefetch_bytes was 0: a cap; prefetch.c sizes
                        * the window from the objects listed */
    struct prefetcher *pf;
    /* sink: conditional writes */
    int conditional;  /* option; cleared if the server refuses it */
    char *replace_key; /* object_check found other content here: replace */
    char replace_etag[128]; /* ...with If-Match on this ETag, never blind */
    int no_copy; /* the server refused UploadPartCopy: read and write */
    int fenced_told; /* a write refused by the fence was logged */
    skippr_backoff backoff; /* the instance's thread's retry waits */
} s3_ctx;

#define LOG(c, lvl, ...) (c)->host->log((c)->host, (lvl), __VA_ARGS__)

typedef skippr_buf buf; /* skippr/buf.h */

typedef struct resp {
    long status;
    buf body;
    char etag[128];
    char meta_slice[128];
    char meta_crc[32];
    char checksum[64]; /* x-amz-checksum-crc32c (HEAD with checksum mode) */
    char content_range[128];
    char content_length[24];
    const char *curl_error; /* transport failure, static */
    int body_rc; /* why the body stopped: SKIPPR_NOMEM or SKIPPR_RANGE */
} resp;


#endif
