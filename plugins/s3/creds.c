/* AWS credentials: the SDKs' default chain and refresh. See creds.h. */
#include "creds.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <curl/curl.h>
#include <errno.h>
#include <jansson.h>
#include <libxml/parser.h>
#include <libxml/tree.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/wait.h>
#include <unistd.h>

#include "curl_trace.h"
#include "growbuf.h"
#include "sigv4.h"

#define MAX_ANSWER (64u << 10) /* bound on a credentials answer */
#define MAX_REFRESH_MARGIN 300 /* seconds before expiry to refresh, at most */

typedef enum cred_kind {
    CRED_STATIC,       /* options, environment, keys in a shared file */
    CRED_ASSUME_ROLE,  /* profile role_arn + source_profile */
    CRED_WEB_IDENTITY, /* role_arn + a web identity token file */
    CRED_PROCESS,      /* profile credential_process */
    CRED_ECS,          /* container credentials endpoint */
    CRED_IMDS          /* EC2 instance metadata */
} cred_kind;

struct s3_creds {
    pthread_mutex_t mu;
    /* shared by the instances whose settings hash to key (see
     * s3_creds_new); refs under shared_mu */
    unsigned char key[32];
    int refs;
    struct s3_creds *next;
    const skippr_host *host; /* the caller's, for logs, during a call */
    cred_kind kind;
    char source[300];
    s3_cred cur;
    time_t fetched; /* when cur was fetched */
    /* what a refresh needs; owned */
    char *role_arn, *session_name, *token_file; /* roles */
    s3_cred base;      /* assume role: the source profile's keys */
    char *process;     /* credential_process command line */
    char *url;         /* ECS: the credentials URL; IMDS: the endpoint */
    char *region, *sts_endpoint, *ca_bundle;
    int verify_tls;
    char imds_role[256];
    CURL *curl;
};

#define LOG(cr, lvl, ...) (cr)->host->log((cr)->host, (lvl), __VA_ARGS__)

/* ---- small helpers ---------------------------------------------------------- */

static char *env_dup(const char *name)
{
    const char *v = getenv(name);
    return v && *v ? strdup(v) : NULL;
}

void s3_cred_wipe(s3_cred *c)
{
    OPENSSL_cleanse(c, sizeof *c);
}

static void wipe_free(char *s)
{
    if (s) {
        OPENSSL_cleanse(s, strlen(s));
        free(s);
    }
}

char *s3_ini_get(const char *path, const char *section, const char *key)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return NULL;
    char line[4096], cur[256] = "";
    char *found = NULL;
    while (!found && fgets(line, sizeof line, f)) {
        char *p = line;
        while (isspace((unsigned char)*p))
            p++;
        p[strcspn(p, "\r\n")] = '\0';
        if (*p == '#' || *p == ';')
            continue;
        if (*p == '[') {
            char *e = strchr(p, ']');
            if (e) {
                *e = '\0';
                char *s = p + 1;
                while (isspace((unsigned char)*s))
                    s++;
                size_t n = strlen(s);
                while (n && isspace((unsigned char)s[n - 1]))
                    s[--n] = '\0';
                snprintf(cur, sizeof cur, "%s", s);
            }
            continue;
        }
        if (strcmp(cur, section) != 0)
            continue;
        char *eq = strchr(p, '=');
        if (!eq)
            continue;
        char *k = p, *ke = eq;
        while (ke > k && isspace((unsigned char)ke[-1]))
            ke--;
        *ke = '\0';
        char *v = eq + 1;
        while (isspace((unsigned char)*v))
            v++;
        char *ve = v + strlen(v);
        while (ve > v && isspace((unsigned char)ve[-1]))
            *--ve = '\0';
        if (strcmp(k, key) == 0)
            found = strdup(v);
    }
    OPENSSL_cleanse(line, sizeof line);
    fclose(f);
    return found;
}

void s3_aws_file(const char *env_name, const char *base, char *out,
                 size_t cap)
{
    const char *e = getenv(env_name);
    const char *home = getenv("HOME");
    if (e && *e)
        snprintf(out, cap, "%s", e);
    else
        snprintf(out, cap, "%s/.aws/%s", home ? home : "", base);
}

/* Copy the three parts into *out; -1 (nothing copied) if one is too long. */
static int cred_set(s3_cred *out, const char *ak, const char *sk,
                    const char *token, time_t expires)
{
    if (!ak || !sk || strlen(ak) >= sizeof out->access_key ||
        strlen(sk) >= sizeof out->secret_key ||
        (token && strlen(token) >= sizeof out->token))
        return -1;
    snprintf(out->access_key, sizeof out->access_key, "%s", ak);
    snprintf(out->secret_key, sizeof out->secret_key, "%s", sk);
    snprintf(out->token, sizeof out->token, "%s", token ? token : "");
    out->expires = expires;
    return 0;
}

time_t s3_parse_iso8601(const char *s)
{
    struct tm tm = {0};
    const char *p = s ? strptime(s, "%Y-%m-%dT%H:%M:%S", &tm) : NULL;
    if (!p)
        return 0;
    if (*p == '.')
        for (p++; isdigit((unsigned char)*p); p++)
            ;
    time_t t = timegm(&tm);
    if (*p == '+' || *p == '-') {
        int hh = 0, mm = 0;
        if (sscanf(p + 1, "%2d:%2d", &hh, &mm) != 2)
            return 0;
        long off = (hh * 60L + mm) * 60L;
        t -= *p == '+' ? off : -off;
    } else if (*p != 'Z' && *p != '\0') {
        return 0;
    }
    return t;
}

