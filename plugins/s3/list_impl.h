/* The listing's private parts: entries of a page, a sub-prefix being
 * listed, and the steps list.c offers listwin.c (the window of
 * sub-prefixes listed at once). Nothing else includes it. */
#ifndef SK_S3_LIST_IMPL_H
#define SK_S3_LIST_IMPL_H

#include <curl/curl.h>
#include <stddef.h>
#include <stdint.h>

#include "ctx.h"

#define LIST_LEVEL_MAX 100000 /* entries of one Delimiter level held */

typedef struct lentry {
    char *key, *etag; /* one allocation: etag follows key's NUL */
    int64_t size;
    int64_t modified; /* LastModified, Unix seconds; 0 if unreadable */
} lentry;

/* Where a sub-prefix's listing is (lprefix.state). */
enum { LP_BUSY, LP_WAITING, LP_DONE };

/* A sub-prefix of the window: its request on one of the listing handles,
 * and the keys read but not yet reported. */
typedef struct lprefix {
    const char *prefix; /* borrowed from the level's list */
    const char *from;   /* start-after of its first page, or NULL */
    char token[2048];
    int attempts, state;
    lentry *v;
    size_t n, cap;
    CURL *easy;
    struct curl_slist *hdrs;
    resp r;
} lprefix;

/* Free the n entries' strings; the array itself stays with the caller. */
void s3_lentries_clear(lentry *v, size_t n);
/* ... and the array too. */
void s3_lentries_free(lentry *v, size_t n);

/* Parse one ListObjectsV2 page: Contents into v, CommonPrefixes into cps
 * (when cps is not NULL). Returns 0, or -1 on bad XML or no memory.
 *
 * The page is read with libxml2's streaming reader, not into a tree: a
 * page of 1,000 keys makes a tree of about 1.7 MB, which every poll of the
 * continuous mode would build once per page of the bucket. */
int s3_parse_page(const buf *body, lentry **v, size_t *n, size_t *cap,
                  char ***cps, size_t *ncp, char *token, size_t tcap,
                  int *truncated);

/* One level of a delimiter listing: sub-prefixes and direct objects.
 * Returns SKIPPR_OK, SKIPPR_FATAL, or 1 when the level holds more than
 * LIST_LEVEL_MAX entries (what was read stays in the arrays). */
int s3_list_level(s3_ctx *c, const char *prefix, char ***cps, size_t *ncp,
                  lentry **v, size_t *n, size_t *cap);

/* Ask for lp's next page (its first: at lp->from, if set). A request that
 * cannot be prepared is left out of the multi; list_window notices. */
void s3_lprefix_start(s3_ctx *c, CURLM *m, lprefix *lp);

void s3_sort_entries(lentry *v, size_t n);

/* Report the entries (in key order, see s3_sort_entries()) above `after`.
 * Returns 1 if cb asked to stop. */
int s3_emit(const lentry *v, size_t n, const char *after,
            skippr_unit_cb cb, void *cb_data);

#endif
