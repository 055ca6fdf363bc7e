/* What defines a copy. See identity.h. */
#include "config/identity.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/common.h"

/* Plugin options that say where data is or what shape it takes. */
static int is_location_key(const char *k)
{
    static const char *const keys[] = {
        "path", "prefix", "s3_bucket", "s3_prefix", "topic", "brokers",
        "broker", "url", "urls", "format", NULL};
    for (size_t i = 0; keys[i]; i++)
        if (strcmp(keys[i], k) == 0)
            return 1;
    return 0;
}

/* The absolute path abs with symlinks resolved as far as it exists, into
 * out (PATH_MAX bytes); abs as given when it cannot be. */
static void canon_path(const char *abs, char *out)
{
    char head[PATH_MAX];
    snprintf(out, PATH_MAX, "%s", abs);
    if (realpath(abs, head)) {
        snprintf(out, PATH_MAX, "%s", head);
        return;
    }
    const char *slash = strrchr(abs, '/');
    if (!slash || slash == abs || strlen(abs) >= PATH_MAX)
        return;
    memcpy(head, abs, (size_t)(slash - abs));
    head[slash - abs] = '\0';
    char dir[PATH_MAX];
    canon_path(head, dir);
    const char *tail = slash + 1;
    if (strcmp(tail, "..") == 0) {
        char *up = strrchr(dir, '/');
        if (up)
            up[up == dir] = '\0';
        snprintf(out, PATH_MAX, "%s", dir);
    } else if (!*tail || strcmp(tail, ".") == 0) {
        snprintf(out, PATH_MAX, "%s", dir);
    } else {
        size_t dl = strcmp(dir, "/") == 0 ? 0 : strlen(dir);
        size_t tl = strlen(tail);
        if (dl + 1 + tl < PATH_MAX) {
            memcpy(out, dir, dl);
            out[dl] = '/';
            memcpy(out + dl + 1, tail, tl + 1);
        }
    }
}

/* Transform keys that only name the partition folder: the definition's
 * layout line stands for them (pipeline/definition.c), so a state keeps
 * its name and its claim when they change, and is refused instead. */
static int is_naming_key(const char *k)
{
    return strcmp(k, "batch_partition_name") == 0 ||
           strcmp(k, "batch_partition_naming") == 0;
}

static int str_cmp(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* ";key=value" for each location option of map (or each key of it, all
 * set), sorted, appended to b. */
static int put_pairs(skippr_buf *b, const sk_yaml_doc *doc, const sk_ynode *map,
                     int all)
{
    size_t n = map && map->kind == SK_Y_MAP ? map->n : 0, k = 0;
    char **pairs = sk_calloc(n + 1, sizeof *pairs);
    int rc = pairs ? SKIPPR_OK : SKIPPR_NOMEM;
    for (size_t i = 0; !rc && i < n; i++) {
        const char *key = map->keys[i]->value;
        const sk_ynode *v = map->items[i];
        if ((!all && !is_location_key(key)) || (all && is_naming_key(key)) ||
            v->kind != SK_Y_SCALAR)
            continue;
        char real[PATH_MAX], abs[PATH_MAX];
        const char *val = v->value;
        if (strcmp(key, "path") == 0 &&
            sk_config_abs_path(doc, val, abs, sizeof abs) == SKIPPR_OK) {
            canon_path(abs, real);
            val = real;
        }
        if (!(pairs[k++] = sk_asprintf("%s=%s", key, val)))
            rc = SKIPPR_NOMEM;
    }
    if (!rc)
        qsort(pairs, k, sizeof *pairs, str_cmp);
    for (size_t i = 0; !rc && i < k; i++)
        rc = skippr_buf_printf(b, all ? "transform:%s\n" : ";%s", pairs[i]);
    for (size_t i = 0; pairs && i < k; i++)
        sk_free(pairs[i]);
    sk_free(pairs);
    return rc;
}

static int put_endpoint(skippr_buf *b, const sk_yaml_doc *doc, const char *role,
                        const sk_endpoint_cfg *ep)
{
    int rc = skippr_buf_printf(b, "%s:%s", role, ep->plugin ? ep->plugin : "");
    if (!rc)
        rc = put_pairs(b, doc, ep->options, 0);
    return rc ? rc : skippr_buf_putc(b, '\n');
}

char *sk_identity_text(const sk_yaml_doc *doc, const sk_pipeline_cfg *cfg,
                       unsigned parts)
{
    skippr_buf b;
    skippr_buf_init(&b, 1u << 20);
    int rc = SKIPPR_OK;
    if (parts & SK_ID_SOURCE)
        rc = put_endpoint(&b, doc, "source", &cfg->source);
    if (!rc && (parts & SK_ID_SINK))
        rc = put_endpoint(&b, doc, "sink", &cfg->sink);
    if (!rc && (parts & SK_ID_TRANSFORM)) {
        const sk_ynode *pipe = sk_ymap_get(sk_ymap_get(doc->root,
                                                       "pipelines"),
                                           cfg->name);
        rc = put_pairs(&b, doc, sk_ymap_get(pipe, "transform"), 1);
    }
    if (!rc)
        rc = skippr_buf_putc(&b, '\0');
    if (rc) {
        skippr_buf_free(&b);
        return NULL;
    }
    return (char *)b.data; /* the buffer's memory, now the caller's */
}

uint64_t sk_identity_hash(const sk_yaml_doc *doc, const sk_pipeline_cfg *cfg,
                          unsigned parts)
{
    char *t = sk_identity_text(doc, cfg, parts);
    uint64_t h = t ? sk_hash64(t, strlen(t)) : 0;
    sk_free(t);
    return h;
}
