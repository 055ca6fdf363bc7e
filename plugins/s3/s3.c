/* The S3 plugin: a bucket prefix as a source and as a sink.
 *
 * Source. Units are the objects under s3_prefix (ListObjectsV2 with
 * continuation tokens, optional start_after), in S3's UTF-8 byte order; a
 * unit is key + ETag + size. A unit is read with ranged GETs of
 * read_chunk_bytes each, carrying If-Match with the listed ETag, so memory is
 * bounded, a resumed unit starts at its offset, and an object that changes
 * while it is read is an error rather than a mix of two versions. Failed
 * requests are retried with backoff from the byte where they stopped.
 *
 * Sink. An object smaller than part_size is one PutObject; a larger one is a
 * multipart upload with part_size parts. Every body S3 stores carries one
 * checksum S3 verifies: with checksum_crc32c (the default)
 * x-amz-checksum-crc32c, the object's on PutObject and on
 * CompleteMultipartUpload (checksum type FULL_OBJECT), each part's on
 * UploadPart, so S3 verifies the bytes end to end and GetObjectAttributes
 * returns the CRC; without it, Content-MD5. x-amz-content-sha256 is the
 * body's SHA-256 over plain HTTP and UNSIGNED-PAYLOAD over HTTPS, as the
 * AWS SDKs send it. The object's metadata holds
 * the slice id and the CRC32C, which object_check compares (HEAD) during
 * recovery. Before a
 * multipart upload starts, earlier unfinished uploads of the same key (left
 * by a crash) are aborted. A CompleteMultipartUpload that answers 200 with
 * an <Error> body is a failure. A failed part is sent again in place, and
 * a Complete the server refused (5xx, or 200 with an error) again, up to
 * SINK_TRIES times each, before the engine writes the whole object again. The PUT or Complete carries If-None-Match: *
 * (unless object_check found other content that the engine replaces), so a
 * retry after a lost answer gets 412; a HEAD then tells our own slice (done)
 * from someone else's (a fatal conflict).
 *
 * Growing objects (sink.c, SKIPPR_SINK_GROWS | PARTS): the engine's open
 * data slices are multipart uploads whose parts it hands over as they
 * fill, each uploaded from its buffer and noted (upload id, number, ETag)
 * so that a reopen after a crash resumes the upload. Staging pieces
 * (stage.c, SKIPPR_SINK_STAGES) hold the tails the engine's disk budget
 * cannot, under staging_prefix, until the object is complete.
 *
 * Credentials: the AWS SDKs' default chain (creds.h): options,
 * environment, the shared files' profile (static keys, role_arn with
 * source_profile, credential_process), web identity, ECS container
 * credentials, EC2 instance metadata; temporary ones are refreshed before
 * they expire. Region: option, AWS_REGION,
 * AWS_DEFAULT_REGION, the config file, us-east-1. Endpoint: option,
 * AWS_ENDPOINT_URL_S3, AWS_ENDPOINT_URL, else AWS. CA bundle: option,
 * AWS_CA_BUNDLE, else the system's. Secrets, the session
 * token and the Authorization header are never logged.
 *
 * Threads: one instance is used by one thread at a time.
 */
#include "ctx.h"
#include "profile.h"
#include "inventory.h"
#include "list.h"
#include "prefetch.h"
#include "probe.h"
#include "read.h"
#include "request.h"
#include "sink.h"
#include "stage.h"
#include "store.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define OPT(name, type, def, req, field, doc)                                  \
    {name, type, def, req, offsetof(s3_ctx, field), doc}

