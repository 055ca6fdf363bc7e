/* A pipeline from command-line flags, written as YAML. See cliflags.h. */
#include "cli/cliflags.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/common.h"
#include "config/identity.h"
#include "cli/urls.h"
#include "config/where.h"

const char *sk_cli_key(const char *flag)
{
    char k[128];
    size_t n = strlen(flag);
    if (n >= sizeof k)
        return NULL;
    for (size_t i = 0; i <= n; i++)
        k[i] = flag[i] == '-' ? '_' : flag[i];
    for (size_t i = 0; sk_config_setting_keys()[i]; i++)
        if (strcmp(k, sk_config_setting_keys()[i]) == 0)
            return sk_config_setting_keys()[i];
    for (size_t i = 0; sk_config_transform_keys()[i]; i++)
        if (strcmp(k, sk_config_transform_keys()[i]) == 0)
            return sk_config_transform_keys()[i];
    return NULL;
}

static int is_transform_key(const char *k)
{
    for (size_t i = 0; sk_config_transform_keys()[i]; i++)
        if (strcmp(k, sk_config_transform_keys()[i]) == 0)
            return 1;
    return 0;
}

/* A YAML scalar for v: plain when nothing in it can be misread, else
 * double-quoted with JSON's escapes. "${" is written "$${" so the loader's
 * interpolation leaves flag values as the shell gave them. */
static int put_scalar(skippr_buf *b, const char *v)
{
    static const char *const special[] = {"true", "false", "yes", "no",
                                          "on", "off", "null", "~", NULL};
    int plain = *v && strchr("-?:,[]{}#&*!|>'\"%@`~ ", *v) == NULL &&
                v[strlen(v) - 1] != ' ' && v[strlen(v) - 1] != ':';
    for (const char *p = v; plain && *p; p++)
        if (!(('a' <= *p && *p <= 'z') || ('A' <= *p && *p <= 'Z') ||
              ('0' <= *p && *p <= '9') || strchr("_./,:=+@-", *p)) ||
            (*p == ':' && p[1] == ' '))
            plain = 0;
    for (size_t i = 0; plain && special[i]; i++)
        if (strcasecmp(v, special[i]) == 0)
            plain = 0;
    /* Numbers stay plain only for settings that take them (the caller
     * passes those through put_value). */
    if (plain && strspn(v, "0123456789.+-eE") == strlen(v))
        plain = 0;
    if (plain)
        return skippr_buf_append(b, v, strlen(v));
    int rc = skippr_buf_putc(b, '"');
    for (const char *p = v; !rc && *p; p++) {
        unsigned char c = (unsigned char)*p;
        if (c == '"' || c == '\\')
            rc = skippr_buf_printf(b, "\\%c", c);
        else if (c < 0x20)
            rc = skippr_buf_printf(b, "\\u%04x", c);
        else if (c == '$' && p[1] == '{')
            rc = skippr_buf_append(b, "$$", 2);
        else
            rc = skippr_buf_putc(b, c);
    }
    return rc ? rc : skippr_buf_putc(b, '"');
}

/* A setting's value: whole numbers, sizes (16MiB) and true/false as
 * written, so the YAML reads like a hand-written one. */
static int put_value(skippr_buf *b, const char *v)
{
    size_t n = strlen(v);
    size_t digits = strspn(v, "0123456789");
    int number = digits > 0 && digits <= 18 &&
                 (digits == n || strspn(v + digits,
                                        "KMGTiBkb") == n - digits);
    if (number || strcmp(v, "true") == 0 || strcmp(v, "false") == 0)
        return skippr_buf_append(b, v, n);
    return put_scalar(b, v);
}

/* One endpoint's block under data_sources:/data_sinks:, with the --*-opt
 * options after the URL's (an option given by both: the flag's wins, so
 * the URL's is left out). */
