/* libFuzzer target: the config loader (config.c) and the router it
 * configures: any bytes give a document or a clear error, never a crash,
 * a leak or undefined behaviour. Every pipeline the document names is
 * extracted, and a valid one's transform builds a router. Errors must
 * carry a message.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "config/config.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    sk_yaml_doc *doc = NULL;
    sk_cfg_err err;
    err.msg[0] = '\0';
    if (sk_yaml_load_mem("fuzz.yml", data, size, &doc, &err) != 0) {
        if (!err.msg[0])
            abort(); /* an error without a message */
        return 0;
    }
    const char *names[16];
    size_t n = sk_config_pipeline_names(doc, names, 16);
    for (size_t i = 0; i < n && i < 16; i++) {
        sk_pipeline_cfg cfg;
        err.msg[0] = '\0';
        if (sk_config_pipeline(doc, names[i], &cfg, &err) != 0) {
            if (!err.msg[0])
                abort();
            continue;
        }
        const char *why = NULL;
        sk_router *r = sk_router_new(&cfg.route, &why);
        sk_router_free(r);
    }
    err.msg[0] = '\0';
    sk_pipeline_cfg cfg;
    if (sk_config_pipeline(doc, "no such pipeline", &cfg, &err) == 0 ||
        !err.msg[0])
        abort();
    sk_yaml_free(doc);
    return 0;
}
