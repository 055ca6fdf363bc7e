/* The credential sources' one HTTP call (STS, the container endpoint,
 * instance metadata) and the JSON answer the SDKs share. */
#include "provider.h"

#include <curl/curl.h>
#include <jansson.h>
#include <openssl/crypto.h>
#include <stdlib.h>
#include <string.h>

#include "curl_trace.h"
#include <skippr/buf.h>

static size_t on_data(char *p, size_t sz, size_t n, void *ud)
{
    answer *a = ud;
    a->rc = skippr_buf_append(&a->b, p, sz * n);
    if (!a->rc && !skippr_buf_cstr(&a->b)) /* answers are read as text */
        a->rc = SKIPPR_NOMEM;
    return a->rc ? 0 : sz * n;
}

void cr_answer_free(answer *a)
{
    if (a->b.data) {
        OPENSSL_cleanse(a->b.data, a->b.len);
        skippr_buf_free(&a->b);
    }
    memset(a, 0, sizeof *a);
}

/* One request on cr's handle. Returns the HTTP status, or -1 on a
 * transport failure (what failed goes to *why, static). The body is in
 * *a (caller frees with answer_free), NUL-terminated. */
long cr_http_call(s3_creds *cr, const char *method, const char *url,
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
        cr_answer_free(a);
        return -1;
    }
    long status = 0;
    curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
    if (!a->b.data && !skippr_buf_cstr(&a->b)) {
        *why = "out of memory";
        return -1;
    }
    return status;
}

/* {"AccessKeyId", "SecretAccessKey", token_key, "Expiration"} in JSON text
 * (the ECS, IMDS and credential_process answers) -> *out. */
int cr_parse_json_creds(const char *text, const char *token_key,
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
    } else if (cr_cred_set(out, ak, sk, tk, expires) != 0) {
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