static int put_endpoint(skippr_buf *b, const char *name, const sk_url_endpoint *e,
                        const char *const *opts, size_t nopts,
                        const char *what, sk_cfg_err *err)
{
    int rc = skippr_buf_printf(b, "  %s:\n    %s:", name, e->plugin);
    size_t written = 0;
    for (size_t i = 0; !rc && i < e->n; i++) {
        size_t kl = strlen(e->keys[i]);
        int overridden = 0;
        for (size_t j = 0; j < nopts; j++)
            if (strncmp(opts[j], e->keys[i], kl) == 0 && opts[j][kl] == '=')
                overridden = 1;
        if (overridden)
            continue;
        rc = skippr_buf_printf(b, "\n      %s: ", e->keys[i]);
        if (!rc)
            rc = put_scalar(b, e->values[i]);
        written++;
    }
    for (size_t j = 0; !rc && j < nopts; j++) {
        const char *eq = strchr(opts[j], '=');
        if (!eq || eq == opts[j]) {
            snprintf(err->msg, sizeof err->msg, "%s %s: expected KEY=VALUE",
                     what, opts[j]);
            return SKIPPR_INVAL;
        }
        for (size_t k = 0; k < j; k++)
            if (strncmp(opts[k], opts[j], (size_t)(eq - opts[j]) + 1) == 0) {
                snprintf(err->msg, sizeof err->msg, "%s %.*s is given "
                         "twice", what, (int)(eq - opts[j]), opts[j]);
                return SKIPPR_INVAL;
            }
        rc = skippr_buf_printf(b, "\n      %.*s: ", (int)(eq - opts[j]),
                           opts[j]);
        if (!rc)
            rc = put_value(b, eq + 1);
        written++;
    }
    if (!rc && written == 0)
        rc = skippr_buf_append(b, " {}", 3);
    return rc ? rc : skippr_buf_putc(b, '\n');
}

/* The state folder of a pipeline by flags (cliflags.h) into out. */
static int flags_state_dir(const sk_cli_pipeline *p, char *out, size_t cap,
                           sk_cfg_err *err)
{
    const char *xdg = getenv("XDG_STATE_HOME");
    const char *home = getenv("HOME");
    char cwd[PATH_MAX];
    int n;
    if (p->state_dir && p->state_dir[0] == '/')
        n = snprintf(out, cap, "%s", p->state_dir);
    else if (p->state_dir && getcwd(cwd, sizeof cwd))
        n = snprintf(out, cap, "%s/%s", cwd, p->state_dir);
    else if (p->state_dir)
        n = -1;
    else if (xdg && xdg[0] == '/')
        n = snprintf(out, cap, "%s/skippr", xdg);
    else if (home && home[0] == '/')
        n = snprintf(out, cap, "%s/.local/state/skippr", home);
    else {
        snprintf(err->msg, sizeof err->msg, "no state folder: HOME is not "
                 "set; give --state-dir DIR");
        return SKIPPR_INVAL;
    }
    if (n < 0 || (size_t)n >= cap) {
        snprintf(err->msg, sizeof err->msg, "--state-dir: too long, or the "
                 "working directory cannot be read");
        return SKIPPR_INVAL;
    }
    return SKIPPR_OK;
}

/* The source's and the sink's URLs into *src and *dst (the caller frees
 * both when this succeeds; nothing is left when it fails). */
static int endpoints(const sk_cli_pipeline *p, const sk_registry *plugins,
                     sk_url_endpoint *src, sk_url_endpoint *dst,
                     sk_cfg_err *err)
{
    int rc = sk_url_parse(plugins, p->source, 0, src, err);
    if (rc) {
        sk_url_free(src);
        return rc;
    }
    if ((rc = sk_url_parse(plugins, p->sink, 1, dst, err))) {
        sk_url_free(src);
        sk_url_free(dst);
    }
    return rc;
}

/* "  KEY: " and v as a scalar (value: as a setting's value), a line. */
static int put_line(skippr_buf *b, const char *indent, const char *key,
                    const char *v, int value)
{
    int rc = skippr_buf_printf(b, "%s%s: ", indent, key);
    if (!rc)
        rc = value ? put_value(b, v) : put_scalar(b, v);
    return rc ? rc : skippr_buf_putc(b, '\n');
}

/* The skippr: section and the pipeline with its settings and transform. */
static int put_head(skippr_buf *b, const sk_cli_pipeline *p,
                    const char *state_dir)
{
    int rc = skippr_buf_append(b, "skippr:\n", 8);
    if (!rc && p->workspace)
        rc = put_line(b, "  ", "workspace", p->workspace, 0);
    if (!rc)
        rc = skippr_buf_printf(b, "  skipprd_el_storage_mode: local\n");
    if (!rc)
        rc = put_line(b, "  ", "state_dir", state_dir, 0);
    if (!rc)
        rc = skippr_buf_printf(b, "pipelines:\n  %s:\n    type: copy\n"
                           "    data_source: data_sources.cli_source\n"
                           "    data_sink: data_sinks.cli_sink\n",
                           p->key[0] ? p->key : p->name ? p->name : "cli");
    for (size_t i = 0; !rc && i < p->nkeys; i++)
        if (!is_transform_key(p->keys[i]))
            rc = put_line(b, "    ", p->keys[i], p->values[i], 1);
    int transform = 0;
    for (size_t i = 0; !rc && i < p->nkeys; i++) {
        if (!is_transform_key(p->keys[i]))
            continue;
        if (!transform++)
            rc = skippr_buf_append(b, "    transform:\n", 15);
        if (!rc)
            rc = put_line(b, "      ", p->keys[i], p->values[i], 0);
    }
    return rc;
}

