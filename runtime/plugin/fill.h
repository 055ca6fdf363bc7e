/* A plugin instance's options from the config (fill.c). */
#ifndef SK_PLUGIN_FILL_H
#define SK_PLUGIN_FILL_H

#include "config/config.h"
#include "plugin/instance.h"

/* The options of ep (a plugin's table and the engine's common ones) into
 * inst: each value checked and filled, then the defaults, and a required
 * option that is missing refused. SKIPPR_OK, or a status with err set. */
int sk_fill_options(sk_instance *inst, const skippr_option *table,
                    const skippr_option *common, const sk_yaml_doc *doc,
                    const sk_endpoint_cfg *ep, sk_cfg_err *err);

#endif
