/* Credentials from the machine: the ECS container endpoint and EC2
 * instance metadata (IMDSv2, IMDSv1 when the token is refused). */
#include "provider.h"

#include <ctype.h>
#include <curl/curl.h>
#include <jansson.h>
#include <openssl/crypto.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
        rc = cr_parse_json_creds((const char *)a->b.data, "Token", out, why);
    cr_answer_free(a);
    return rc;
}

int cr_fetch_ecs(s3_creds *cr, s3_cred *out, const char **why)
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
        tok = cr_env_dup("AWS_CONTAINER_AUTHORIZATION_TOKEN");
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
    long st = cr_http_call(cr, "GET", cr->url, l, NULL, 5000, &a, why);
    curl_slist_free_all(l);
    cr_wipe_free(line);
    cr_wipe_free(tok);
    return json_answer(st, &a, "the container credentials endpoint "
                       "answered an error", out, why);
}

int cr_fetch_imds(s3_creds *cr, s3_cred *out, const char **why)
{
    char url[1024], hdr[S3_TOKEN_MAX + 64];
    answer a;
    struct curl_slist *l = curl_slist_append(
        NULL, "X-aws-ec2-metadata-token-ttl-seconds: 21600");
    snprintf(url, sizeof url, "%s/latest/api/token", cr->url);
    long st = cr_http_call(cr, "PUT", url, l, NULL, S3_IMDS_TIMEOUT_MS, &a, why);
    curl_slist_free_all(l);
    l = NULL;
    if (st < 0)
        return -1;
    if (st == 200 && a.b.len > 0 && a.b.len < S3_TOKEN_MAX) {
        snprintf(hdr, sizeof hdr, "X-aws-ec2-metadata-token: %s", a.b.data);
        l = curl_slist_append(NULL, hdr);
        OPENSSL_cleanse(hdr, sizeof hdr);
    } else if (st != 403 && st != 404 && st != 405) {
        /* 403/404/405: an IMDS without v2 (or with it off); fall back to
         * IMDSv1. Anything else is a failure. */
        cr_answer_free(&a);
        *why = "the instance metadata token request failed";
        return -1;
    }
    cr_answer_free(&a);
    if (!cr->imds_role[0]) {
        snprintf(url, sizeof url,
                 "%s/latest/meta-data/iam/security-credentials/", cr->url);
        st = cr_http_call(cr, "GET", url, l, NULL, S3_IMDS_TIMEOUT_MS, &a, why);
        if (st == 200) {
            char *role = (char *)a.b.data;
            role[strcspn(role, "\r\n")] = '\0';
            snprintf(cr->imds_role, sizeof cr->imds_role, "%s", role);
        }
        if (st >= 0)
            cr_answer_free(&a);
        if (st != 200 || !cr->imds_role[0]) {
            curl_slist_free_all(l);
            if (st >= 0)
                *why = "the instance has no IAM role";
            return -1;
        }
    }
    snprintf(url, sizeof url, "%s/latest/meta-data/iam/security-credentials/%s",
             cr->url, cr->imds_role);
    st = cr_http_call(cr, "GET", url, l, NULL, S3_IMDS_TIMEOUT_MS * 2, &a, why);
    curl_slist_free_all(l);
    return json_answer(st, &a, "the instance metadata credentials request "
                       "failed", out, why);
}
