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
#include "request.h"

#include <libxml/parser.h>
#include <libxml/xmlreader.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *s3_child_text(xmlNode *n, const char *name, char *out,
                              size_t cap)
{
    for (xmlNode *k = n->children; k; k = k->next) {
        if (k->type == XML_ELEMENT_NODE &&
            strcmp((const char *)k->name, name) == 0) {
            xmlChar *t = xmlNodeGetContent(k);
            snprintf(out, cap, "%s", t ? (const char *)t : "");
            xmlFree(t);
            return out;
        }
    }
    out[0] = '\0';
    return NULL;
}

/*
 * A huge prefix is listed by many requests at once. A listing with
 * Delimiter '/' finds the sub-prefixes (descending while a level has only
 * one, as in year/month/day layouts). Then a window of up to
 * list_concurrency sub-prefixes is listed concurrently, each one page after
 * another. Keys are reported in order: those of the window's first
 * sub-prefix as its pages arrive; when it ends, the window slides on by
 * one. A sub-prefix ahead of the first holds at most one page and then
 * waits, so memory stays within list_concurrency pages however many keys
 * the prefix has. The keys of one sub-prefix sort together (a key beside
 * the sub-prefixes has no '/' after the level, so it cannot fall among
 * them), which is what lets each be reported whole, in turn.
 *
 * start_after skips whole sub-prefixes below it and starts the one it falls
 * in at start_after, so later batches do not re-list what was reported. A
 * server whose Delimiter answer is empty, or a level with more than
 * LIST_LEVEL_MAX entries, gets the plain, serial listing instead (which
 * holds one page at a time), so nothing can be skipped by a server that
 * ignores delimiters.
 */
#define LIST_LEVEL_MAX 100000 /* entries of one Delimiter level held */

typedef struct lentry {
    char *key, *etag; /* one allocation: etag follows key's NUL */
    int64_t size;
    int64_t modified; /* LastModified, Unix seconds; 0 if unreadable */
} lentry;

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

/* Free the n entries' strings; the array itself stays with the caller. */
static void lentries_clear(lentry *v, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(v[i].key);
}

static void lentries_free(lentry *v, size_t n)
{
    lentries_clear(v, n);
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

/* Parse one ListObjectsV2 page: Contents into v, CommonPrefixes into cps
 * (when cps is not NULL). Returns 0, or -1 on bad XML or no memory.
 *
 * The page is read with libxml2's streaming reader, not into a tree: a
 * page of 1,000 keys makes a tree of about 1.7 MB, which every poll of the
 * continuous mode would build once per page of the bucket. */
static int parse_page(const buf *body, lentry **v, size_t *n, size_t *cap,
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
    if (!rc && parse_page(&r.body, v, n, cap, cps, ncp, token, tcap,
                          truncated)) {
        LOG(c, SKIPPR_LOG_ERROR, "list s3://%s/%s: unreadable XML answer",
            c->bucket, prefix);
        rc = SKIPPR_FATAL;
    }
    skippr_buf_free(&r.body);
    return rc ? SKIPPR_FATAL : SKIPPR_OK;
}

/* One level of a delimiter listing: sub-prefixes and direct objects.
 * Returns SKIPPR_OK, SKIPPR_FATAL, or 1 when the level holds more than
 * LIST_LEVEL_MAX entries (what was read stays in the arrays). */
static int list_level(s3_ctx *c, const char *prefix, char ***cps, size_t *ncp,
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

/* Ask for lp's next page (its first: at lp->from, if set). A request that
 * cannot be prepared is left out of the multi; list_window notices. */
static void lprefix_start(s3_ctx *c, CURLM *m, lprefix *lp)
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

static void sort_entries(lentry *v, size_t n)
{
    if (n > 1) /* v is NULL when a listing found nothing */
        qsort(v, n, sizeof *v, lentry_cmp);
}

/* Report the entries (in key order, see sort_entries()) above `after`.
 * Returns 1 if cb asked to stop. */
static int emit(const lentry *v, size_t n, const char *after,
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
            sort_entries(v, n);
            stop = emit(v, n, after, cb, cb_data);
        }
        lentries_free(v, n);
        if (rc)
            return rc;
    }
    return SKIPPR_OK;
}

/* Handle the listing requests that finished: their pages go to their
 * sub-prefix; a sub-prefix with more to read asks for its next page at
 * once if it is `head` (the one being reported) or holds nothing, and
 * otherwise waits. Returns SKIPPR_OK or SKIPPR_FATAL. */
