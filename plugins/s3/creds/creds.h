/* AWS credentials for the S3 plugin: the AWS SDKs' default chain, and
 * temporary credentials refreshed before they expire.
 *
 * The chain, first match wins (docs/CONFIG.md, "AWS credentials"):
 *   1. the plugin's options access_key_id / secret_access_key
 *      (/ session_token);
 *   2. the environment: AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY,
 *      AWS_SESSION_TOKEN;
 *   3. the profile (option `profile`, AWS_PROFILE, else "default") in the
 *      shared files (AWS_SHARED_CREDENTIALS_FILE, AWS_CONFIG_FILE, else
 *      ~/.aws/credentials and ~/.aws/config): role_arn with source_profile
 *      (STS AssumeRole, signed with the source profile's keys) or with
 *      web_identity_token_file; static keys in the credentials file;
 *      credential_process; static keys in the config file;
 *   4. web identity from the environment (AWS_ROLE_ARN,
 *      AWS_WEB_IDENTITY_TOKEN_FILE, AWS_ROLE_SESSION_NAME): STS
 *      AssumeRoleWithWebIdentity, as on EKS with IRSA;
 *   5. ECS container credentials (AWS_CONTAINER_CREDENTIALS_RELATIVE_URI or
 *      _FULL_URI, AWS_CONTAINER_AUTHORIZATION_TOKEN or _TOKEN_FILE);
 *   6. EC2 instance metadata, IMDSv2 (a session token first; IMDSv1 only if
 *      the token PUT is refused with 403, 404 or 405), at
 *      AWS_EC2_METADATA_SERVICE_ENDPOINT, else http://169.254.169.254;
 *      skipped when AWS_EC2_METADATA_DISABLED=true. Off EC2 this costs one
 *      connection attempt of at most S3_IMDS_TIMEOUT_MS.
 * STS is reached at AWS_ENDPOINT_URL_STS, else AWS_ENDPOINT_URL, else
 * https://sts.REGION.amazonaws.com.
 *
 * Temporary credentials (2.3, 3 with roles or a process, 4, 5, 6) carry an
 * expiry; s3_creds_get() fetches new ones once the expiry is nearer than a
 * quarter of their lifetime (at most 5 minutes), so a request never goes out
 * with credentials about to lapse. If a refresh fails while the old ones
 * still hold, they are used and the refresh is tried again on the next
 * request.
 *
 * Nothing here logs a secret key, a session token, a web identity token,
 * an authorization token, or a response body.
 *
 * Threads: every function may be called from any thread; s3_creds_get()
 * serialises refreshes under the object's mutex.
 */
#ifndef SKIPPR_S3_CREDS_H
#define SKIPPR_S3_CREDS_H

#include <skippr/plugin.h>

#include "cred.h"

/* Find the first source of the chain that is set up and fetch from it.
 * Instances with the same settings share one object (one fetch, one
 * refresh), counted: each caller releases its reference with
 * s3_creds_free(). NULL after logging why (no source found, a source that
 * is set up but fails, out of memory). */
s3_creds *s3_creds_new(const s3_creds_config *cfg);

/* Copy the current credentials into *out, refreshing them first when they
 * are near their expiry (logging through host, the caller's). SKIPPR_OK; SKIPPR_RETRY when they have expired
 * and the refresh failed (the next call tries again). */
int s3_creds_get(s3_creds *cr, const skippr_host *host, s3_cred *out);

/* Where the credentials come from, e.g. "instance metadata (role r)";
 * owned by cr. */
const char *s3_creds_source(const s3_creds *cr);

void s3_creds_free(s3_creds *cr);

#endif
