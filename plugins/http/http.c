/* The HTTP plugin's descriptor (http.h). */
#include "http.h"

static const skippr_plugin plugin = {
    .abi_version = SKIPPR_ABI_VERSION,
    .struct_size = sizeof(skippr_plugin),
    .name = "HTTP",
    .description = "HTTP: a push source answering 200 only once a body is "
                   "durable, and a sink POSTing NDJSON with Idempotency-Keys",
    .version = "0.2.0",
    .source = &http_push_ops,
    .sink = &http_sink_ops,
};

SKIPPR_PLUGIN_DEFINE(plugin)
