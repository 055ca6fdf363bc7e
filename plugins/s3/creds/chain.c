/* Choosing the first source of the default chain that is set up
 * (creds.h lists the order). */
#include "chain.h"
#include "profile.h"
#include "provider.h"

#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

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

static int truthy(const char *v)
{
    return v && (strcasecmp(v, "true") == 0 || strcmp(v, "1") == 0);
}

/* Set cr up from the first source of the chain; 1 found, 0 none, -1
 * error already logged. */
int cr_choose(s3_creds *cr, const s3_creds_config *cfg)
{
    if (cfg->access_key_id || cfg->secret_access_key) {
        if (cr_cred_set(&cr->cur, cfg->access_key_id, cfg->secret_access_key,
                     cfg->session_token, 0) != 0) {
            LOG(cr, SKIPPR_LOG_ERROR, "access_key_id and secret_access_key "
                "go together (and each is at most %d bytes)", S3_KEY_MAX - 1);
            return -1;
        }
        cr_set_source(cr, "the plugin's options");
        return 1;
    }
    const char *ak = getenv("AWS_ACCESS_KEY_ID");
    const char *sk = getenv("AWS_SECRET_ACCESS_KEY");
    if (ak && *ak && sk && *sk) {
        if (cr_cred_set(&cr->cur, ak, sk, getenv("AWS_SESSION_TOKEN"), 0) != 0) {
            LOG(cr, SKIPPR_LOG_ERROR, "AWS_ACCESS_KEY_ID, "
                "AWS_SECRET_ACCESS_KEY or AWS_SESSION_TOKEN is too long");
            return -1;
        }
        cr_set_source(cr, "the environment");
        return 1;
    }
    const char *p = cfg->profile ? cfg->profile : getenv("AWS_PROFILE");
    int r = cr_from_profile(cr, p && *p ? p : "default");
    if (r != 0)
        return r;
    const char *role = getenv("AWS_ROLE_ARN");
    const char *tf = getenv("AWS_WEB_IDENTITY_TOKEN_FILE");
    if (role && *role && tf && *tf) {
        cr->kind = CRED_WEB_IDENTITY;
        cr->role_arn = strdup(role);
        cr->token_file = strdup(tf);
        cr->session_name = cr_session_name();
        cr_set_source(cr,
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
        cr_set_source(cr,
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
    cr_set_source(cr, "instance metadata (%s)",
             cr->url);
    return 1;
}