/* ---- HTTP ------------------------------------------------------------------- */

/* An answer's body, at most MAX_ANSWER bytes; rc says why it stopped. */
typedef struct answer {
    skippr_buf b;
    int rc; /* SKIPPR_RANGE: too large; SKIPPR_NOMEM */
} answer;

static size_t on_data(char *p, size_t sz, size_t n, void *ud)
{
    answer *a = ud;
    a->rc = skippr_buf_put(&a->b, p, sz * n);
    return a->rc ? 0 : sz * n;
}

static void answer_free(answer *a)
{
    if (a->b.p) {
        OPENSSL_cleanse(a->b.p, a->b.n);
        skippr_buf_free(&a->b);
    }
    memset(a, 0, sizeof *a);
}

/* One request on cr's handle. Returns the HTTP status, or -1 on a
 * transport failure (what failed goes to *why, static). The body is in
 * *a (caller frees with answer_free), NUL-terminated. */
static long http_call(s3_creds *cr, const char *method, const char *url,
                      struct curl_slist *hdrs, const char *body,
                      long timeout_ms, answer *a, const char **why)
{
    CURL *h = cr->curl;
    curl_easy_reset(h);
    memset(a, 0, sizeof *a);
    a->b.max = MAX_ANSWER;
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, method);
    if (body) {
        curl_easy_setopt(h, CURLOPT_POSTFIELDS, body);
        curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE, (long)strlen(body));
    } else if (strcmp(method, "PUT") == 0) {
        curl_easy_setopt(h, CURLOPT_POSTFIELDS, "");
        curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE, 0L);
    }
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdrs);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_data);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, a);
    curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, timeout_ms);
    curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, timeout_ms);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_FOLLOWLOCATION, 0L);
    curl_easy_setopt(h, CURLOPT_SSL_VERIFYPEER, cr->verify_tls ? 1L : 0L);
    curl_easy_setopt(h, CURLOPT_SSL_VERIFYHOST, cr->verify_tls ? 2L : 0L);
    if (cr->ca_bundle)
        curl_easy_setopt(h, CURLOPT_CAINFO, cr->ca_bundle);
    skippr_curl_trace(h, cr->host);
    CURLcode cc = curl_easy_perform(h);
    if (cc != CURLE_OK) {
        *why = a->rc == SKIPPR_RANGE   ? "answer too large"
               : a->rc == SKIPPR_NOMEM ? "out of memory"
                                       : curl_easy_strerror(cc);
        answer_free(a);
        return -1;
    }
    long status = 0;
    curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
    if (!a->b.p && skippr_buf_put(&a->b, "", 0)) {
        *why = "out of memory";
        return -1;
    }
    return status;
}

/* {"AccessKeyId", "SecretAccessKey", token_key, "Expiration"} in JSON text
 * (the ECS, IMDS and credential_process answers) -> *out. */
static int parse_json_creds(const char *text, const char *token_key,
                            s3_cred *out, const char **why)
{
    json_error_t err;
    json_t *j = json_loads(text, 0, &err);
    if (!j || !json_is_object(j)) {
        json_decref(j);
        *why = "the answer is not a JSON object";
        return -1;
    }
    const char *ak = json_string_value(json_object_get(j, "AccessKeyId"));
    const char *sk = json_string_value(json_object_get(j, "SecretAccessKey"));
    const char *tk = json_string_value(json_object_get(j, token_key));
    const char *ex = json_string_value(json_object_get(j, "Expiration"));
    time_t expires = ex ? s3_parse_iso8601(ex) : 0;
    int rc = 0;
    if (!ak || !sk) {
        *why = "the answer has no AccessKeyId or SecretAccessKey";
        rc = -1;
    } else if (ex && !expires) {
        *why = "the answer's Expiration is not an ISO 8601 time";
        rc = -1;
    } else if (cred_set(out, ak, sk, tk, expires) != 0) {
        *why = "a key or token in the answer is too long";
        rc = -1;
    }
    /* The parsed copies of the secret stay in jansson's strings until
     * freed; clean what we can reach. */
    if (sk)
        OPENSSL_cleanse((char *)sk, strlen(sk));
    if (tk)
        OPENSSL_cleanse((char *)tk, strlen(tk));
    json_decref(j);
    return rc;
}

/* The text of the first element named `name` under n, or NULL; caller
 * frees with xmlFree. */
static xmlChar *xml_find(xmlNode *n, const char *name)
{
    for (; n; n = n->next) {
        if (n->type == XML_ELEMENT_NODE &&
            strcmp((const char *)n->name, name) == 0)
            return xmlNodeGetContent(n);
        xmlChar *v = xml_find(n->children, name);
        if (v)
            return v;
    }
    return NULL;
}

