/* A pipeline given by command-line flags alone ("yaml or pure cli flags"),
 * in the shape users know from `aws s3`, rclone and s5cmd:
 *
 *   skipprd sync --source s3://bucket/prefix --sink /data/out \
 *       --batch-time-fields timestamp --batch-time-unit day --once
 *
 * The flags become the YAML text of the same config (sk_cli_yaml), which
 * is then loaded like any file: one parser, one set of checks, and the same
 * pipeline given by YAML and by flags has the same state folder and writes
 * the same objects. `skipprd validate` prints that YAML, so users can move
 * to a file.
 *
 * URLs are the plugins' own (cli/urls.h): s3://BUCKET[/PREFIX] (S3);
 * file://PATH, or a path (File); kafka://HOST:PORT[,HOST:PORT...]/TOPIC
 * (Kafka); mqtt[s]://HOST:PORT/TOPIC (MQTT); http[s]://... (HTTPPull as a
 * source, HTTP as a sink); stdout or - as a sink (Stdout); and any scheme
 * another plugin declares. Plugin options: --source-opt K=V, --sink-opt
 * K=V.
 * Pipeline settings and transform keys: a flag named like the YAML key,
 * with dashes or underscores (--buffer-threshold-seconds 86400).
 */
#ifndef SK_CLIFLAGS_H
#define SK_CLIFLAGS_H

#include <stddef.h>

#include "config/config.h"
#include "plugin/loader.h"

#define SK_CLI_MAX_OPTS 64

typedef struct sk_cli_pipeline {
    const char *source, *sink; /* URLs */
    const char *name;          /* the pipeline's name; NULL: "cli" */
    const char *workspace;     /* NULL: the YAML default */
    const char *state_dir;     /* NULL: the YAML default */
    const char *source_opts[SK_CLI_MAX_OPTS]; /* "K=V" */
    size_t nsource_opts;
    const char *sink_opts[SK_CLI_MAX_OPTS];
    size_t nsink_opts;
    const char *keys[SK_CLI_MAX_OPTS]; /* settings and transform keys */
    const char *values[SK_CLI_MAX_OPTS];
    size_t nkeys;
    /* The pipeline's key in the YAML: "" for the name alone, else (see
     * sk_cli_load) "NAME-" and 16 hex digits of what defines the copy, so
     * that its state folder is its own. */
    char key[192];
} sk_cli_pipeline;

/* The YAML text of the config p describes, its URLs read by the forms of
 * plugins (cli/urls.h). Returns a NUL-terminated
 * string the caller frees (sk_free), or NULL with err set (a bad URL, an
 * option without '=', a key given twice, no home folder for the default
 * state_dir, out of memory). state_dir: --state-dir made absolute, or
 * $XDG_STATE_HOME/skippr ($HOME/.local/state/skippr), never the working
 * directory. */
char *sk_cli_yaml(const sk_cli_pipeline *p, const sk_registry *plugins,
                  sk_cfg_err *err);

/* The config p describes, loaded into *doc (the caller's: sk_yaml_free),
 * with p->key set: two copies by flags never share a state, and the same
 * copy finds its state again from any folder, because the pipeline's key
 * is its name and the hash of what defines the copy (config/identity.h:
 * the source's and the sink's plugin and location, and the transform).
 * Settings that only tune the run are left out of it, so changing them
 * keeps the state. The YAML text goes to *yaml when yaml is not NULL (the
 * caller frees it). The plugins are loaded to read the URLs. SKIPPR_OK,
 * or a status with err set (SKIPPR_INVAL for bad flags, as sk_cli_yaml). */
int sk_cli_load(sk_cli_pipeline *p, sk_yaml_doc **doc, char **yaml,
                sk_cfg_err *err);

/* The YAML key a flag names ("buffer-threshold-seconds" or
 * "buffer_threshold_seconds" -> "buffer_threshold_seconds"), or NULL when
 * it is no pipeline setting or transform key. Borrowed, static. */
const char *sk_cli_key(const char *flag);

#endif
