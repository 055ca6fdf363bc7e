#include "sigv4.h"

#include <ctype.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_ITEMS 64
#define CANON_MAX 16384

static void hex(const uint8_t *b, size_t n, char *out)
{
    static const char digits[] = "0123456789abcdef";
    for (size_t i = 0; i < n; i++) {
        out[2 * i] = digits[b[i] >> 4];
        out[2 * i + 1] = digits[b[i] & 15];
    }
    out[2 * n] = '\0';
}

void sigv4_sha256_hex(const void *data, size_t n, char out[65])
{
    uint8_t md[32];
    unsigned int len = 0;
    EVP_Digest(data, n, md, &len, EVP_sha256(), NULL);
    hex(md, 32, out);
}

static void hmac(const uint8_t *key, size_t klen, const char *msg,
                 uint8_t out[32])
{
    unsigned int len = 32;
    HMAC(EVP_sha256(), key, (int)klen, (const unsigned char *)msg,
         strlen(msg), out, &len);
}

void sigv4_signing_key(const char *secret, const char *date,
                       const char *region, const char *service,
                       uint8_t key[32])
{
    char k0[256];
    snprintf(k0, sizeof k0, "AWS4%s", secret);
    uint8_t a[32], b[32], c[32];
    hmac((const uint8_t *)k0, strlen(k0), date, a);
    hmac(a, 32, region, b);
    hmac(b, 32, service, c);
    hmac(c, 32, "aws4_request", key);
}

int sigv4_uri_encode(const char *s, int keep_slash, char *out, size_t cap)
{
    static const char digits[] = "0123456789ABCDEF";
    size_t o = 0;
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        int plain = isalnum(*p) || *p == '-' || *p == '.' || *p == '_' ||
                    *p == '~' || (keep_slash && *p == '/');
        if (o + (plain ? 1 : 3) >= cap)
            return -1;
        if (plain) {
            out[o++] = (char)*p;
        } else {
            out[o++] = '%';
            out[o++] = digits[*p >> 4];
            out[o++] = digits[*p & 15];
        }
    }
    out[o] = '\0';
    return (int)o;
}

typedef struct item {
    char key[256];
    char value[2048];
} item;

static int cmp_item(const void *a, const void *b)
{
    const item *x = a, *y = b;
    int c = strcmp(x->key, y->key);
    return c ? c : strcmp(x->value, y->value);
}

/* Append with a bound; returns -1 on overflow. */
static int put(char *buf, size_t *len, size_t cap, const char *s)
{
    size_t n = strlen(s);
    if (*len + n >= cap)
        return -1;
    memcpy(buf + *len, s, n + 1);
    *len += n;
    return 0;
}

static void trim_copy(const char *v, char *out, size_t cap)
{
    while (*v == ' ' || *v == '\t')
        v++;
    size_t n = strlen(v);
    while (n && (v[n - 1] == ' ' || v[n - 1] == '\t'))
        n--;
    /* Sequential spaces collapse to one, as SigV4 requires. */
    size_t o = 0;
    for (size_t i = 0; i < n && o + 1 < cap; i++) {
        if (v[i] == ' ' && o && out[o - 1] == ' ')
            continue;
        out[o++] = v[i];
    }
    out[o] = '\0';
}

/* The request's query items encoded and its headers lowercased and
 * trimmed, each sorted as the canonical request lists them. 0 or -1. */
static int sorted_items(const sigv4_request *r, item *q, item *h)
{
    for (size_t i = 0; i < r->nquery; i++)
        if (sigv4_uri_encode(r->query[i].key, 0, q[i].key,
                             sizeof q[i].key) < 0 ||
            sigv4_uri_encode(r->query[i].value, 0, q[i].value,
                             sizeof q[i].value) < 0)
            return -1;
    qsort(q, r->nquery, sizeof *q, cmp_item);
    for (size_t i = 0; i < r->nheaders; i++) {
        size_t k = 0;
        for (const char *p = r->headers[i].key;
             *p && k + 1 < sizeof h[i].key; p++)
            h[i].key[k++] = (char)tolower((unsigned char)*p);
        h[i].key[k] = '\0';
        trim_copy(r->headers[i].value, h[i].value, sizeof h[i].value);
    }
    qsort(h, r->nheaders, sizeof *h, cmp_item);
    return 0;
}