/* An STS answer (AssumeRole, AssumeRoleWithWebIdentity) -> *out. */
static int parse_sts(const char *text, size_t n, s3_cred *out,
                     const char **why)
{
    xmlDoc *doc = xmlReadMemory(text, (int)n, "sts.xml", NULL,
                                XML_PARSE_NONET | XML_PARSE_NOERROR |
                                    XML_PARSE_NOWARNING);
    if (!doc) {
        *why = "the STS answer is not XML";
        return -1;
    }
    xmlNode *root = xmlDocGetRootElement(doc);
    xmlChar *ak = xml_find(root, "AccessKeyId");
    xmlChar *sk = xml_find(root, "SecretAccessKey");
    xmlChar *tk = xml_find(root, "SessionToken");
    xmlChar *ex = xml_find(root, "Expiration");
    time_t expires = ex ? s3_parse_iso8601((const char *)ex) : 0;
    int rc = 0;
    if (!ak || !sk || !tk || !expires) {
        *why = "the STS answer lacks credentials or their expiration";
        rc = -1;
    } else if (cred_set(out, (const char *)ak, (const char *)sk,
                        (const char *)tk, expires) != 0) {
        *why = "a key or token in the STS answer is too long";
        rc = -1;
    }
    if (sk)
        OPENSSL_cleanse(sk, strlen((const char *)sk));
    if (tk)
        OPENSSL_cleanse(tk, strlen((const char *)tk));
    xmlFree(ak);
    xmlFree(sk);
    xmlFree(tk);
    xmlFree(ex);
    xmlFreeDoc(doc);
    return rc;
}

/* ---- the fetchers ------------------------------------------------------------
 * Each fills *out and returns 0, or returns -1 with *why set (static text,
 * or cr->... buffers; never a secret). */

/* application/x-www-form-urlencoded pairs, values encoded; NULL on
 * overflow or out of memory. Caller frees (wipe: it may hold a token). */
static char *form(const char *const *kv, size_t n)
{
    size_t cap = 64;
    for (size_t i = 0; i < n; i++)
        cap += strlen(kv[i]) * 3 + 2;
    char *out = malloc(cap);
    if (!out)
        return NULL;
    size_t len = 0;
    for (size_t i = 0; i + 1 < n; i += 2) {
        char *enc = malloc(strlen(kv[i + 1]) * 3 + 1);
        if (!enc || sigv4_uri_encode(kv[i + 1], 0, enc,
                                     strlen(kv[i + 1]) * 3 + 1) < 0) {
            free(enc);
            free(out);
            return NULL;
        }
        len += (size_t)snprintf(out + len, cap - len, "%s%s=%s",
                                i ? "&" : "", kv[i], enc);
        wipe_free(enc);
    }
    return out;
}

static int sts_call(s3_creds *cr, const char *body, const s3_cred *sign,
                    s3_cred *out, const char **why)
{
    char url[1024], host[512], date[17], payload[65];
    snprintf(url, sizeof url, "%s/", cr->sts_endpoint);
    const char *hp = strstr(cr->sts_endpoint, "://");
    snprintf(host, sizeof host, "%s", hp ? hp + 3 : cr->sts_endpoint);
    host[strcspn(host, "/")] = '\0';
    struct curl_slist *l = curl_slist_append(
        NULL, "Content-Type: application/x-www-form-urlencoded");
    l = curl_slist_append(l, "Accept: application/xml");
    char *auth_line = NULL, *token_line = NULL;
    if (sign) {
        time_t t = time(NULL);
        struct tm tm;
        gmtime_r(&t, &tm);
        strftime(date, sizeof date, "%Y%m%dT%H%M%SZ", &tm);
        sigv4_sha256_hex(body, strlen(body), payload);
        sigv4_kv sh[4];
        size_t ns = 0;
        sh[ns++] = (sigv4_kv){"content-type",
                              "application/x-www-form-urlencoded"};
        sh[ns++] = (sigv4_kv){"host", host};
        sh[ns++] = (sigv4_kv){"x-amz-date", date};
        if (sign->token[0])
            sh[ns++] = (sigv4_kv){"x-amz-security-token", sign->token};
        sigv4_request sr = {"POST", "/", NULL, 0, sh, ns, payload, date,
                            cr->region, "sts", sign->access_key,
                            sign->secret_key};
        char auth[1024];
        if (sigv4_authorization(&sr, auth, sizeof auth) != 0) {
            curl_slist_free_all(l);
            *why = "cannot sign the STS request";
            return -1;
        }
        char line[64];
        snprintf(line, sizeof line, "X-Amz-Date: %s", date);
        l = curl_slist_append(l, line);
        size_t an = strlen(auth) + 32;
        auth_line = malloc(an);
        if (auth_line) {
            snprintf(auth_line, an, "Authorization: %s", auth);
            l = curl_slist_append(l, auth_line);
        }
        OPENSSL_cleanse(auth, sizeof auth);
        if (sign->token[0]) {
            size_t tn = strlen(sign->token) + 32;
            token_line = malloc(tn);
            if (token_line) {
                snprintf(token_line, tn, "X-Amz-Security-Token: %s",
                         sign->token);
                l = curl_slist_append(l, token_line);
            }
        }
        if (!auth_line || (sign->token[0] && !token_line)) {
            curl_slist_free_all(l);
            wipe_free(auth_line);
            wipe_free(token_line);
            *why = "out of memory";
            return -1;
        }
    }
    answer a;
    long st = http_call(cr, "POST", url, l, body, 10000, &a, why);
    curl_slist_free_all(l);
    wipe_free(auth_line);
    wipe_free(token_line);
    if (st < 0)
        return -1;
    int rc = -1;
    if (st != 200)
        *why = st == 403 || st == 400 ? "STS refused the request"
                                      : "STS answered an error status";
    else
        rc = parse_sts(a.b.p, a.b.n, out, why);
    answer_free(&a);
    return rc;
}

