/* A URL into a plugin and its options: see urls.h. */
#include "cli/urls.h"

#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "base/common.h"

void sk_url_free(sk_url_endpoint *e)
{
    for (size_t i = 0; i < e->n; i++)
        sk_free(e->values[i]);
    e->n = 0;
}

static int add(sk_url_endpoint *e, const char *key, const char *v, size_t n)
{
    if (e->n == SK_URL_MAX_OPTS)
        return SKIPPR_NOMEM;
    if (!(e->values[e->n] = sk_strndup(v, n)))
        return SKIPPR_NOMEM;
    e->keys[e->n++] = key;
    return SKIPPR_OK;
}

/* The form of plugin p for scheme[0..n) in the role, or NULL. */
static const skippr_url_form *form_of(const skippr_plugin *p,
                                      const char *scheme, size_t n, int sink)
{
    for (const skippr_url_form *f = sk_plugin_urls(p); f && f->scheme; f++)
        if (strlen(f->scheme) == n && strncmp(f->scheme, scheme, n) == 0 &&
            (f->roles & (sink ? SKIPPR_URL_SINK : SKIPPR_URL_SOURCE)))
            return f;
    return NULL;
}

/* Every scheme the plugins take in the role, for an error message. */
static void schemes(const sk_registry *reg, int sink, char *out, size_t cap)
{
    out[0] = '\0';
    for (size_t i = 0; i < reg->n; i++) {
        const skippr_url_form *f = sk_plugin_urls(reg->libs[i].desc);
        for (; f && f->scheme; f++) {
            if (!(f->roles & (sink ? SKIPPR_URL_SINK : SKIPPR_URL_SOURCE)))
                continue;
            char one[64];
            snprintf(one, sizeof one, "%s://", f->scheme);
            if (!strstr(out, one))
                sk_list_add(out, cap, one);
        }
    }
    sk_list_add(out, cap, "a path");
    if (sink)
        sk_list_add(out, cap, "- for stdout");
}

/* rest as option key of e, made absolute from here when it is a relative
 * file system path, so the YAML means the same wherever it is saved. */
static int add_rest(sk_url_endpoint *e, const char *key, const char *rest,
                    int fs)
{
    if (!fs || rest[0] == '/')
        return add(e, key, rest, strlen(rest));
    char cwd[PATH_MAX];
    while (rest[0] == '.' && rest[1] == '/')
        rest += 2 + strspn(rest + 2, "/");
    if (!getcwd(cwd, sizeof cwd))
        return SKIPPR_NOMEM;
    char *abs = strcmp(rest, ".") == 0 || !*rest
                    ? sk_strdup(cwd)
                    : sk_asprintf("%s/%s", cwd, rest);
    int rc = abs ? add(e, key, abs, strlen(abs)) : SKIPPR_NOMEM;
    sk_free(abs);
    return rc;
}

/* The options of form f from url, whose part after "SCHEME://" is rest.
 * SKIPPR_INVAL when a part the form needs is missing or one it has no
 * option for is given. */
static int fill(sk_url_endpoint *e, const skippr_plugin *p,
                const skippr_url_form *f, const char *url, const char *rest,
                int sink)
{
    size_t hl = strcspn(rest, "/");
    const char *path = rest[hl] ? rest + hl + 1 : "";
    int rc = SKIPPR_OK;
    if (f->url_option)
        rc = add(e, f->url_option, url, strlen(url));
    if (!rc && f->host_option) {
        if (hl == 0)
            return SKIPPR_INVAL;
        rc = f->flags & SKIPPR_URL_HOST_SCHEME
                 ? add(e, f->host_option, url, (size_t)(rest - url) + hl)
                 : add(e, f->host_option, rest, hl);
    }
    if (!rc && (f->flags & SKIPPR_URL_PATH_REQUIRED) && !*path)
        return SKIPPR_INVAL;
    if (!rc && f->path_option && *path)
        rc = add(e, f->path_option, path, strlen(path));
    if (!rc && f->rest_option) {
        if (!*rest)
            return SKIPPR_INVAL;
        const skippr_option *o = sk_plugin_option(p, sink, f->rest_option);
        rc = add_rest(e, f->rest_option, rest,
                      o && (o->required & SKIPPR_OPT_FS_PATH));
    }
    if (!rc && !f->url_option && !f->host_option && !f->rest_option && *rest)
        return SKIPPR_INVAL; /* a part no option takes */
    return rc;
}

int sk_url_parse(const sk_registry *reg, const char *url, int sink,
                 sk_url_endpoint *e, sk_cfg_err *err)
{
    memset(e, 0, sizeof *e);
    const char *what = sink ? "--sink" : "--source";
    const char *given = url;
    char spelled[PATH_MAX + 16];
    if (strcmp(url, "-") == 0 || strcmp(url, "stdout") == 0 ||
        strcmp(url, "stdout:") == 0)
        url = "stdout://";
    else if (!strstr(url, "://")) {
        snprintf(spelled, sizeof spelled, "file://%s", url);
        url = spelled;
    }
    const char *sep = strstr(url, "://");
    size_t sl = (size_t)(sep - url);
    const skippr_url_form *f = NULL;
    const skippr_plugin *p = NULL;
    for (size_t i = 0; i < reg->n && !f; i++)
        if ((f = form_of(reg->libs[i].desc, url, sl, sink)))
            p = reg->libs[i].desc;
    if (!f) {
        char list[512];
        schemes(reg, sink, list, sizeof list);
        int other = 0;
        for (size_t i = 0; i < reg->n && !other; i++)
            other = form_of(reg->libs[i].desc, url, sl, !sink) != NULL;
        snprintf(err->msg, sizeof err->msg, "%s %s: %s (%s)", what, given,
                 other ? (sink ? "that can only be a source"
                               : "that can only be a sink")
                       : "unknown scheme",
                 list);
        return SKIPPR_INVAL;
    }
    e->plugin = p->name;
    int rc = fill(e, p, f, url, sep + 3, sink);
    if (rc == SKIPPR_INVAL)
        snprintf(err->msg, sizeof err->msg, "%s %s: expected %s", what,
                 given, f->usage ? f->usage : f->scheme);
    else if (rc)
        snprintf(err->msg, sizeof err->msg, "out of memory");
    return rc;
}
