/* Private to the S3 plugin: the instance (s3_ctx), the small buffer and
 * response types, and the calls one file of the plugin makes into
 * another. The plugin's files:
 *
 *   s3.c        options, init/destroy, the descriptor (what S3 does, below)
 *   creds.c     the AWS credential chain (creds.h)
 *   sigv4.c     Signature Version 4 (sigv4.h)
 *   request.c   requests: sign, send, retry, the verdict on an answer
 *   list.c      listing (ListObjectsV2), serial or by sub-prefix in parallel
 *   inventory.c listing from an S3 Inventory report (inventory_manifest)
 *   prefetch.c  whole objects fetched ahead on an I/O thread
 *   read.c      a unit read with ranged GETs (If-Match its ETag)
 *   sink.c      objects written: PUT or multipart, conditional, checked
 *   settle.c    is the object at a key ours? (slice id, checksum, size)
 *   stage.c     staging pieces: tails of growing objects the disk cannot hold
 *   store.c     the engine's own state (skipprd_el_storage_mode: s3)
 *
 * Functions shared across files carry the prefix s3_ (the source and
 * sink entry points keep src_ and sink_). Everything is hidden in the
 * shared object but the plugin's entry point.
 */
#ifndef SK_S3_H
#define SK_S3_H

#include <curl/curl.h>
#include <pthread.h>
#include <libxml/tree.h>
#include <stddef.h>
#include <stdint.h>

#include <skippr/plugin.h>

#include "backoff.h"
#include "creds.h"
#include "growbuf.h"
#include "sigv4.h"


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

typedef skippr_buf buf; /* growbuf.h */

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


/* Objects fetched ahead (prefetch.c); read.c takes them. */
typedef enum pf_state {
    PF_QUEUED = 0, /* waiting for a transfer slot */
    PF_IN_FLIGHT,  /* its GET is running on the I/O thread */
    PF_FINISHED    /* done, or given up: open() falls back to ranged GETs */
} pf_state;

typedef struct pf_item {
    char *key, *etag;
    int64_t size, len; /* object size; bytes asked for */
    resp r;
    int attempts;
    pf_state state;
    int abandoned; /* closed before it finished: the thread frees it */
    int taken;     /* opened: out of the queue, never restarted */
    int64_t retry_at; /* monotonic ms before which it is not restarted */
    int ok;        /* finished with the wanted bytes */
    CURL *easy;
    struct curl_slist *hdrs;
    char *url;
    struct pf_item *next;
} pf_item;

typedef struct prefetcher {
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    CURLM *multi;
    int epfd;         /* the sockets curl asks the I/O thread to watch */
    int64_t timer_at; /* when curl wants its timeout action; -1: never */
    pf_item *head, *tail; /* not yet opened, in open order */
    int running;
    int64_t reserved; /* bytes of started, not yet consumed items */
    int64_t max_reserved; /* its high-water mark, logged at the end */
    int stop;
    int max_inflight;
    skippr_backoff backoff; /* the I/O thread's retry waits */
    int64_t queued_bytes, queued_n; /* every item queued: the mean size */
    int64_t window; /* reserved may grow to this (pf_window) */
    /* Bodies of consumed items, kept for the next GETs (pf_spare_*). */
    struct {
        char *p;
        size_t cap;
    } spare[64];
    int nspare;
    int64_t spare_bytes;
} prefetcher;

/* Count a retry by cause for the metrics: retries_transport (no answer),
 * retries_throttled (503, 429), retries_timeout (408), retries_server. */
void s3_count_retry(s3_ctx *c, int transport, long status);
/* inventory.c: S3 Inventory as the listing (inventory_manifest) */
typedef struct s3_inventory s3_inventory;
int s3_inv_list(s3_ctx *c, const char *start_after, skippr_unit_cb cb,
                void *cb_data);
void s3_inv_free(s3_ctx *c);

/* request.c: requests: sign, send, retry, read the verdict */
char *s3_env(const char *name);
void s3_md5_b64(const void *d, size_t n, char out[32]);
void s3_crc32c_b64(uint32_t crc, char out[16]);
int s3_checksums(const s3_ctx *c);
sigv4_kv s3_body_check(const s3_ctx *c, const void *p, size_t n,
                       char out[32]);
int s3_prepare(const s3_ctx *c, const char *method, const char *key,
               const sigv4_kv *query, size_t nq, const void *body,
               size_t blen, const sigv4_kv *hdrs, size_t nh, char *url,
               size_t url_cap, struct curl_slist **list);
void s3_easy_setup(const s3_ctx *c, CURL *h, const char *url,
                   struct curl_slist *list, resp *r);
int s3_transport_failure(s3_ctx *c, CURLcode cc, resp *r);
int s3_request(s3_ctx *c, const char *method, const char *key,
               const sigv4_kv *query, size_t nq, const void *body,
               size_t blen, const sigv4_kv *hdrs, size_t nh, resp *r);
