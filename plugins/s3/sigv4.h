/* AWS Signature Version 4 for S3 requests (HMAC-SHA256 via OpenSSL).
 *
 * The signer is a pure function of its inputs: the tests check it against
 * AWS's published S3 examples and against botocore. Nothing here logs, and
 * the caller must never log the secret, the session token or the
 * Authorization header it produces.
 */
#ifndef SKIPPR_S3_SIGV4_H
#define SKIPPR_S3_SIGV4_H

#include <stddef.h>
#include <stdint.h>

#define SIGV4_EMPTY_SHA256                                                     \
    "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"

typedef struct sigv4_kv {
    const char *key;
    const char *value; /* "" for a header or query key without value */
} sigv4_kv;

typedef struct sigv4_request {
    const char *method;       /* "GET" */
    const char *path;         /* raw, not encoded: "/bucket/a b$c" */
    const sigv4_kv *query;    /* raw (not encoded) pairs, any order */
    size_t nquery;
    const sigv4_kv *headers;  /* every header to sign, host included */
    size_t nheaders;
    const char *payload_hash; /* hex SHA-256 of the body */
    const char *amz_date;     /* "20130524T000000Z" */
    const char *region;
    const char *service;      /* "s3" */
    const char *access_key;
    const char *secret_key;
} sigv4_request;

/* Writes "AWS4-HMAC-SHA256 Credential=...,SignedHeaders=...,Signature=..."
 * into out. Returns 0, or -1 if out is too small or an input is invalid. */
int sigv4_authorization(const sigv4_request *r, char *out, size_t cap);

/* The derived signing key for a date ("20130524"), region and service. */
void sigv4_signing_key(const char *secret, const char *date,
                       const char *region, const char *service,
                       uint8_t key[32]);

/* Lowercase hex SHA-256 of data. */
void sigv4_sha256_hex(const void *data, size_t n, char hex[65]);

/* S3's URI encoding: everything but A-Z a-z 0-9 - . _ ~ becomes %XX; '/'
 * stays when keep_slash. Returns the length, or -1 if cap is too small. */
int sigv4_uri_encode(const char *s, int keep_slash, char *out, size_t cap);

#endif
