/* Listing: ListObjectsV2 pages (parsed as they stream, with libxml2's
 * reader) in S3's key order. With list_concurrency > 1 the prefix is cut
 * at '/' into sub-prefixes (Delimiter), which are listed at once on a
 * curl multi handle, each holding at most a page ahead, and merged in
 * order; a unit is emitted only when no sub-prefix before it can still
 * produce a smaller key.
 *
 * Thread: the pipeline thread (the engine calls list()).
 */
#include "inventory.h"
#include "list.h"
#include "list_impl.h"
#include "request.h"

#include <libxml/parser.h>
#include <libxml/xmlreader.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int lentry_cmp(const void *a, const void *b)
{
    return strcmp(((const lentry *)a)->key, ((const lentry *)b)->key);
}

static int lentry_push(lentry **v, size_t *n, size_t *cap, const char *key,
                       const char *etag, int64_t size, int64_t modified)
{
    if (skippr_array_grow(v, *n, cap, sizeof **v, 256))
        return -1;
    size_t kl = strlen(key), el = strlen(etag);
    char *p = malloc(kl + el + 2);
    if (!p)
        return -1;
    memcpy(p, key, kl + 1);
    memcpy(p + kl + 1, etag, el + 1);
    lentry *e = &(*v)[*n];
    e->key = p;
    e->etag = p + kl + 1;
    e->size = size;
    e->modified = modified;
    (*n)++;
    return 0;
}

void s3_lentries_clear(lentry *v, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(v[i].key);
}

void s3_lentries_free(lentry *v, size_t n)
{
    s3_lentries_clear(v, n);
    free(v);
}

/* The text of the element the reader is on, up to its end tag, into out
 * (cap bytes with the NUL); the reader is left on the end tag. Returns 0,
 * or -1 when the text does not fit or the XML ends first. */
static int reader_text(xmlTextReaderPtr rd, char *out, size_t cap)
{
    size_t n = 0;
    out[0] = '\0';
    if (xmlTextReaderIsEmptyElement(rd))
        return 0;
    int depth = xmlTextReaderDepth(rd);
    while (xmlTextReaderRead(rd) == 1) {
        int t = xmlTextReaderNodeType(rd);
        if (t == XML_READER_TYPE_END_ELEMENT &&
            xmlTextReaderDepth(rd) == depth)
            return 0;
        if (t != XML_READER_TYPE_TEXT && t != XML_READER_TYPE_CDATA &&
            t != XML_READER_TYPE_WHITESPACE &&
            t != XML_READER_TYPE_SIGNIFICANT_WHITESPACE)
            continue;
        const char *v = (const char *)xmlTextReaderConstValue(rd);
        size_t l = v ? strlen(v) : 0;
        if (l >= cap - n)
            return -1;
        memcpy(out + n, v, l);
        n += l;
        out[n] = '\0';
    }
    return -1;
}

/* One <Contents> entry read: add it to v unless it is a folder marker. */
static int page_entry(lentry **v, size_t *n, size_t *cap, const char *key,
                      char *etag, const char *size, const char *modified)
{
    size_t kl = strlen(key);
    if (!kl)
        return -1; /* S3 has no empty key */
    if (key[kl - 1] == '/' && atoll(size) == 0)
        return 0; /* a "folder" marker */
    char *e = etag;
    size_t el = strlen(e);
    if (el >= 2 && e[0] == '"' && e[el - 1] == '"') {
        e[el - 1] = '\0';
        e++;
    }
    return lentry_push(v, n, cap, key, e, atoll(size),
                       (int64_t)s3_parse_iso8601(modified));
}