#define COMMON_OPTIONS                                                         \
    OPT("s3_bucket", SKIPPR_OPT_STRING, NULL, 1, bucket, "Bucket name."),      \
    OPT("s3_prefix", SKIPPR_OPT_STRING, "", 0, prefix,                          \
        "Key prefix (no leading '/')."),                                       \
    OPT("region", SKIPPR_OPT_STRING, NULL, 0, region,                           \
        "Region; default from AWS_REGION, AWS_DEFAULT_REGION, the config "     \
        "file, else us-east-1."),                                              \
    OPT("endpoint", SKIPPR_OPT_STRING, NULL, 0, endpoint,                       \
        "Endpoint URL, e.g. http://127.0.0.1:9000; default from "              \
        "AWS_ENDPOINT_URL_S3 or AWS_ENDPOINT_URL, else AWS."),                 \
    OPT("access_key_id", SKIPPR_OPT_SECRET, NULL, 0, access_key_id,             \
        "Access key; default from the AWS credential chain (environment, "   \
        "profile, web identity, container, instance metadata)."),     \
    OPT("secret_access_key", SKIPPR_OPT_SECRET, NULL, 0, secret_access_key,     \
        "Secret key; never logged."),                                          \
    OPT("session_token", SKIPPR_OPT_SECRET, NULL, 0, session_token,             \
        "Session token for temporary credentials; never logged."),            \
    OPT("profile", SKIPPR_OPT_STRING, NULL, 0, profile,                         \
        "Profile in the shared credentials and config files; default "         \
        "AWS_PROFILE, else 'default'."),                                       \
    OPT("addressing", SKIPPR_OPT_STRING, "auto", 0, addressing,                 \
        "path, virtual, or auto (path with a custom endpoint, virtual on "     \
        "AWS)."),                                                              \
    OPT("verify_tls", SKIPPR_OPT_BOOL, "true", 0, verify_tls,                   \
        "Verify the server's TLS certificate."),                               \
    OPT("ca_bundle", SKIPPR_OPT_STRING, NULL, 0, ca_bundle,                     \
        "CA bundle file for TLS verification; default AWS_CA_BUNDLE, else "    \
        "the system's."),                              \
    OPT("max_attempts", SKIPPR_OPT_INT, "8", 0, max_attempts,                   \
        "Attempts per request before giving up (source side)."),               \
    OPT("timeout_seconds", SKIPPR_OPT_INT, "120", 0, timeout_seconds,           \
        "Timeout of one request.")

static const skippr_option source_options[] = {
    COMMON_OPTIONS,
    OPT("start_after", SKIPPR_OPT_STRING, NULL, 0, start_after,
        "List only keys after this one."),
    OPT("read_chunk_bytes", SKIPPR_OPT_INT, "8MiB", 0, read_chunk_bytes,
        "Bytes per ranged GET."),
    OPT("concurrency", SKIPPR_OPT_INT, "64", 0, concurrency,
        "GETs in flight at once while fetching ahead (1 to 4096)."),
    OPT("prefetch_bytes", SKIPPR_OPT_INT, "0", 0, prefetch_bytes,
        "Memory for objects fetched ahead; more waits (backpressure). 0: "
        "what twice `concurrency` GETs of the listed objects' mean size "
        "hold, at least 8 MiB and at most half the pipeline's "
        "memory_budget."),
    OPT("inventory_manifest", SKIPPR_OPT_STRING, NULL, 0, inventory_manifest,
        "s3://BUCKET/KEY of an S3 Inventory report's manifest.json (CSV "
        "format, with Size, LastModifiedDate and ETag): its rows under "
        "s3_prefix are the units, sorted, and no LIST request is made. "
        "Each GET sends If-Match with the report's ETag."),
    OPT("list_concurrency", SKIPPR_OPT_INT, "32", 0, list_concurrency,
        "Sub-prefixes (found with Delimiter '/') listed at once, each "
        "holding at most a page of keys ahead; 1 lists one page after "
        "another."),
    {NULL, 0, NULL, 0, 0, NULL}};

static const skippr_option sink_options[] = {
    COMMON_OPTIONS,
    OPT("part_size", SKIPPR_OPT_INT, "8MiB", 0, part_size,
        "Multipart part size (5 MiB to 5 GiB); smaller objects are one PUT."),
    OPT("storage_class", SKIPPR_OPT_STRING, NULL, 0, storage_class,
        "x-amz-storage-class of written objects."),
    OPT("server_side_encryption", SKIPPR_OPT_STRING, NULL, 0, sse,
        "x-amz-server-side-encryption of written objects (AES256, aws:kms)."),
    OPT("checksum_crc32c", SKIPPR_OPT_BOOL, "true", 0, checksum,
        "Send x-amz-checksum-crc32c (the object's on a PUT and on Complete, "
        "each part's on UploadPart) so S3 verifies what arrives and "
        "GetObjectAttributes returns it; false for servers that refuse "
        "the headers (bodies then carry Content-MD5)."),
    OPT("conditional_writes", SKIPPR_OPT_BOOL, "true", 0, conditional,
        "Send If-None-Match: * so a retried write never replaces an object "
        "(one that answered 412 is compared by HEAD)."),
    OPT("staging_prefix", SKIPPR_OPT_STRING, "skippr-staging", 0,
        staging_prefix,
        "Where, in the same bucket, the tails of objects still growing go "
        "when wal_disk_budget cannot hold them (each deleted once its "
        "object is complete); give it a lifecycle rule that expires "
        "objects after a few days, for a state folder that is lost."),
    {NULL, 0, NULL, 0, 0, NULL}};

