/* prefetch.c: whole objects fetched ahead on an I/O thread; read.c
 * takes them. */
#ifndef SK_S3_PREFETCH_H
#define SK_S3_PREFETCH_H

#include <curl/curl.h>
#include <pthread.h>
#include <stdint.h>

#include <skippr/backoff.h>
#include "ctx.h"

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

void s3_pf_stop(s3_ctx *c);
int src_prefetch(void *ctx, const skippr_unit *units, size_t n);
pf_item *s3_pf_take(s3_ctx *c, const char *key);
void s3_pf_release(s3_ctx *c, pf_item *it);
/* Take body b (a consumed chunk) back for later GETs, or free it; b is
 * left empty either way. */
void s3_pf_give(s3_ctx *c, skippr_buf *b);

#endif
