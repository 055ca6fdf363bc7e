/* The state kept in a bucket (skipprd_el_storage_mode: s3): an
 * instance of the store sink and the lease on one state folder in it.
 * Used by the run (pipeline.c) and by shards taking over (shard.c).
 *
 * Thread: the pipeline thread.
 */
#include "pipeline/engine.h"

#include <string.h>

#include "base/common.h"
#include "plugin/loader.h"
#include "state/remote.h"

/* skipprd_el_storage_mode: s3: a new instance of the store (a sink with
 * SKIPPR_SINK_STORE) in *inst, and the lease on the state of folder
 * `state_name` in it (*out). Each lease has an instance of its own: its
 * renewal thread uses it beside the pipeline thread. */
int pl_remote_open(engine *e, const char *state_name, sk_instance **inst,
                   sk_remote **out)
{
    const sk_endpoint_cfg *ep = &e->cfg->state_store;
    sk_cfg_err err;
    const sk_plugin_lib *lib = sk_registry_store(&e->reg, e->doc, ep, &err);
    if (!lib) {
        sk_error("%s", err.msg);
        return SKIPPR_INVAL;
    }
    const skippr_sink_ops *ops = lib->desc->sink;
    if (sk_instance_new(lib->desc, 1, e->doc, ep, SK_START, NULL, 0, inst,
                        &err)) {
        if (*err.msg)
            sk_error("%s", err.msg);
        return SKIPPR_INVAL;
    }
    const sk_ynode *b = sk_ymap_get(ep->options, "s3_bucket");
    const sk_ynode *p = sk_ymap_get(ep->options, "s3_prefix");
    const char *pv = p && p->kind == SK_Y_SCALAR ? p->value : "";
    char *where = b && b->kind == SK_Y_SCALAR
                      ? sk_asprintf("s3://%s/%s%s", b->value, pv,
                                    *pv && pv[strlen(pv) - 1] != '/' ? "/"
                                                                      : "")
                      : sk_asprintf("%s: ", (*inst)->label);
    char *prefix = sk_asprintf("%s/%s/", e->cfg->workspace, state_name);
    int rc = where && prefix
                 ? sk_remote_open(ops, (*inst)->ctx, where, prefix,
                                  e->cfg->lease_seconds, &sk_stop_requested,
                                  out)
                 : SKIPPR_NOMEM;
    sk_free(where);
    sk_free(prefix);
    return rc;
}