int s3_parse_page(const buf *body, lentry **v, size_t *n, size_t *cap,
                  char ***cps, size_t *ncp, char *token, size_t tcap,
                  int *truncated)
{
    xmlTextReaderPtr rd = xmlReaderForMemory(body->data ? (const char *)body->data : "",
                                             (int)body->len, NULL, NULL,
                                             XML_PARSE_NONET);
    if (!rd)
        return -1;
    char key[2048], etag[256], size[32], modified[64], trunc[16] = "";
    int rc = 0, r = -1;
    enum { IN_NONE, IN_CONTENTS, IN_PREFIXES } in = IN_NONE;
    token[0] = '\0';
    while (!rc && (r = xmlTextReaderRead(rd)) == 1) {
        int t = xmlTextReaderNodeType(rd), d = xmlTextReaderDepth(rd);
        if (t == XML_READER_TYPE_END_ELEMENT && d == 1 && in != IN_NONE) {
            if (in == IN_CONTENTS) {
                rc = page_entry(v, n, cap, key, etag, size, modified);
            } else {
                char **np = realloc(*cps, (*ncp + 1) * sizeof *np);
                if (!np || !(np[*ncp] = strdup(key)))
                    rc = -1;
                if (np)
                    *cps = np;
                if (!rc)
                    (*ncp)++;
            }
            in = IN_NONE;
            continue;
        }
        if (t != XML_READER_TYPE_ELEMENT || d < 1 || d > 2)
            continue;
        const char *name = (const char *)xmlTextReaderConstLocalName(rd);
        if (!name)
            continue;
        if (d == 1) {
            in = IN_NONE;
            key[0] = etag[0] = size[0] = modified[0] = '\0';
            if (strcmp(name, "Contents") == 0)
                in = xmlTextReaderIsEmptyElement(rd) ? IN_NONE : IN_CONTENTS;
            else if (cps && strcmp(name, "CommonPrefixes") == 0)
                in = xmlTextReaderIsEmptyElement(rd) ? IN_NONE : IN_PREFIXES;
            else if (strcmp(name, "IsTruncated") == 0)
                rc = reader_text(rd, trunc, sizeof trunc);
            else if (strcmp(name, "NextContinuationToken") == 0)
                rc = reader_text(rd, token, tcap);
        } else if (in == IN_CONTENTS && strcmp(name, "Key") == 0) {
            rc = reader_text(rd, key, sizeof key);
        } else if (in == IN_CONTENTS && strcmp(name, "ETag") == 0) {
            rc = reader_text(rd, etag, sizeof etag);
        } else if (in == IN_CONTENTS && strcmp(name, "Size") == 0) {
            rc = reader_text(rd, size, sizeof size);
        } else if (in == IN_CONTENTS && strcmp(name, "LastModified") == 0) {
            rc = reader_text(rd, modified, sizeof modified);
        } else if (in == IN_PREFIXES && strcmp(name, "Prefix") == 0) {
            rc = reader_text(rd, key, sizeof key);
        }
    }
    if (!rc && r != 0)
        rc = -1; /* the XML is malformed */
    xmlFreeTextReader(rd);
    *truncated = strcmp(trunc, "true") == 0 && *token;
    return rc;
}

/* Fetch and parse one ListObjectsV2 page on the instance's handle,
 * retrying transient failures with backoff. */
static int list_page(s3_ctx *c, const sigv4_kv *q, size_t nq,
                     const char *prefix, lentry **v, size_t *n, size_t *cap,
                     char ***cps, size_t *ncp, char *token, size_t tcap,
                     int *truncated)
{
    resp r = {0};
    int rc = s3_request_retried(c, "list", prefix, NULL, "GET", NULL, q, nq,
                                NULL, 0, NULL, 0, &r);
    if (!rc && s3_parse_page(&r.body, v, n, cap, cps, ncp, token, tcap,
                          truncated)) {
        LOG(c, SKIPPR_LOG_ERROR, "list s3://%s/%s: unreadable XML answer",
            c->bucket, prefix);
        rc = SKIPPR_FATAL;
    }
    skippr_buf_free(&r.body);
    return rc ? SKIPPR_FATAL : SKIPPR_OK;
}