/* The flags' own mistakes: no URL, a key given twice. */
static int check_flags(const sk_cli_pipeline *p, sk_cfg_err *err)
{
    if (!p->source || !p->sink) {
        snprintf(err->msg, sizeof err->msg, "a pipeline given by flags "
                 "needs --source URL and --sink URL");
        return SKIPPR_INVAL;
    }
    for (size_t i = 0; i < p->nkeys; i++)
        for (size_t j = 0; j < i; j++)
            if (strcmp(p->keys[i], p->keys[j]) == 0) {
                snprintf(err->msg, sizeof err->msg, "--%s is given twice",
                         p->keys[i]);
                return SKIPPR_INVAL;
            }
    return SKIPPR_OK;
}

char *sk_cli_yaml(const sk_cli_pipeline *p, const sk_registry *plugins,
                  sk_cfg_err *err)
{
    sk_url_endpoint src, dst;
    char state_dir[PATH_MAX];
    if (check_flags(p, err) || endpoints(p, plugins, &src, &dst, err))
        return NULL;
    int rc = flags_state_dir(p, state_dir, sizeof state_dir, err);
    skippr_buf b;
    skippr_buf_init(&b, 1u << 20);
    if (!rc)
        rc = put_head(&b, p, state_dir);
    if (!rc)
        rc = skippr_buf_append(&b, "data_sources:\n", 14);
    if (!rc)
        rc = put_endpoint(&b, "cli_source", &src, p->source_opts,
                          p->nsource_opts, "--source-opt", err);
    if (!rc)
        rc = skippr_buf_append(&b, "data_sinks:\n", 12);
    if (!rc)
        rc = put_endpoint(&b, "cli_sink", &dst, p->sink_opts, p->nsink_opts,
                          "--sink-opt", err);
    if (!rc)
        rc = skippr_buf_putc(&b, '\0');
    sk_url_free(&src);
    sk_url_free(&dst);
    if (rc) {
        if (rc != SKIPPR_INVAL)
            snprintf(err->msg, sizeof err->msg, "out of memory");
        skippr_buf_free(&b);
        return NULL;
    }
    return (char *)b.data; /* the buffer's memory, now the caller's */
}

/* Load yaml into *doc; on success the caller owns *doc. */
static int load_text(const char *yaml, sk_yaml_doc **doc, sk_cfg_err *err)
{
    return sk_yaml_load_mem(SK_FLAGS_DOC, yaml, strlen(yaml), doc, err);
}

/* sk_cli_load with the plugins loaded. */
static int load_flags(sk_cli_pipeline *p, const sk_registry *plugins,
                      sk_yaml_doc **doc, char **yaml, sk_cfg_err *err)
{
    char *text = sk_cli_yaml(p, plugins, err);
    if (!text)
        return SKIPPR_INVAL;
    /* Once by name, to read what defines the copy; then under its key. */
    sk_pipeline_cfg cfg;
    int rc = load_text(text, doc, err);
    if (!rc)
        rc = sk_config_pipeline(*doc, p->name ? p->name : "cli", &cfg, err);
    uint64_t h = rc ? 0 : sk_identity_hash(*doc, &cfg, SK_ID_SOURCE |
                                           SK_ID_SINK | SK_ID_TRANSFORM);
    sk_yaml_free(*doc);
    *doc = NULL;
    sk_free(text);
    if (rc)
        return rc;
    snprintf(p->key, sizeof p->key, "%s-%016llx", p->name ? p->name : "cli",
             (unsigned long long)h);
    if (!(text = sk_cli_yaml(p, plugins, err)))
        return SKIPPR_INVAL;
    rc = load_text(text, doc, err);
    if (yaml && !rc)
        *yaml = text;
    else
        sk_free(text);
    return rc;
}

int sk_cli_load(sk_cli_pipeline *p, sk_yaml_doc **doc, char **yaml,
                sk_cfg_err *err)
{
    *doc = NULL;
    p->key[0] = '\0';
    sk_registry reg;
    int rc = sk_registry_load(&reg, NULL, NULL, err);
    if (!rc)
        rc = load_flags(p, &reg, doc, yaml, err);
    sk_registry_close(&reg);
    return rc;
}
