/* Configuration: the seed-compatible skippr.yml.
 *
 *   skippr:        workspace, skipprd_el_storage_mode (local or s3),
 *                  state_store, state_lease_seconds, state_dir,
 *                  plugin_dirs, threads
 *   pipelines:     NAME: type (copy), data_source, data_sink,
 *                  buffer_threshold_seconds, max_object_bytes, transform: {...}
 *   data_sources:  NAME: { PluginName: { options } }
 *   data_sinks:    NAME: { PluginName: { options } }
 *
 * libyaml parses the file into a small tree that keeps each node's line and
 * column (yaml.h), so every error can name file:line:col (where.h).
 * settings.h holds what a pipeline's config becomes; this file reads it.
 */
#ifndef SK_CONFIG_H
#define SK_CONFIG_H

#include <stddef.h>
#include <stdint.h>

#include "base/optval.h" /* sk_parse_size */
#include "config/path.h"
#include "config/settings.h"
#include "config/where.h"
#include "config/yaml.h"
#include "config/ynode.h"

/* A pipeline's scalar settings (besides type, data_source, data_sink) and
 * its transform: keys, NULL-terminated: what sk_config_pipeline() takes
 * and the flags of `skipprd sync --source URL ...` are named after. */
const char *const *sk_config_setting_keys(void);
const char *const *sk_config_transform_keys(void);

/* Validate the top level and extract one pipeline. Pointers in out borrow
 * from doc. Returns SKIPPR_OK or SKIPPR_INVAL with err set. */
int sk_config_pipeline(const sk_yaml_doc *doc, const char *pipeline,
                       sk_pipeline_cfg *out, sk_cfg_err *err);

/* Names of all pipelines in file order; borrowed from doc. */
size_t sk_config_pipeline_names(const sk_yaml_doc *doc, const char **names,
                                size_t cap);

#endif
