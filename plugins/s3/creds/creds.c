/* AWS credentials: the chain's object, shared by the instances with the
 * same settings, and its refresh. The sources are in the files beside
 * this one (provider.h); the chain itself in creds.h. */
#include "chain.h"
#include "creds.h"
#include "provider.h"

#include <curl/curl.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MAX_REFRESH_MARGIN 300 /* seconds before expiry to refresh, at most */

static int fetch(s3_creds *cr, s3_cred *out, const char **why)
{
    switch (cr->kind) {
    case CRED_ASSUME_ROLE:
        return cr_fetch_assume_role(cr, out, why);
    case CRED_WEB_IDENTITY:
        return cr_fetch_web_identity(cr, out, why);
    case CRED_PROCESS:
        return cr_fetch_process(cr, out, why);
    case CRED_ECS:
        return cr_fetch_ecs(cr, out, why);
    case CRED_IMDS:
        return cr_fetch_imds(cr, out, why);
    case CRED_STATIC:
        break;
    }
    *out = cr->cur;
    return 0;
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
    char *sts = cr_env_dup("AWS_ENDPOINT_URL_STS");
    if (!sts)
        sts = cr_env_dup("AWS_ENDPOINT_URL");
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
    int r = cr_choose(cr, cfg);
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
    cr_wipe_free(cr->process);
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
