/* STS: AssumeRole signed with a source profile's keys, and
 * AssumeRoleWithWebIdentity (EKS with IRSA). */
#include "provider.h"

#include <ctype.h>
#include <curl/curl.h>
#include <libxml/parser.h>
#include <libxml/tree.h>
#include <openssl/crypto.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "sigv4.h"

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
    } else if (cr_cred_set(out, (const char *)ak, (const char *)sk,
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
        cr_wipe_free(enc);
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
            cr_wipe_free(auth_line);
            cr_wipe_free(token_line);
            *why = "out of memory";
            return -1;
        }
    }
    answer a;
    long st = cr_http_call(cr, "POST", url, l, body, 10000, &a, why);
    curl_slist_free_all(l);
    cr_wipe_free(auth_line);
    cr_wipe_free(token_line);
    if (st < 0)
        return -1;
    int rc = -1;
    if (st != 200)
        *why = st == 403 || st == 400 ? "STS refused the request"
                                      : "STS answered an error status";
    else
        rc = parse_sts((const char *)a.b.data, a.b.len, out, why);
    cr_answer_free(&a);
    return rc;
}

int cr_fetch_web_identity(s3_creds *cr, s3_cred *out, const char **why)
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
    cr_wipe_free(tok);
    if (!body) {
        *why = "out of memory";
        return -1;
    }
    int rc = sts_call(cr, body, NULL, out, why);
    cr_wipe_free(body);
    return rc;
}

int cr_fetch_assume_role(s3_creds *cr, s3_cred *out, const char **why)
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