/* The canonical request into canon (*len bytes of CANON_MAX), and the
 * signed header names into signed_headers (shcap bytes). 0 or -1. */
static int canonical_request(const sigv4_request *r, const item *q,
                             const item *h, char *canon, size_t *len,
                             char *signed_headers, size_t shcap)
{
    char path[4096];
    size_t sl = 0;
    if (sigv4_uri_encode(r->path, 1, path, sizeof path) < 0 ||
        put(canon, len, CANON_MAX, r->method) ||
        put(canon, len, CANON_MAX, "\n") || put(canon, len, CANON_MAX, path) ||
        put(canon, len, CANON_MAX, "\n"))
        return -1;
    for (size_t i = 0; i < r->nquery; i++)
        if ((i && put(canon, len, CANON_MAX, "&")) ||
            put(canon, len, CANON_MAX, q[i].key) ||
            put(canon, len, CANON_MAX, "=") ||
            put(canon, len, CANON_MAX, q[i].value))
            return -1;
    if (put(canon, len, CANON_MAX, "\n"))
        return -1;
    signed_headers[0] = '\0';
    for (size_t i = 0; i < r->nheaders; i++)
        if (put(canon, len, CANON_MAX, h[i].key) ||
            put(canon, len, CANON_MAX, ":") ||
            put(canon, len, CANON_MAX, h[i].value) ||
            put(canon, len, CANON_MAX, "\n") ||
            (i && put(signed_headers, &sl, shcap, ";")) ||
            put(signed_headers, &sl, shcap, h[i].key))
            return -1;
    return put(canon, len, CANON_MAX, "\n") ||
                   put(canon, len, CANON_MAX, signed_headers) ||
                   put(canon, len, CANON_MAX, "\n") ||
                   put(canon, len, CANON_MAX, r->payload_hash)
               ? -1
               : 0;
}

/* The Authorization value for a canonical request canon[0..len) into out
 * (cap bytes). 0 or -1. */
static int sign_canonical(const sigv4_request *r, const char *canon,
                          size_t len, const char *signed_headers, char *out,
                          size_t cap)
{
    char canon_hash[65];
    sigv4_sha256_hex(canon, len, canon_hash);
    char date[9];
    if (strlen(r->amz_date) < 8)
        return -1;
    memcpy(date, r->amz_date, 8);
    date[8] = '\0';
    char scope[256], to_sign[512];
    snprintf(scope, sizeof scope, "%s/%s/%s/aws4_request", date, r->region,
             r->service);
    snprintf(to_sign, sizeof to_sign, "AWS4-HMAC-SHA256\n%s\n%s\n%s",
             r->amz_date, scope, canon_hash);
    uint8_t key[32], sig[32];
    sigv4_signing_key(r->secret_key, date, r->region, r->service, key);
    hmac(key, 32, to_sign, sig);
    OPENSSL_cleanse(key, sizeof key);
    char sighex[65];
    hex(sig, 32, sighex);
    int n = snprintf(out, cap, "AWS4-HMAC-SHA256 Credential=%s/%s,"
                     "SignedHeaders=%s,Signature=%s", r->access_key, scope,
                     signed_headers, sighex);
    return n > 0 && (size_t)n < cap ? 0 : -1;
}

int sigv4_authorization(const sigv4_request *r, char *out, size_t cap)
{
    if (r->nquery > MAX_ITEMS || r->nheaders > MAX_ITEMS)
        return -1;
    /* Only as many items as there are: 64 of them are 147 KB, which
     * malloc would map and unmap on every request (a TLB shootdown on
     * every thread of the process each time). */
    item *q = calloc(r->nquery ? r->nquery : 1, sizeof *q);
    item *h = calloc(r->nheaders ? r->nheaders : 1, sizeof *h);
    char *canon = malloc(CANON_MAX);
    char signed_headers[2048];
    size_t len = 0;
    int rc = q && h && canon && !sorted_items(r, q, h) &&
                     !canonical_request(r, q, h, canon, &len, signed_headers,
                                        sizeof signed_headers)
                 ? sign_canonical(r, canon, len, signed_headers, out, cap)
                 : -1;
    free(q);
    free(h);
    free(canon);
    return rc;
}