static int list_step(s3_ctx *c, CURLM *m, const lprefix *head)
{
    int still = 0, seen = 0;
    curl_multi_perform(m, &still);
    if (still > 0) {
        curl_multi_poll(m, NULL, 0, 50, NULL);
        curl_multi_perform(m, &still);
    }
    CURLMsg *msg;
    int q;
    while ((msg = curl_multi_info_read(m, &q))) {
        if (msg->msg != CURLMSG_DONE)
            continue;
        seen++;
        lprefix *lp = NULL;
        curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, (char **)&lp);
        CURLcode cc = msg->data.result;
        curl_multi_remove_handle(m, lp->easy);
        curl_easy_getinfo(lp->easy, CURLINFO_RESPONSE_CODE, &lp->r.status);
        int st = SKIPPR_OK;
        if (cc != CURLE_OK)
            st = s3_transport_failure(c, cc, &lp->r);
        st = s3_verdict(c, st, &lp->r, "list", lp->prefix);
        int truncated = 0;
        if (st == SKIPPR_OK &&
            parse_page(&lp->r.body, &lp->v, &lp->n, &lp->cap, NULL, NULL,
                       lp->token, sizeof lp->token, &truncated)) {
            LOG(c, SKIPPR_LOG_ERROR, "list s3://%s/%s: unreadable XML answer",
                c->bucket, lp->prefix);
            st = SKIPPR_FATAL;
        }
        skippr_buf_free(&lp->r.body);
        if (st == SKIPPR_RETRY && lp->attempts < c->max_attempts) {
            s3_backoff(c, lp->attempts);
            lprefix_start(c, m, lp);
        } else if (st != SKIPPR_OK) {
            if (st == SKIPPR_RETRY)
                s3_give_up(c, "list", lp->prefix, &lp->r);
            return SKIPPR_FATAL;
        } else if (!truncated) {
            lp->state = LP_DONE;
        } else {
            lp->attempts = 0;
            if (lp == head || lp->n == 0)
                lprefix_start(c, m, lp);
            else
                lp->state = LP_WAITING;
        }
    }
    if (still == 0 && seen == 0) {
        LOG(c, SKIPPR_LOG_ERROR, "list s3://%s: a listing request could not "
            "be started", c->bucket);
        return SKIPPR_FATAL;
    }
    return SKIPPR_OK;
}