/* Region, endpoint and CA bundle: the options, else the variables and
 * config file the AWS SDKs read. *custom: the endpoint is not AWS's. */
static int resolve_endpoint(s3_ctx *c, int *custom)
{
    int rc = SKIPPR_NOMEM;
    char *profile = c->profile ? strdup(c->profile) : s3_env("AWS_PROFILE");
    if (!profile)
        profile = strdup("default");
    if (!profile)
        goto out;
    char cfg_file[1024], section[300];
    s3_aws_file("AWS_CONFIG_FILE", "config", cfg_file, sizeof cfg_file);
    c->r_region = c->region ? strdup(c->region) : s3_env("AWS_REGION");
    if (!c->r_region && !c->region)
        c->r_region = s3_env("AWS_DEFAULT_REGION");
    if (!c->r_region && !c->region) {
        snprintf(section, sizeof section, "%s%s",
                 strcmp(profile, "default") ? "profile " : "", profile);
        c->r_region = s3_ini_get(cfg_file, section, "region");
    }
    if (!c->r_region && !c->region)
        c->r_region = strdup("us-east-1");
    c->r_endpoint = c->endpoint ? strdup(c->endpoint)
                                : s3_env("AWS_ENDPOINT_URL_S3");
    if (!c->r_endpoint && !c->endpoint)
        c->r_endpoint = s3_env("AWS_ENDPOINT_URL");
    *custom = c->r_endpoint != NULL;
    if (!c->r_endpoint && !c->endpoint && c->r_region) {
        char e[256];
        snprintf(e, sizeof e, "https://s3.%s.amazonaws.com", c->r_region);
        c->r_endpoint = strdup(e);
    }
    c->r_ca = c->ca_bundle ? strdup(c->ca_bundle) : s3_env("AWS_CA_BUNDLE");
    if (!c->r_region || !c->r_endpoint || (c->ca_bundle && !c->r_ca))
        goto out; /* a strdup() failed */
    size_t el = strlen(c->r_endpoint);
    while (el && c->r_endpoint[el - 1] == '/')
        c->r_endpoint[--el] = '\0';
    rc = SKIPPR_OK;
out:
    free(profile);
    return rc;
}

/* The options that need more than their type checked. */
static int check_options(s3_ctx *c, const skippr_host *host, int custom)
{
    if (strcmp(c->addressing, "path") == 0)
        c->path_style = 1;
    else if (strcmp(c->addressing, "virtual") == 0)
        c->path_style = 0;
    else if (strcmp(c->addressing, "auto") == 0)
        c->path_style = custom;
    else {
        LOG(c, SKIPPR_LOG_ERROR, "addressing must be auto, path or virtual");
        return SKIPPR_INVAL;
    }
    if (c->prefix && c->prefix[0] == '/') {
        LOG(c, SKIPPR_LOG_ERROR, "s3_prefix must not start with '/'");
        return SKIPPR_INVAL;
    }
    if (c->part_size == 0)
        c->part_size = 8 << 20; /* sources do not declare the option */
    if (c->part_size < (5 << 20) || c->part_size > (5LL << 30)) {
        LOG(c, SKIPPR_LOG_ERROR, "part_size must be 5 MiB to 5 GiB");
        return SKIPPR_INVAL;
    }
    if (c->read_chunk_bytes && c->read_chunk_bytes < 4096)
        c->read_chunk_bytes = 4096;
    if (c->max_attempts < 1)
        c->max_attempts = 1;
    if (c->concurrency == 0)
        c->concurrency = 64; /* sinks do not declare the option */
    if (c->concurrency < 1 || c->concurrency > 4096) {
        LOG(c, SKIPPR_LOG_ERROR, "concurrency must be 1 to 4096");
        return SKIPPR_INVAL;
    }
    if (c->list_concurrency == 0)
        c->list_concurrency = 32; /* sinks do not declare the option */
    if (c->list_concurrency < 1 || c->list_concurrency > 1024) {
        LOG(c, SKIPPR_LOG_ERROR, "list_concurrency must be 1 to 1024");
        return SKIPPR_INVAL;
    }
    c->prefetch_auto = c->prefetch_bytes == 0;
    if (c->prefetch_bytes == 0)
        c->prefetch_bytes = SKIPPR_HOST_HAS(host, memory_budget) &&
                                    host->memory_budget > 0
                                ? host->memory_budget / 2
                                : 256LL << 20;
    if (c->prefetch_bytes < (1 << 20))
        c->prefetch_bytes = 1 << 20;
    return SKIPPR_OK;
}

