/* Private to the credential chain (creds/): the chain's object, the
 * sources' fetchers and their one HTTP call. creds.h is what the rest of
 * the plugin sees. */
#ifndef SKIPPR_S3_CREDS_PROVIDER_H
#define SKIPPR_S3_CREDS_PROVIDER_H

#include <curl/curl.h>
#include <pthread.h>
#include <time.h>

#include <skippr/plugin.h>

#include "cred.h"
#include <skippr/buf.h>

#define MAX_ANSWER (64u << 10) /* bound on a credentials answer */

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

/* An answer's body, at most MAX_ANSWER bytes; rc says why it stopped. */
typedef struct answer {
    skippr_buf b;
    int rc; /* SKIPPR_RANGE: too large; SKIPPR_NOMEM */
} answer;

/* http.c */
void cr_answer_free(answer *a);
/* One request on cr's handle. Returns the HTTP status, or -1 on a
 * transport failure (what failed goes to *why, static). The body is in
 * *a (caller frees with cr_answer_free), NUL-terminated. */
long cr_http_call(s3_creds *cr, const char *method, const char *url,
                  struct curl_slist *hdrs, const char *body,
                  long timeout_ms, answer *a, const char **why);
/* {"AccessKeyId", "SecretAccessKey", token_key, "Expiration"} in JSON text
 * (the ECS, IMDS and credential_process answers) -> *out. */
int cr_parse_json_creds(const char *text, const char *token_key,
                        s3_cred *out, const char **why);

/* The fetchers: each fills *out and returns 0, or returns -1 with *why
 * set (static text, or cr->... buffers; never a secret). */
int cr_fetch_web_identity(s3_creds *cr, s3_cred *out, const char **why); /* sts.c */
int cr_fetch_assume_role(s3_creds *cr, s3_cred *out, const char **why);  /* sts.c */
int cr_fetch_process(s3_creds *cr, s3_cred *out, const char **why); /* process.c */
int cr_fetch_ecs(s3_creds *cr, s3_cred *out, const char **why);  /* metadata.c */
int cr_fetch_imds(s3_creds *cr, s3_cred *out, const char **why); /* metadata.c */

#endif