int s3_list_level(s3_ctx *c, const char *prefix, char ***cps, size_t *ncp,
                  lentry **v, size_t *n, size_t *cap)
{
    char token[2048] = "";
    int truncated = 1;
    while (truncated) {
        if (*ncp + *n > LIST_LEVEL_MAX)
            return 1;
        sigv4_kv q[4];
        size_t nq = 0;
        q[nq++] = (sigv4_kv){"list-type", "2"};
        q[nq++] = (sigv4_kv){"prefix", prefix};
        q[nq++] = (sigv4_kv){"delimiter", "/"};
        if (*token)
            q[nq++] = (sigv4_kv){"continuation-token", token};
        if (list_page(c, q, nq, prefix, v, n, cap, cps, ncp, token,
                      sizeof token, &truncated))
            return SKIPPR_FATAL;
    }
    return SKIPPR_OK;
}

void s3_lprefix_start(s3_ctx *c, CURLM *m, lprefix *lp)
{
    sigv4_kv q[3];
    size_t nq = 0;
    q[nq++] = (sigv4_kv){"list-type", "2"};
    q[nq++] = (sigv4_kv){"prefix", lp->prefix};
    if (*lp->token)
        q[nq++] = (sigv4_kv){"continuation-token", lp->token};
    else if (lp->from)
        q[nq++] = (sigv4_kv){"start-after", lp->from};
    char url[8192];
    curl_slist_free_all(lp->hdrs);
    lp->hdrs = NULL;
    skippr_buf_free(&lp->r.body);
    memset(&lp->r, 0, sizeof lp->r);
    lp->r.body.max = MAX_BODY;
    lp->attempts++;
    lp->state = LP_BUSY;
    if (s3_prepare(c, "GET", NULL, q, nq, NULL, 0, NULL, 0, url, sizeof url,
                &lp->hdrs) != SKIPPR_OK)
        return;
    s3_easy_setup(c, lp->easy, url, lp->hdrs, &lp->r);
    curl_easy_setopt(lp->easy, CURLOPT_PRIVATE, lp);
    curl_multi_add_handle(m, lp->easy);
}

void s3_sort_entries(lentry *v, size_t n)
{
    if (n > 1) /* v is NULL when a listing found nothing */
        qsort(v, n, sizeof *v, lentry_cmp);
}

int s3_emit(const lentry *v, size_t n, const char *after,
            skippr_unit_cb cb, void *cb_data)
{
    for (size_t i = 0; i < n; i++) {
        if (after && strcmp(v[i].key, after) <= 0)
            continue;
        skippr_unit u = {v[i].key, v[i].etag, v[i].size, v[i].modified};
        if (cb(cb_data, &u))
            return 1;
    }
    return 0;
}

/* List one prefix, one page after another, reporting each page's objects
 * to cb before asking for the next (so cb may delete what it is given).
 * Returns SKIPPR_OK (also when cb stopped it) or SKIPPR_FATAL, logged. */
int s3_list_serial(s3_ctx *c, const char *prefix, const char *after,
                   skippr_unit_cb cb, void *cb_data)
{
    char token[2048] = "";
    int truncated = 1, stop = 0;
    while (truncated && !stop) {
        sigv4_kv q[4];
        size_t nq = 0;
        q[nq++] = (sigv4_kv){"list-type", "2"};
        q[nq++] = (sigv4_kv){"prefix", prefix};
        if (*token)
            q[nq++] = (sigv4_kv){"continuation-token", token};
        else if (after)
            q[nq++] = (sigv4_kv){"start-after", after};
        lentry *v = NULL;
        size_t n = 0, cap = 0;
        int rc = list_page(c, q, nq, prefix, &v, &n, &cap, NULL, NULL, token,
                           sizeof token, &truncated);
        if (!rc) {
            s3_sort_entries(v, n);
            stop = s3_emit(v, n, after, cb, cb_data);
        }
        s3_lentries_free(v, n);
        if (rc)
            return rc;
    }
    return SKIPPR_OK;
}

