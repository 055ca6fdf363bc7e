/* `skipprd validate`: each pipeline's config checked against the plugins'
 * option tables, and with --reach each endpoint asked whether it answers. */
#include <stdio.h>

#include "base/common.h"
#include "cli/commands.h"
#include "config/config.h"
#include "pipeline/pipeline.h"
#include "plugin/loader.h"

static int check_endpoint(const sk_yaml_doc *doc, const skippr_plugin *desc,
                          int is_sink, const sk_endpoint_cfg *ep, int reach,
                          sk_format *fmt)
{
    sk_cfg_err err;
    sk_instance *inst = NULL;
    int start = reach ? SK_START | SK_START_CHECK : 0;
    if (sk_instance_new(desc, is_sink, doc, ep, start, NULL, 0, &inst,
                        &err)) {
        if (*err.msg)
            sk_error("%s", err.msg);
        return 1;
    }
    if (fmt)
        *fmt = inst->format;
    int rc = reach ? sk_instance_probe(inst) : SKIPPR_OK;
    sk_instance_free(inst);
    return rc != SKIPPR_OK;
}

static int validate_one(const sk_yaml_doc *doc, const char *name,
                        sk_registry *reg, int reach, FILE *out)
{
    sk_pipeline_cfg cfg;
    sk_cfg_err err;
    if (sk_config_pipeline(doc, name, &cfg, &err)) {
        sk_error("%s", err.msg);
        return 1;
    }
    const sk_endpoint_cfg *eps[2] = {&cfg.source, &cfg.sink};
    sk_format fmt[2] = {SK_FORMAT_AUTO, SK_FORMAT_JSON};
    int bad = 0;
    for (int i = 0; i < 2; i++) {
        const sk_plugin_lib *lib = sk_registry_find(reg, eps[i]->plugin);
        if (!lib || (i == 0 ? !lib->desc->source : !lib->desc->sink)) {
            sk_cfg_fail(&err, doc, eps[i]->at, "no %s plugin named '%s' "
                        "(see 'skipprd plugins')",
                        i == 0 ? "source" : "sink", eps[i]->plugin);
            sk_error("%s", err.msg);
            return 1;
        }
        /* with reach, every endpoint is tried: one line per problem */
        bad |= check_endpoint(doc, lib->desc, i == 1, eps[i], reach,
                              &fmt[i]);
        if (bad && !reach)
            return 1;
    }
    if (cfg.state_store.plugin) {
        /* The state's store: a plugin that can hold state, with options
         * it takes. */
        const sk_plugin_lib *lib =
            sk_registry_store(reg, doc, &cfg.state_store, &err);
        if (!lib)
            sk_error("%s", err.msg);
        bad |= !lib || check_endpoint(doc, lib->desc, 1, &cfg.state_store,
                                      reach, NULL);
    }
    const char *why = bad ? NULL : sk_format_pair_problem(fmt[0], fmt[1],
                                                          !cfg.route.skim);
    if (why) {
        sk_error("pipeline %s: %s", name, why);
        return 1;
    }
    if (!bad)
        fprintf(out, "pipeline %s: ok (%s -> %s%s)\n", name,
                cfg.source.plugin, cfg.sink.plugin,
                reach ? ", both reached" : "");
    return bad;
}

int sk_cli_validate(const sk_yaml_doc *doc, const char *pipeline, int reach,
                    FILE *out)
{
    sk_registry reg;
    sk_cfg_err err;
    const sk_ynode *dirs =
        sk_ymap_get(sk_ymap_get(doc->root, "skippr"), "plugin_dirs");
    if (sk_registry_load(&reg, doc, dirs, &err)) {
        sk_error("%s", err.msg);
        return 1;
    }
    int bad = 0;
    if (pipeline) {
        bad = validate_one(doc, pipeline, &reg, reach, out);
    } else {
        const char *names[256];
        size_t n = sk_config_pipeline_names(doc, names, 256);
        if (n == 0) {
            sk_error("%s: no pipelines defined",
                     doc->path);
            bad = 1;
        }
        for (size_t i = 0; i < n; i++)
            bad |= validate_one(doc, names[i], &reg, reach, out);
    }
    sk_registry_close(&reg);
    return bad;
}

/* The command line, as parsed. */