static int cps_cmp(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Counts of one window listing, for the debug log. */
typedef struct lstats {
    size_t reported, held_max;
} lstats;

/* Report the keys of cps[i..] and the direct objects (sorted, from *di on)
 * in order, through a window of sub-prefixes listed concurrently. */
static int list_window(s3_ctx *c, char **cps, size_t ncp, size_t i,
                       lentry *direct, size_t nd, size_t *di,
                       const char *after, skippr_unit_cb cb, void *cb_data,
                       lstats *ls)
{
    size_t lc = (size_t)c->list_concurrency;
    if (!c->lmulti) {
        if (!(c->lmulti = curl_multi_init()))
            return SKIPPR_NOMEM;
        curl_multi_setopt(c->lmulti, CURLMOPT_MAXCONNECTS, (long)lc);
    }
    if (!c->leasy && !(c->leasy = calloc(lc, sizeof *c->leasy)))
        return SKIPPR_NOMEM;
    for (size_t k = 0; k < lc; k++)
        if (!c->leasy[k] && !(c->leasy[k] = curl_easy_init()))
            return SKIPPR_NOMEM;
    lprefix *w = calloc(lc, sizeof *w); /* a ring: cps[k] in w[k % lc] */
    if (!w)
        return SKIPPR_NOMEM;
    CURLM *m = c->lmulti;
    size_t head = i, tail = i;
    int rc = SKIPPR_OK, stopped = 0;
    while (!rc && !stopped) {
        while (tail < ncp && tail - head < lc) {
            lprefix *lp = &w[tail % lc];
            size_t pl = strlen(cps[tail]);
            lp->prefix = cps[tail];
            lp->from = after && strncmp(after, cps[tail], pl) == 0 ? after
                                                                   : NULL;
            lp->token[0] = '\0';
            lp->attempts = 0;
            lp->easy = c->leasy[tail % lc];
            lprefix_start(c, m, lp);
            tail++;
        }
        size_t held = 0;
        for (size_t k = head; k < tail; k++)
            held += w[k % lc].n;
        if (held > ls->held_max)
            ls->held_max = held;
        /* Report what is ready, in order. */
        while (head < tail && !stopped) {
            lprefix *lp = &w[head % lc];
            size_t dn = 0;
            while (*di + dn < nd && strcmp(direct[*di + dn].key, lp->prefix) < 0)
                dn++;
            stopped = emit(direct + *di, dn, after, cb, cb_data);
            *di += dn;
            if (!stopped) {
                sort_entries(lp->v, lp->n);
                stopped = emit(lp->v, lp->n, after, cb, cb_data);
            }
            ls->reported += lp->n;
            lentries_clear(lp->v, lp->n);
            lp->n = 0;
            if (stopped || lp->state == LP_BUSY)
                break;
            if (lp->state == LP_WAITING) {
                lprefix_start(c, m, lp);
                break;
            }
            head++; /* done: its slot takes the next sub-prefix */
        }
        if (stopped || head == ncp)
            break;
        if (head < tail)
            rc = list_step(c, m, &w[head % lc]);
    }
    for (size_t k = 0; k < lc; k++) {
        /* Removing a handle that is not in the multi is harmless; the
         * handles and their connections stay for the next listing. */
        if (w[k].easy)
            curl_multi_remove_handle(m, w[k].easy);
        curl_slist_free_all(w[k].hdrs);
        skippr_buf_free(&w[k].r.body);
        lentries_free(w[k].v, w[k].n);
    }
    free(w);
    return rc ? rc : stopped ? 1 : SKIPPR_OK;
}

static int list_parallel(s3_ctx *c, const char *after, skippr_unit_cb cb,
                         void *cb_data)
{
    const char *top = c->prefix ? c->prefix : "";
    char *prefix = strdup(top);
    char **cps = NULL;
    size_t ncp = 0;
    lentry *direct = NULL;
    size_t nd = 0, dcap = 0;
    int rc = SKIPPR_OK;
    if (!prefix)
        return SKIPPR_NOMEM;
    /* Descend while a level has a single sub-prefix and no objects. */
    for (int depth = 0; depth < 8; depth++) {
        rc = list_level(c, prefix, &cps, &ncp, &direct, &nd, &dcap);
        if (rc || ncp != 1 || nd != 0)
            break;
        free(prefix);
        prefix = cps[0];
        free(cps);
        cps = NULL;
        ncp = 0;
    }
    int serial = rc == 1 || (!rc && ncp == 0 && nd == 0);
    if (rc == 1)
        LOG(c, SKIPPR_LOG_DEBUG, "listing s3://%s/%s: over %d entries in one "
            "level; listing one page at a time", c->bucket, prefix,
            LIST_LEVEL_MAX);
    if (!serial && !rc) {
        LOG(c, SKIPPR_LOG_DEBUG, "listing s3://%s/%s: %zu sub-prefixes, %zu "
            "objects beside them", c->bucket, prefix, ncp, nd);
        if (ncp > 1) /* cps is NULL when only objects were found */
            qsort(cps, ncp, sizeof *cps, cps_cmp);
        sort_entries(direct, nd);
        /* Skip the sub-prefixes wholly at or below start_after. */
        size_t i = 0, di = 0;
        lstats ls = {0};
        while (after && i < ncp && strcmp(cps[i], after) < 0 &&
               strncmp(after, cps[i], strlen(cps[i])) != 0)
            i++;
        rc = list_window(c, cps, ncp, i, direct, nd, &di, after, cb, cb_data,
                         &ls);
        if (rc == SKIPPR_OK) /* objects after the last sub-prefix */
            emit(direct + di, nd - di, after, cb, cb_data);
        if (rc == 1)
            rc = SKIPPR_OK; /* cb asked to stop */
        LOG(c, SKIPPR_LOG_DEBUG, "listed s3://%s/%s: %zu keys from "
            "sub-prefixes, at most %zu held at once", c->bucket, prefix,
            ls.reported, ls.held_max);
    }
    /* Nothing, a server that ignores Delimiter, or a level too big to
     * hold: list plainly. */
    lentries_free(direct, nd);
    for (size_t k = 0; k < ncp; k++)
        free(cps[k]);
    free(cps);
    free(prefix);
    if (serial)
        return s3_list_serial(c, top, after, cb, cb_data);
    return rc;
}

/* The engine's callback, noting the last key given. */
typedef struct noted {
    s3_ctx *c;
    skippr_unit_cb cb;
    void *cb_data;
} noted;

static int note_last(void *ud, const skippr_unit *u)
{
    noted *n = ud;
    s3_ctx *c = n->c;
    size_t l = strlen(u->id);
    if (l + 1 > c->list_last_cap) {
        char *p = realloc(c->list_last, l + 1);
        if (p) {
            c->list_last = p;
            c->list_last_cap = l + 1;
        }
    }
    if (l + 1 <= c->list_last_cap)
        memcpy(c->list_last, u->id, l + 1);
    else if (c->list_last)
        c->list_last[0] = '\0';
    return n->cb(n->cb_data, u);
}

int src_list(void *ctx, const char *start_after, skippr_unit_cb cb,
                    void *cb_data)
{
    s3_ctx *c = ctx;
    const char *after = start_after ? start_after : c->start_after;
    if (c->inventory_manifest && *c->inventory_manifest)
        return s3_inv_list(c, start_after, cb, cb_data);
    noted n = {c, cb, cb_data};
    /* A listing from the start, or going on after the last key this one
     * gave, is wide (sub-prefixes at once). One that starts anywhere else
     * (an incremental poll after its mark, a shard skipping a folder)
     * usually wants a page or two: listed plainly, so that it costs one
     * request, not a Delimiter walk. */
    int resume = !start_after ||
                 (c->list_last && strcmp(start_after, c->list_last) == 0);
    if (c->list_concurrency > 1 && resume)
        return list_parallel(c, after, note_last, &n);
    return s3_list_serial(c, c->prefix ? c->prefix : "", after, note_last,
                          &n);
}