/* What init() makes, destroy() frees, also after a failed init(). */
static int init(void *ctx, const skippr_host *host)
{
    s3_ctx *c = ctx;
    int rc, custom = 0;
    c->host = host;
    curl_global_init(CURL_GLOBAL_DEFAULT);
    xmlInitParser();
    if (!(rc = resolve_endpoint(c, &custom)))
        rc = check_options(c, host, custom);
    skippr_backoff_init(&c->backoff, 100, 6400);
    if (!rc && !(c->curl = curl_easy_init()))
        rc = SKIPPR_NOMEM;
    if (!rc) {
        s3_creds_config cc = {.host = host,
                              .access_key_id = c->access_key_id,
                              .secret_access_key = c->secret_access_key,
                              .session_token = c->session_token,
                              .profile = c->profile,
                              .region = c->r_region,
                              .ca_bundle = c->r_ca,
                              .verify_tls = c->verify_tls};
        if (!(c->creds = s3_creds_new(&cc)))
            rc = SKIPPR_INVAL; /* logged */
    }
    if (!rc)
        LOG(c, SKIPPR_LOG_DEBUG, "s3://%s/%s via %s (%s-style, region %s)",
            c->bucket, c->prefix, c->r_endpoint,
            c->path_style ? "path" : "virtual", c->r_region);
    return rc;
}

static void destroy(void *ctx)
{
    s3_ctx *c = ctx;
    s3_pf_stop(c);
    if (c->curl)
        curl_easy_cleanup(c->curl);
    for (int64_t i = 0; c->leasy && i < c->list_concurrency; i++)
        if (c->leasy[i])
            curl_easy_cleanup(c->leasy[i]);
    free(c->leasy);
    if (c->lmulti)
        curl_multi_cleanup(c->lmulti);
    free(c->replace_key);
    free(c->list_last);
    s3_inv_free(c);
    free(c->r_ca);
    free(c->r_region);
    free(c->r_endpoint);
    s3_creds_free(c->creds);
}

static const skippr_source_ops source = {
    .struct_size = sizeof(skippr_source_ops),
    .ctx_size = sizeof(s3_ctx),
    .options = source_options,
    .init = init,
    .destroy = destroy,
    .list = src_list,
    .open = src_open,
    .read = src_read,
    .close = src_close,
    .prefetch = src_prefetch,
    .flags = SKIPPR_SOURCE_MODIFIED,
    .probe = src_probe,
};

static const skippr_sink_ops sink = {
    .struct_size = sizeof(skippr_sink_ops),
    .ctx_size = sizeof(s3_ctx),
    .options = sink_options,
    .init = init,
    .destroy = destroy,
    .object_open = sink_open,
    .object_write = sink_write,
    .object_commit = sink_commit,
    .object_abort = sink_abort,
    .object_check = sink_check,
    .flags = SKIPPR_SINK_GROWS | SKIPPR_SINK_PARTS | SKIPPR_SINK_STAGES |
             SKIPPR_SINK_STORE,
    .grow_open = sink_grow_open,
    .grow_write = sink_grow_write,
    .grow_commit = sink_grow_commit,
    .grow_close = sink_grow_close,
    .grow_discard = sink_grow_discard,
    .grow_part_bytes = sink_grow_part_bytes,
    .grow_note = sink_grow_note,
    .stage_put = sink_stage_put,
    .stage_get = sink_stage_get,
    .stage_clear = sink_stage_clear,
    .stage_copy = sink_stage_copy,
    .store_get = sink_store_get,
    .store_put = sink_store_put,
    .store_put_file = sink_store_put_file,
    .probe = sink_probe,
    .store_delete = sink_store_delete,
    .store_list = sink_store_list,
    .readback_prefix = "s3_prefix",
};

/* --source and --sink: s3://BUCKET[/PREFIX]. */
static const skippr_url_form urls[] = {
    {.scheme = "s3", .roles = SKIPPR_URL_SOURCE | SKIPPR_URL_SINK,
     .host_option = "s3_bucket", .path_option = "s3_prefix",
     .usage = "s3://BUCKET[/PREFIX]"},
    {0},
};

static const skippr_plugin plugin = {
    .abi_version = SKIPPR_ABI_VERSION,
    .struct_size = sizeof(skippr_plugin),
    .name = "S3",
    .description = "Objects in an S3 bucket (AWS or compatible), read with "
                   "ranged GETs and written with PUT or multipart upload.",
    .version = SKIPPR_VERSION_STRING,
    .source = &source,
    .sink = &sink,
    .urls = urls,
};

SKIPPR_PLUGIN_DEFINE(plugin)