static int fetch_web_identity(s3_creds *cr, s3_cred *out, const char **why)
{
    FILE *f = fopen(cr->token_file, "r");
    if (!f) {
        *why = "cannot read the web identity token file";
        return -1;
    }
    char *tok = malloc(S3_TOKEN_MAX * 4);
    size_t n = tok ? fread(tok, 1, S3_TOKEN_MAX * 4 - 1, f) : 0;
    fclose(f);
    if (!tok) {
        *why = "out of memory";
        return -1;
    }
    tok[n] = '\0';
    while (n && isspace((unsigned char)tok[n - 1]))
        tok[--n] = '\0';
    if (!n) {
        free(tok);
        *why = "the web identity token file is empty";
        return -1;
    }
    const char *kv[] = {"Action", "AssumeRoleWithWebIdentity",
                        "RoleArn", cr->role_arn,
                        "RoleSessionName", cr->session_name,
                        "Version", "2011-06-15",
                        "WebIdentityToken", tok};
    char *body = form(kv, sizeof kv / sizeof *kv);
    wipe_free(tok);
    if (!body) {
        *why = "out of memory";
        return -1;
    }
    int rc = sts_call(cr, body, NULL, out, why);
    wipe_free(body);
    return rc;
}

static int fetch_assume_role(s3_creds *cr, s3_cred *out, const char **why)
{
    const char *kv[] = {"Action", "AssumeRole",
                        "RoleArn", cr->role_arn,
                        "RoleSessionName", cr->session_name,
                        "Version", "2011-06-15"};
    char *body = form(kv, sizeof kv / sizeof *kv);
    if (!body) {
        *why = "out of memory";
        return -1;
    }
    int rc = sts_call(cr, body, &cr->base, out, why);
    free(body);
    return rc;
}

