/* The shared AWS files: INI values, a profile's static keys, role or
 * credential_process. */
#include "profile.h"
#include "provider.h"

#include <ctype.h>
#include <openssl/crypto.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
        cr_wipe_free(sk);
        cr_wipe_free(tk);
        ak = profile_get(pf, profile, "aws_access_key_id", 0);
        sk = profile_get(pf, profile, "aws_secret_access_key", 0);
        tk = profile_get(pf, profile, "aws_session_token", 0);
    }
    int rc = ak && sk && cr_cred_set(out, ak, sk, tk, 0) == 0 ? 0 : -1;
    free(ak);
    cr_wipe_free(sk);
    cr_wipe_free(tk);
    return rc;
}

/* Set cr up from the profile; 1 when the profile gives credentials, 0 when
 * it does not, -1 on an error already logged. */
int cr_from_profile(s3_creds *cr, const char *profile)
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
            cr->session_name = cr_session_name();
        if (wit) {
            cr->kind = CRED_WEB_IDENTITY;
            cr->token_file = wit;
            free(src);
            cr_set_source(cr,
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
        cr_set_source(cr,
                 "profile %s: role %s assumed with profile %s", profile, role,
                 src);
        free(src);
        return 1;
    }
    if (profile_static(&pf, profile, &cr->cur, 0) == 0) {
        cr->kind = CRED_STATIC;
        cr_set_source(cr, "profile %s in %s", profile,
                 pf.cred);
        return 1;
    }
    char *proc = profile_get(&pf, profile, "credential_process", 1);
    if (proc) {
        cr->kind = CRED_PROCESS;
        cr->process = proc;
        cr_set_source(cr,
                 "profile %s: credential_process", profile);
        return 1;
    }
    if (profile_static(&pf, profile, &cr->cur, 1) == 0) {
        cr->kind = CRED_STATIC;
        cr_set_source(cr, "profile %s in %s", profile,
                 pf.cfg);
        return 1;
    }
    return 0;
}
