/* The HTTP plugin's descriptor (http.h). */
#include "http.h"

/* --sink http[s]://...: the URL to POST to. (As a source, an http URL is
 * HTTPPull's.) */
static const skippr_url_form urls[] = {
    {.scheme = "http", .roles = SKIPPR_URL_SINK, .url_option = "url",
     .usage = "http://HOST[:PORT]/PATH"},
    {.scheme = "https", .roles = SKIPPR_URL_SINK, .url_option = "url",
     .usage = "https://HOST[:PORT]/PATH"},
    {0},
};

static const skippr_plugin plugin = {
    .abi_version = SKIPPR_ABI_VERSION,
    .struct_size = sizeof(skippr_plugin),
    .name = "HTTP",
    .description = "HTTP: a push source answering 200 only once a body is "
                   "durable, and a sink POSTing NDJSON with Idempotency-Keys",
    .version = "0.2.0",
    .source = &http_push_ops,
    .sink = &http_sink_ops,
    .urls = urls,
};

SKIPPR_PLUGIN_DEFINE(plugin)