static int fetch_process(s3_creds *cr, s3_cred *out, const char **why)
{
    /* The command line is the user's, run by the shell as the SDKs do;
     * its stdout is read (bounded), its stderr goes to ours. */
    FILE *p = popen(cr->process, "r");
    if (!p) {
        *why = "cannot start credential_process";
        return -1;
    }
    char *text = malloc(MAX_ANSWER + 1);
    size_t n = 0;
    if (text) {
        size_t k;
        while (n < MAX_ANSWER &&
               (k = fread(text + n, 1, MAX_ANSWER - n, p)) > 0)
            n += k;
        text[n] = '\0';
    }
    int st = pclose(p);
    if (!text) {
        *why = "out of memory";
        return -1;
    }
    int rc = -1;
    if (st == -1 || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
        *why = "credential_process failed (its own message is above)";
    else if (n >= MAX_ANSWER)
        *why = "credential_process printed more than 64 KiB";
    else {
        json_t *j = json_loads(text, 0, NULL);
        json_int_t v = json_integer_value(json_object_get(j, "Version"));
        json_decref(j);
        if (v != 1)
            *why = "credential_process must print JSON with \"Version\": 1";
        else
            rc = parse_json_creds(text, "SessionToken", out, why);
    }
    OPENSSL_cleanse(text, n);
    free(text);
    return rc;
}

/* The end of a request for JSON credentials (ECS, IMDS): status st (-1:
 * transport failure, *why already set) and its answer a, which this frees
 * -> *out. `failed` is why when the status is not 200. */
static int json_answer(long st, answer *a, const char *failed, s3_cred *out,
                       const char **why)
{
    if (st < 0)
        return -1;
    int rc = -1;
    if (st != 200)
        *why = failed;
    else
        rc = parse_json_creds(a->b.p, "Token", out, why);
    answer_free(a);
    return rc;
}

static int fetch_ecs(s3_creds *cr, s3_cred *out, const char **why)
{
    struct curl_slist *l = NULL;
    char *tok = NULL;
    const char *tf = getenv("AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE");
    if (tf && *tf) {
        FILE *f = fopen(tf, "r");
        if (!f) {
            *why = "cannot read AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE";
            return -1;
        }
        tok = calloc(1, S3_TOKEN_MAX);
        size_t n = tok ? fread(tok, 1, S3_TOKEN_MAX - 1, f) : 0;
        fclose(f);
        if (tok)
            while (n && isspace((unsigned char)tok[n - 1]))
                tok[--n] = '\0';
    } else {
        tok = env_dup("AWS_CONTAINER_AUTHORIZATION_TOKEN");
    }
    char *line = NULL;
    if (tok && *tok) {
        size_t ln = strlen(tok) + 32;
        line = malloc(ln);
        if (line) {
            snprintf(line, ln, "Authorization: %s", tok);
            l = curl_slist_append(l, line);
        }
    }
    l = curl_slist_append(l, "Accept: application/json");
    answer a;
    long st = http_call(cr, "GET", cr->url, l, NULL, 5000, &a, why);
    curl_slist_free_all(l);
    wipe_free(line);
    wipe_free(tok);
    return json_answer(st, &a, "the container credentials endpoint "
                       "answered an error", out, why);
}

static int fetch_imds(s3_creds *cr, s3_cred *out, const char **why)
{
    char url[1024], hdr[S3_TOKEN_MAX + 64];
    answer a;
    struct curl_slist *l = curl_slist_append(
        NULL, "X-aws-ec2-metadata-token-ttl-seconds: 21600");
    snprintf(url, sizeof url, "%s/latest/api/token", cr->url);
    long st = http_call(cr, "PUT", url, l, NULL, S3_IMDS_TIMEOUT_MS, &a, why);
    curl_slist_free_all(l);
    l = NULL;
    if (st < 0)
        return -1;
    if (st == 200 && a.b.n > 0 && a.b.n < S3_TOKEN_MAX) {
        snprintf(hdr, sizeof hdr, "X-aws-ec2-metadata-token: %s", a.b.p);
        l = curl_slist_append(NULL, hdr);
        OPENSSL_cleanse(hdr, sizeof hdr);
    } else if (st != 403 && st != 404 && st != 405) {
        /* 403/404/405: an IMDS without v2 (or with it off); fall back to
         * IMDSv1. Anything else is a failure. */
        answer_free(&a);
        *why = "the instance metadata token request failed";
        return -1;
    }
    answer_free(&a);
    if (!cr->imds_role[0]) {
        snprintf(url, sizeof url,
                 "%s/latest/meta-data/iam/security-credentials/", cr->url);
        st = http_call(cr, "GET", url, l, NULL, S3_IMDS_TIMEOUT_MS, &a, why);
        if (st == 200) {
            a.b.p[strcspn(a.b.p, "\r\n")] = '\0';
            snprintf(cr->imds_role, sizeof cr->imds_role, "%s", a.b.p);
        }
        if (st >= 0)
            answer_free(&a);
        if (st != 200 || !cr->imds_role[0]) {
            curl_slist_free_all(l);
            if (st >= 0)
                *why = "the instance has no IAM role";
            return -1;
        }
    }
    snprintf(url, sizeof url, "%s/latest/meta-data/iam/security-credentials/%s",
             cr->url, cr->imds_role);
    st = http_call(cr, "GET", url, l, NULL, S3_IMDS_TIMEOUT_MS * 2, &a, why);
    curl_slist_free_all(l);
    return json_answer(st, &a, "the instance metadata credentials request "
                       "failed", out, why);
}

static int fetch(s3_creds *cr, s3_cred *out, const char **why)
{
    switch (cr->kind) {
    case CRED_ASSUME_ROLE:
        return fetch_assume_role(cr, out, why);
    case CRED_WEB_IDENTITY:
        return fetch_web_identity(cr, out, why);
    case CRED_PROCESS:
        return fetch_process(cr, out, why);
    case CRED_ECS:
        return fetch_ecs(cr, out, why);
    case CRED_IMDS:
        return fetch_imds(cr, out, why);
    case CRED_STATIC:
        break;
    }
    *out = cr->cur;
    return 0;
}

/* ---- choosing the source ------------------------------------------------------ */

/* A plain http:// container URL must point at the container agent or the
 * loopback, as the SDKs require; https may go anywhere. */
static int ecs_host_allowed(const char *url)
{
    if (strncasecmp(url, "https://", 8) == 0)
        return 1;
    if (strncasecmp(url, "http://", 7) != 0)
        return 0;
    char host[256];
    const char *h = url + 7;
    if (*h == '[') {
        const char *e = strchr(h, ']');
        if (!e || (size_t)(e - h - 1) >= sizeof host)
            return 0;
        snprintf(host, sizeof host, "%.*s", (int)(e - h - 1), h + 1);
    } else {
        snprintf(host, sizeof host, "%.*s", (int)strcspn(h, ":/"), h);
    }
    if (strcasecmp(host, "localhost") == 0 ||
        strcmp(host, "169.254.170.2") == 0 ||
        strcmp(host, "169.254.170.23") == 0)
        return 1;
    struct in_addr a4;
    struct in6_addr a6;
    if (inet_pton(AF_INET, host, &a4) == 1)
        return (ntohl(a4.s_addr) >> 24) == 127;
    if (inet_pton(AF_INET6, host, &a6) == 1) {
        struct in6_addr ecs;
        inet_pton(AF_INET6, "fd00:ec2::23", &ecs);
        return IN6_IS_ADDR_LOOPBACK(&a6) || memcmp(&a6, &ecs, sizeof a6) == 0;
    }
    return 0;
}

/* Describe where the credentials come from (cut to fit: it is only a
 * label for logs). */
__attribute__((format(printf, 2, 3))) static void
set_source(s3_creds *cr, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(cr->source, sizeof cr->source, fmt, ap);
    va_end(ap);
}

static int truthy(const char *v)
{
    return v && (strcasecmp(v, "true") == 0 || strcmp(v, "1") == 0);
}

/* A profile's value: the credentials file's [name] first, then the config
 * file's [profile name] ([default] for the default). */
typedef struct profile_files {
    char cred[1024], cfg[1024];
} profile_files;

static char *profile_get(const profile_files *pf, const char *profile,
                         const char *key, int cred_file_too)
{
    char *v = cred_file_too ? s3_ini_get(pf->cred, profile, key) : NULL;
    if (!v) {
        char section[300];
        snprintf(section, sizeof section, "%s%s",
                 strcmp(profile, "default") ? "profile " : "", profile);
        v = s3_ini_get(pf->cfg, section, key);
    }
    return v;
}

/* Static keys of a profile, credentials file first; 0 when found. */
static int profile_static(const profile_files *pf, const char *profile,
                          s3_cred *out, int cfg_too)
{
    char *ak = s3_ini_get(pf->cred, profile, "aws_access_key_id");
    char *sk = s3_ini_get(pf->cred, profile, "aws_secret_access_key");
    char *tk = s3_ini_get(pf->cred, profile, "aws_session_token");
    if ((!ak || !sk) && cfg_too) {
        free(ak);
        wipe_free(sk);
        wipe_free(tk);
        ak = profile_get(pf, profile, "aws_access_key_id", 0);
        sk = profile_get(pf, profile, "aws_secret_access_key", 0);
        tk = profile_get(pf, profile, "aws_session_token", 0);
    }
    int rc = ak && sk && cred_set(out, ak, sk, tk, 0) == 0 ? 0 : -1;
    free(ak);
    wipe_free(sk);
    wipe_free(tk);
    return rc;
}

static char *session_name(void)
{
    char *v = env_dup("AWS_ROLE_SESSION_NAME");
    if (v)
        return v;
    char buf[64];
    snprintf(buf, sizeof buf, "skippr-%lld", (long long)time(NULL));
    return strdup(buf);
}

/* Set cr up from the profile; 1 when the profile gives credentials, 0 when
 * it does not, -1 on an error already logged. */
static int from_profile(s3_creds *cr, const char *profile)
{
    profile_files pf;
    s3_aws_file("AWS_SHARED_CREDENTIALS_FILE", "credentials", pf.cred,
                sizeof pf.cred);
    s3_aws_file("AWS_CONFIG_FILE", "config", pf.cfg, sizeof pf.cfg);
    char *role = profile_get(&pf, profile, "role_arn", 1);
    if (role) {
        char *src = profile_get(&pf, profile, "source_profile", 1);
        char *wit = profile_get(&pf, profile, "web_identity_token_file", 1);
        cr->role_arn = role;
        cr->session_name = profile_get(&pf, profile, "role_session_name", 1);
        if (!cr->session_name)
            cr->session_name = session_name();
        if (wit) {
            cr->kind = CRED_WEB_IDENTITY;
            cr->token_file = wit;
            free(src);
            set_source(cr,
                     "profile %s: web identity for %s", profile, role);
            return 1;
        }
        if (!src) {
            LOG(cr, SKIPPR_LOG_ERROR, "profile %s has role_arn but neither "
                "source_profile nor web_identity_token_file (credential_source "
                "is not supported)", profile);
            return -1;
        }
        if (profile_static(&pf, src, &cr->base, 1) != 0) {
            LOG(cr, SKIPPR_LOG_ERROR, "profile %s: its source_profile %s has "
                "no aws_access_key_id and aws_secret_access_key", profile,
                src);
            free(src);
            return -1;
        }
        cr->kind = CRED_ASSUME_ROLE;
        set_source(cr,
                 "profile %s: role %s assumed with profile %s", profile, role,
                 src);
        free(src);
        return 1;
    }
    if (profile_static(&pf, profile, &cr->cur, 0) == 0) {
        cr->kind = CRED_STATIC;
        set_source(cr, "profile %s in %s", profile,
                 pf.cred);
        return 1;
    }
    char *proc = profile_get(&pf, profile, "credential_process", 1);
    if (proc) {
        cr->kind = CRED_PROCESS;
        cr->process = proc;
        set_source(cr,
                 "profile %s: credential_process", profile);
        return 1;
    }
    if (profile_static(&pf, profile, &cr->cur, 1) == 0) {
        cr->kind = CRED_STATIC;
        set_source(cr, "profile %s in %s", profile,
                 pf.cfg);
        return 1;
    }
    return 0;
}

/* Set cr up from the first source of the chain; 1 found, 0 none, -1
 * error already logged. */
static int choose(s3_creds *cr, const s3_creds_config *cfg)
{
    if (cfg->access_key_id || cfg->secret_access_key) {
        if (cred_set(&cr->cur, cfg->access_key_id, cfg->secret_access_key,
                     cfg->session_token, 0) != 0) {
            LOG(cr, SKIPPR_LOG_ERROR, "access_key_id and secret_access_key "
                "go together (and each is at most %d bytes)", S3_KEY_MAX - 1);
            return -1;
        }
        set_source(cr, "the plugin's options");
        return 1;
    }
    const char *ak = getenv("AWS_ACCESS_KEY_ID");
    const char *sk = getenv("AWS_SECRET_ACCESS_KEY");
    if (ak && *ak && sk && *sk) {
        if (cred_set(&cr->cur, ak, sk, getenv("AWS_SESSION_TOKEN"), 0) != 0) {
            LOG(cr, SKIPPR_LOG_ERROR, "AWS_ACCESS_KEY_ID, "
                "AWS_SECRET_ACCESS_KEY or AWS_SESSION_TOKEN is too long");
            return -1;
        }
        set_source(cr, "the environment");
        return 1;
    }
    const char *p = cfg->profile ? cfg->profile : getenv("AWS_PROFILE");
    int r = from_profile(cr, p && *p ? p : "default");
    if (r != 0)
        return r;
    const char *role = getenv("AWS_ROLE_ARN");
    const char *tf = getenv("AWS_WEB_IDENTITY_TOKEN_FILE");
    if (role && *role && tf && *tf) {
        cr->kind = CRED_WEB_IDENTITY;
        cr->role_arn = strdup(role);
        cr->token_file = strdup(tf);
        cr->session_name = session_name();
        set_source(cr,
                 "web identity (AWS_WEB_IDENTITY_TOKEN_FILE) for %s", role);
        return cr->role_arn && cr->token_file && cr->session_name ? 1 : -1;
    }
    const char *full = getenv("AWS_CONTAINER_CREDENTIALS_FULL_URI");
    const char *rel = getenv("AWS_CONTAINER_CREDENTIALS_RELATIVE_URI");
    if ((rel && *rel) || (full && *full)) {
        char url[2048];
        if (rel && *rel)
            snprintf(url, sizeof url, "http://169.254.170.2%s", rel);
        else
            snprintf(url, sizeof url, "%s", full);
        if (!ecs_host_allowed(url)) {
            LOG(cr, SKIPPR_LOG_ERROR, "AWS_CONTAINER_CREDENTIALS_FULL_URI: "
                "plain http is allowed only to the loopback or the ECS "
                "agent (169.254.170.2, 169.254.170.23, fd00:ec2::23); use "
                "https");
            return -1;
        }
        cr->kind = CRED_ECS;
        cr->url = strdup(url);
        set_source(cr,
                 "container credentials (%s)", rel && *rel
                     ? "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI"
                     : "AWS_CONTAINER_CREDENTIALS_FULL_URI");
        return cr->url ? 1 : -1;
    }
    if (truthy(getenv("AWS_EC2_METADATA_DISABLED")))
        return 0;
    const char *ep = getenv("AWS_EC2_METADATA_SERVICE_ENDPOINT");
    cr->kind = CRED_IMDS;
    cr->url = strdup(ep && *ep ? ep : "http://169.254.169.254");
    if (!cr->url)
        return -1;
    size_t n = strlen(cr->url);
    while (n && cr->url[n - 1] == '/')
        cr->url[--n] = '\0';
    set_source(cr, "instance metadata (%s)",
             cr->url);
    return 1;
}

static void creds_destroy(s3_creds *cr);

/* The first credentials of cr's chosen source: fetched now unless they
 * are static. Logs why not. */
static int first_fetch(s3_creds *cr)
{
    if (cr->kind == CRED_STATIC)
        return SKIPPR_OK;
    const char *why = "unknown";
    s3_cred got;
    int rc = fetch(cr, &got, &why) != 0 ? SKIPPR_INVAL : SKIPPR_OK;
    if (rc && cr->kind == CRED_IMDS)
        LOG(cr, SKIPPR_LOG_ERROR, "no AWS credentials: none in the options, "
            "the environment, the shared files, web identity or container "
            "settings, and %s gave none: %s", cr->source, why);
    else if (rc)
        LOG(cr, SKIPPR_LOG_ERROR, "AWS credentials from %s: %s", cr->source,
            why);
    if (!rc) {
        cr->cur = got;
        cr->fetched = time(NULL);
    }
    s3_cred_wipe(&got);
    return rc;
}

/* Says where the credentials came from and when they expire. */
static void log_source(s3_creds *cr)
{
    if (cr->kind == CRED_IMDS) {
        size_t sl = strlen(cr->source);
        snprintf(cr->source + sl, sizeof cr->source - sl, ", role %s",
                 cr->imds_role);
    }
    if (cr->cur.expires) {
        char when[32];
        struct tm tm;
        gmtime_r(&cr->cur.expires, &tm);
        strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", &tm);
        LOG(cr, SKIPPR_LOG_INFO, "AWS credentials from %s, expiring %s "
            "(refreshed before then)", cr->source, when);
    } else {
        LOG(cr, SKIPPR_LOG_DEBUG, "AWS credentials from %s", cr->source);
    }
}

static s3_creds *creds_create(const s3_creds_config *cfg)
{
    s3_creds *made = NULL, *cr = calloc(1, sizeof *cr);
    if (!cr)
        goto out;
    pthread_mutex_init(&cr->mu, NULL);
    cr->host = cfg->host;
    cr->verify_tls = cfg->verify_tls;
    cr->region = strdup(cfg->region ? cfg->region : "us-east-1");
    cr->ca_bundle = cfg->ca_bundle ? strdup(cfg->ca_bundle) : NULL;
    char *sts = env_dup("AWS_ENDPOINT_URL_STS");
    if (!sts)
        sts = env_dup("AWS_ENDPOINT_URL");
    if (!sts && cr->region) {
        char e[300];
        snprintf(e, sizeof e, "https://sts.%s.amazonaws.com", cr->region);
        sts = strdup(e);
    }
    cr->sts_endpoint = sts;
    cr->curl = curl_easy_init();
    if (!cr->region || !cr->sts_endpoint || !cr->curl ||
        (cfg->ca_bundle && !cr->ca_bundle))
        goto out;
    size_t n = strlen(cr->sts_endpoint);
    while (n && cr->sts_endpoint[n - 1] == '/')
        cr->sts_endpoint[--n] = '\0';
    int r = choose(cr, cfg);
    if (r == 0)
        LOG(cr, SKIPPR_LOG_ERROR, "no AWS credentials: none in the options, "
            "the environment, the shared files, web identity or container "
            "settings, and instance metadata is disabled "
            "(AWS_EC2_METADATA_DISABLED)");
    if (r <= 0 || first_fetch(cr))
        goto out;
    log_source(cr);
    made = cr;
    cr = NULL; /* handed to the caller */
out:
    if (cr)
        creds_destroy(cr);
    return made;
}

/* Seconds before expiry at which to refresh: a quarter of the lifetime,
 * at most MAX_REFRESH_MARGIN, at least 1. */
static time_t margin(const s3_creds *cr)
{
    time_t life = cr->cur.expires - cr->fetched;
    time_t m = life / 4;
    if (m > MAX_REFRESH_MARGIN)
        m = MAX_REFRESH_MARGIN;
    return m < 1 ? 1 : m;
}

int s3_creds_get(s3_creds *cr, const skippr_host *host, s3_cred *out)
{
    int rc = SKIPPR_OK;
    pthread_mutex_lock(&cr->mu);
    cr->host = host; /* a refresh logs through the instance asking */
    time_t now = time(NULL);
    if (cr->cur.expires && now >= cr->cur.expires - margin(cr)) {
        const char *why = "unknown";
        s3_cred got;
        if (fetch(cr, &got, &why) == 0) {
            cr->cur = got;
            cr->fetched = now;
            LOG(cr, SKIPPR_LOG_DEBUG, "AWS credentials from %s refreshed",
                cr->source);
        } else if (now < cr->cur.expires) {
            LOG(cr, SKIPPR_LOG_WARN, "refreshing AWS credentials from %s "
                "failed (%s); the current ones hold for %lld s more",
                cr->source, why, (long long)(cr->cur.expires - now));
        } else {
            LOG(cr, SKIPPR_LOG_WARN, "AWS credentials from %s have expired "
                "and refreshing them failed: %s", cr->source, why);
            rc = SKIPPR_RETRY;
        }
        s3_cred_wipe(&got);
    }
    if (rc == SKIPPR_OK)
        *out = cr->cur;
    pthread_mutex_unlock(&cr->mu);
    return rc;
}

const char *s3_creds_source(const s3_creds *cr)
{
    return cr->source;
}

static void creds_destroy(s3_creds *cr)
{
    if (!cr)
        return;
    if (cr->curl)
        curl_easy_cleanup(cr->curl);
    s3_cred_wipe(&cr->cur);
    s3_cred_wipe(&cr->base);
    free(cr->role_arn);
    free(cr->session_name);
    free(cr->token_file);
    wipe_free(cr->process);
    free(cr->url);
    free(cr->region);
    free(cr->sts_endpoint);
    free(cr->ca_bundle);
    pthread_mutex_destroy(&cr->mu);
    free(cr);
}

/* ---- sharing ------------------------------------------------------------------
 * The source and every sink instance of a run (one per upload thread) ask
 * for credentials with the same settings. They share one object, so a run
 * fetches and refreshes once, not once per instance: nine times fewer
 * calls to STS or the metadata service. */

static pthread_mutex_t shared_mu = PTHREAD_MUTEX_INITIALIZER;
static s3_creds *shared_list;

/* SHA-256 of the settings that choose and fetch credentials (the
 * environment is the process's, the same for every instance). */
static void settings_key(const s3_creds_config *cfg, unsigned char key[32])
{
    const char *parts[] = {cfg->access_key_id, cfg->secret_access_key,
                           cfg->session_token, cfg->profile, cfg->region,
                           cfg->ca_bundle, cfg->verify_tls ? "1" : "0"};
    EVP_MD_CTX *md = EVP_MD_CTX_new();
    unsigned int n = 0;
    if (!md || !EVP_DigestInit_ex(md, EVP_sha256(), NULL)) {
        memset(key, 0, 32); /* no sharing key: never matches a real one */
        key[0] = 1;
        EVP_MD_CTX_free(md);
        return;
    }
    for (size_t i = 0; i < sizeof parts / sizeof *parts; i++) {
        const char *v = parts[i] ? parts[i] : "";
        EVP_DigestUpdate(md, parts[i] ? "s" : "n", 1);
        EVP_DigestUpdate(md, v, strlen(v) + 1);
    }
    EVP_DigestFinal_ex(md, key, &n);
    EVP_MD_CTX_free(md);
}

s3_creds *s3_creds_new(const s3_creds_config *cfg)
{
    unsigned char key[32];
    settings_key(cfg, key);
    pthread_mutex_lock(&shared_mu);
    s3_creds *cr = shared_list;
    while (cr && memcmp(cr->key, key, sizeof key) != 0)
        cr = cr->next;
    if (cr) {
        cr->refs++;
    } else if ((cr = creds_create(cfg)) != NULL) {
        /* created under the lock: a second instance waits for this fetch
         * rather than making its own */
        memcpy(cr->key, key, sizeof key);
        cr->refs = 1;
        cr->next = shared_list;
        shared_list = cr;
    }
    pthread_mutex_unlock(&shared_mu);
    return cr;
}

void s3_creds_free(s3_creds *cr)
{
    if (!cr)
        return;
    pthread_mutex_lock(&shared_mu);
    int last = --cr->refs == 0;
    if (last) {
        s3_creds **p = &shared_list;
        while (*p && *p != cr)
            p = &(*p)->next;
        if (*p)
            *p = cr->next;
    }
    pthread_mutex_unlock(&shared_mu);
    if (last)
        creds_destroy(cr);
}
