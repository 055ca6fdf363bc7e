/* One set of AWS credentials, the settings that choose them, and the
 * helpers every source of the chain shares (cred.c). */
#ifndef SKIPPR_S3_CRED_H
#define SKIPPR_S3_CRED_H

#include <time.h>

#include <skippr/plugin.h>

#define S3_IMDS_TIMEOUT_MS 1000L /* per instance metadata request */
#define S3_KEY_MAX 256
#define S3_TOKEN_MAX 4096

typedef struct s3_creds s3_creds; /* the chain's object (creds.h) */

typedef struct s3_creds_config {
    const skippr_host *host; /* for logging during s3_creds_new() */
    /* the plugin's options; NULL when not given */
    const char *access_key_id, *secret_access_key, *session_token;
    const char *profile;
    const char *region;    /* resolved region, for STS */
    const char *ca_bundle; /* NULL: the system's */
    int verify_tls;
} s3_creds_config;

/* One set of credentials, copied out so a request signs with a consistent
 * set while another thread refreshes. Wipe with s3_cred_wipe(). */
typedef struct s3_cred {
    char access_key[S3_KEY_MAX];
    char secret_key[S3_KEY_MAX];
    char token[S3_TOKEN_MAX]; /* "" when none */
    time_t expires;           /* 0: never */
} s3_cred;

void s3_cred_wipe(s3_cred *c);

/* "2026-12-03T10:00:00Z", with optional fractional seconds and a Z or
 * +hh:mm offset -> Unix seconds; 0 when it cannot be read (also the
 * format of ListObjectsV2's LastModified). */
time_t s3_parse_iso8601(const char *s);

char *cr_env_dup(const char *name); /* $name if set and not empty; caller frees */
void cr_wipe_free(char *s); /* cleanse a secret, then free it */
/* Copy the three parts into *out; -1 (nothing copied) if one is too long. */
int cr_cred_set(s3_cred *out, const char *ak, const char *sk,
                const char *token, time_t expires);
/* Describe where cr's credentials come from (cut to fit: a log label). */
__attribute__((format(printf, 2, 3))) void cr_set_source(s3_creds *cr,
                                                         const char *fmt, ...);
/* AWS_ROLE_SESSION_NAME, else skippr-<time>; caller frees. */
char *cr_session_name(void);

#endif