/* s3_request, sent again (with backoff, up to max_attempts) while the
 * verdict is RETRY; then s3_give_up and SKIPPR_FATAL. `what` and `name`
 * (a key or prefix) are for the messages. Statuses in ok_also (0-ended,
 * may be NULL) come back as SKIPPR_OK for the caller to tell apart. *r
 * is the last answer; its body is the caller's to free. */
int s3_request_retried(s3_ctx *c, const char *what, const char *name,
                       const long *ok_also, const char *method,
                       const char *key, const sigv4_kv *query, size_t nq,
                       const void *body, size_t blen, const sigv4_kv *hdrs,
                       size_t nh, resp *r);
void s3_error_code(const buf *b, char *out, size_t cap);
/* The text of the first <name> element in body, with the quotes an ETag
 * comes in (plain or as &quot;) left out, into out (cap bytes); "" when
 * there is none or it does not fit. */
void s3_xml_value(const buf *body, const char *name, char *out, size_t cap);
int s3_verdict(s3_ctx *c, int rc, resp *r, const char *what,
               const char *key);
void s3_give_up(s3_ctx *c, const char *what, const char *key,
                const resp *r);
void s3_backoff(s3_ctx *c, int attempt);

/* list.c: listing: serial, or sub-prefixes in parallel */
const char *s3_child_text(xmlNode *n, const char *name, char *out,
                          size_t cap);
int s3_list_serial(s3_ctx *c, const char *prefix, const char *after,
                   skippr_unit_cb cb, void *cb_data);
int src_list(void *ctx, const char *start_after, skippr_unit_cb cb,
             void *cb_data);

/* prefetch.c: fetching whole objects ahead on an I/O thread */
void s3_pf_stop(s3_ctx *c);
int src_prefetch(void *ctx, const skippr_unit *units, size_t n);
/* probe.c: the preflight (plugin.h). */
int src_probe(void *ctx);
int sink_probe(void *ctx);
pf_item *s3_pf_take(s3_ctx *c, const char *key);
void s3_pf_release(s3_ctx *c, pf_item *it);
/* Take body b (a consumed chunk) back for later GETs, or free it; b is
 * left empty either way. */
void s3_pf_give(s3_ctx *c, skippr_buf *b);

/* read.c: reading a unit with ranged GETs */
int src_open(void *ctx, const skippr_unit *u, int64_t offset,
             void **stream);
int src_read(void *ctx, void *stream, void *out, size_t cap,
             size_t *n_out);
void src_close(void *ctx, void *stream);

/* sink.c: the sink: PUT or multipart upload, conditional, checked */
int sink_open(void *ctx, const skippr_object_info *info, void **h);
int sink_write(void *ctx, void *h, const void *p, size_t n);
void sink_abort(void *ctx, void *h);
int sink_commit(void *ctx, void *h);
int sink_check(void *ctx, const skippr_object_info *info);

/* settle.c: is the object at a key ours? */
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

/* store.c: the engine's state in the bucket (SKIPPR_SINK_STORE) */
int sink_store_get(void *ctx, const char *key, uint64_t offset, void *buf,
                   size_t cap, size_t *got, uint64_t *size, char *etag,
                   size_t etag_cap);
int sink_store_put(void *ctx, const char *key, const void *buf, size_t len,
                   const char *cond, char *etag, size_t etag_cap);
int sink_store_put_file(void *ctx, const char *key, int fd, uint64_t len,
                        char *etag, size_t etag_cap);
int sink_store_delete(void *ctx, const char *key);
int sink_store_list(void *ctx, const char *prefix, skippr_unit_cb cb,
                    void *cb_data);
int sink_grow_open(void *ctx, const skippr_object_info *info,
                   uint64_t length, const char *notes, size_t notes_len,
                   void **h);
int sink_grow_write(void *ctx, void *h, const void *p, size_t n);
int sink_grow_note(void *ctx, void *h, char *buf, size_t cap, size_t *len);
int sink_grow_commit(void *ctx, void *h, const skippr_object_info *info);
void sink_grow_close(void *ctx, void *h);
int sink_grow_discard(void *ctx, const skippr_object_info *info);
uint64_t sink_grow_part_bytes(void *ctx);
/* stage.c: staging pieces */
int sink_stage_put(void *ctx, const skippr_object_info *info,
                   uint64_t offset, uint64_t tag, const void *p, size_t n);
int sink_stage_get(void *ctx, const skippr_object_info *info,
                   uint64_t offset, uint64_t tag, void *buf, size_t n);
int sink_stage_clear(void *ctx, const skippr_object_info *info);
void s3_stage_key(const s3_ctx *c, const skippr_object_info *info,
                  uint64_t offset, uint64_t tag, char *out, size_t cap);
/* sink.c: a staging piece made a part of its growing object */
int sink_stage_copy(void *ctx, void *h, const skippr_object_info *info,
                    uint64_t offset, uint64_t tag, uint64_t len);

#endif
