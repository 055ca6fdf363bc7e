/* Reading YAML: libyaml's events into a tree whose nodes keep their line
 * and column, ${VAR} replaced as each scalar is read (yaml.h).
 */
#include "config/yaml.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <yaml.h>

#include "base/common.h"
#include "config/where.h" /* sk_cfg_fail */

#define MAX_YAML_DEPTH 64
#define MAX_SCALAR 65536

static void node_free(sk_ynode *n)
{
    if (!n)
        return;
    for (size_t i = 0; i < n->n; i++) {
        if (n->keys)
            node_free(n->keys[i]);
        node_free(n->items[i]);
    }
    sk_free(n->keys);
    sk_free(n->items);
    sk_free(n->value);
    sk_free(n);
}

void sk_yaml_free(sk_yaml_doc *doc)
{
    if (!doc)
        return;
    node_free(doc->root);
    sk_free(doc->path);
    sk_free(doc->dir);
    sk_free(doc);
}

const sk_ynode *sk_ymap_get(const sk_ynode *map, const char *key)
{
    if (!map || map->kind != SK_Y_MAP)
        return NULL;
    for (size_t i = 0; i < map->n; i++)
        if (strcmp(map->keys[i]->value, key) == 0)
            return map->items[i];
    return NULL;
}

/* Replace ${VAR} / ${VAR:-default}. Returns a new string or NULL with
 * *why set (allocation failure or unset variable). */
static char *interpolate(const char *s, char *why, size_t whylen)
{
    skippr_buf b;
    skippr_buf_init(&b, MAX_SCALAR * 4);
    const char *p = s;
    while (*p) {
        if (p[0] == '$' && p[1] == '$' && p[2] == '{') {
            if (skippr_buf_append(&b, "${", 2))
                goto oom;
            p += 3;
            continue;
        }
        if (p[0] == '$' && p[1] == '{') {
            const char *close = strchr(p + 2, '}');
            if (!close) {
                snprintf(why, whylen, "unterminated ${ in value");
                goto fail;
            }
            char name[256];
            size_t n = (size_t)(close - (p + 2));
            if (n == 0 || n >= sizeof name) {
                snprintf(why, whylen, "bad variable reference");
                goto fail;
            }
            memcpy(name, p + 2, n);
            name[n] = '\0';
            const char *def = NULL;
            char *colon = strstr(name, ":-");
            if (colon) {
                *colon = '\0';
                def = colon + 2;
            }
            for (char *c = name; *c; c++) {
                if (!isalnum((unsigned char)*c) && *c != '_') {
                    snprintf(why, whylen, "bad variable name '%.100s'", name);
                    goto fail;
                }
            }
            const char *v = getenv(name);
            if (!v || (!*v && def))
                v = def;
            if (!v) {
                snprintf(why, whylen,
                         "environment variable %.100s is not set (write "
                         "${%.100s:-default} to give a default)", name, name);
                goto fail;
            }
            if (skippr_buf_append(&b, v, strlen(v)))
                goto oom;
            p = close + 1;
            continue;
        }
        if (skippr_buf_putc(&b, (uint8_t)*p++))
            goto oom;
    }
    if (skippr_buf_putc(&b, 0))
        goto oom;
    return (char *)b.data;
oom:
    snprintf(why, whylen, "out of memory or value too long");
fail:
    skippr_buf_free(&b);
    return NULL;
}

typedef struct builder {
    yaml_parser_t parser;
    sk_yaml_doc *doc;
    sk_cfg_err *err;
} builder;

static int push_child(sk_ynode *parent, sk_ynode *child, int as_key)
{
    /* Maps store key and value arrays side by side: a key grows both. */
    if (parent->kind == SK_Y_MAP && !as_key) {
        parent->items[parent->n - 1] = child;
        return 0;
    }
    size_t n = parent->n + 1;
    sk_ynode **items = sk_realloc(parent->items, n * sizeof *items);
    if (!items)
        return -1;
    parent->items = items;
    if (parent->kind == SK_Y_MAP) {
        sk_ynode **keys = sk_realloc(parent->keys, n * sizeof *keys);
        if (!keys)
            return -1;
        parent->keys = keys;
        keys[n - 1] = child;
        items[n - 1] = NULL;
    } else {
        items[n - 1] = child;
    }
    parent->n = n;
    return 0;
}

static sk_ynode *build_node(builder *b, yaml_event_t *ev, int depth);

/* A scalar node n from event ev: its text, ${VAR} interpolated. 0 or -1
 * (b->err says why). */
static int build_scalar(builder *b, sk_ynode *n, const yaml_event_t *ev)
{
    n->kind = SK_Y_SCALAR;
    n->quoted = ev->data.scalar.style != YAML_PLAIN_SCALAR_STYLE;
    if (ev->data.scalar.length > MAX_SCALAR) {
        sk_cfg_fail(b->err, b->doc, n, "value longer than %d bytes",
                    MAX_SCALAR);
        return -1;
    }
    char why[512];
    n->value = interpolate((const char *)ev->data.scalar.value, why,
                           sizeof why);
    if (!n->value) {
        sk_cfg_fail(b->err, b->doc, n, "%s", why);
        return -1;
    }
    return 0;
}

/* Child node child of map or sequence n (a map's key when as_key): kept,
 * or freed and -1 when it cannot be. */
static int add_child(builder *b, sk_ynode *n, sk_ynode *child, int as_key)
{
    int bad = 1;
    if (as_key && child->kind != SK_Y_SCALAR)
        sk_cfg_fail(b->err, b->doc, child, "map keys must be text");
    else if (as_key && sk_ymap_get(n, child->value))
        sk_cfg_fail(b->err, b->doc, child, "duplicate key '%s'",
                    child->value);
    else
        bad = 0;
    if (bad) {
        node_free(child);
        return -1;
    }
    if (push_child(n, child, as_key)) {
        node_free(child);
        sk_cfg_fail(b->err, b->doc, NULL, "out of memory");
        return -1;
    }
    return 0;
}

/* A map or sequence node n: its children, up to the end event. 0 or -1. */
static int build_children(builder *b, sk_ynode *n, int is_map, int depth)
{
    n->kind = is_map ? SK_Y_MAP : SK_Y_SEQ;
    yaml_event_type_t end_type =
        is_map ? YAML_MAPPING_END_EVENT : YAML_SEQUENCE_END_EVENT;
    for (int want_key = 1;; want_key = !is_map || !want_key) {
        yaml_event_t cev;
        if (!yaml_parser_parse(&b->parser, &cev)) {
            sk_cfg_err *e = b->err;
            snprintf(e->msg, sizeof e->msg, "%s:%zu:%zu: %s", b->doc->path,
                     b->parser.problem_mark.line + 1,
                     b->parser.problem_mark.column + 1,
                     b->parser.problem ? b->parser.problem
                                       : "YAML syntax error");
            return -1;
        }
        if (cev.type == end_type) {
            yaml_event_delete(&cev);
            return 0;
        }
        sk_ynode *child = build_node(b, &cev, depth + 1);
        yaml_event_delete(&cev);
        if (!child || add_child(b, n, child, is_map && want_key))
            return -1;
    }
}

/* Parse one node starting with event ev (already pulled). The caller owns
 * the node (node_free); NULL with b->err set. */
static sk_ynode *build_node(builder *b, yaml_event_t *ev, int depth)
{
    sk_ynode *n = sk_calloc(1, sizeof *n);
    if (!n) {
        sk_cfg_fail(b->err, b->doc, NULL, "out of memory");
        return NULL;
    }
    n->line = (int)ev->start_mark.line + 1;
    n->col = (int)ev->start_mark.column + 1;
    int rc = -1;
    if (depth > MAX_YAML_DEPTH)
        sk_cfg_fail(b->err, b->doc, n, "nesting deeper than %d levels",
                    MAX_YAML_DEPTH);
    else if (ev->type == YAML_SCALAR_EVENT)
        rc = build_scalar(b, n, ev);
    else if (ev->type == YAML_ALIAS_EVENT)
        sk_cfg_fail(b->err, b->doc, n, "YAML aliases are not supported");
    else if (ev->type == YAML_MAPPING_START_EVENT ||
             ev->type == YAML_SEQUENCE_START_EVENT)
        rc = build_children(b, n, ev->type == YAML_MAPPING_START_EVENT,
                            depth);
    else
        sk_cfg_fail(b->err, b->doc, n, "unexpected YAML event");
    if (rc) {
        node_free(n);
        return NULL;
    }
    return n;
}

/* The YAML of file f, or (f NULL) of data[0..len), named path in errors. */
static int yaml_load(const char *path, FILE *f, const void *data, size_t len,
                     sk_yaml_doc **out, sk_cfg_err *err)
{
    int rc = SKIPPR_INVAL;
    builder b = {0};
    int parser_ready = 0;
    sk_yaml_doc *doc = sk_calloc(1, sizeof *doc);
    if (!doc || !(doc->path = sk_strdup(path))) {
        snprintf(err->msg, sizeof err->msg, "out of memory");
        rc = SKIPPR_NOMEM;
        goto out;
    }
    if (!yaml_parser_initialize(&b.parser)) {
        snprintf(err->msg, sizeof err->msg, "out of memory");
        rc = SKIPPR_NOMEM;
        goto out;
    }
    parser_ready = 1;
    if (f)
        yaml_parser_set_input_file(&b.parser, f);
    else
        yaml_parser_set_input_string(&b.parser, data, len);
    b.doc = doc;
    b.err = err;
    /* STREAM_START, DOCUMENT_START, root node, DOCUMENT_END, STREAM_END */
    for (;;) {
        yaml_event_t ev;
        if (!yaml_parser_parse(&b.parser, &ev)) {
            snprintf(err->msg, sizeof err->msg, "%s:%zu:%zu: %s", path,
                     b.parser.problem_mark.line + 1,
                     b.parser.problem_mark.column + 1,
                     b.parser.problem ? b.parser.problem : "YAML syntax error");
            goto out;
        }
        yaml_event_type_t t = ev.type;
        if (t == YAML_STREAM_END_EVENT) {
            yaml_event_delete(&ev);
            break;
        }
        if (t == YAML_MAPPING_START_EVENT || t == YAML_SEQUENCE_START_EVENT ||
            t == YAML_SCALAR_EVENT || t == YAML_ALIAS_EVENT) {
            if (doc->root) {
                yaml_event_delete(&ev);
                sk_cfg_fail(err, doc, NULL, "only one YAML document allowed");
                goto out;
            }
            doc->root = build_node(&b, &ev, 0);
            yaml_event_delete(&ev);
            if (!doc->root)
                goto out;
            continue;
        }
        yaml_event_delete(&ev);
    }
    if (!doc->root || doc->root->kind != SK_Y_MAP) {
        sk_cfg_fail(err, doc, doc->root, "the top level must be a map");
        goto out;
    }
    *out = doc;
    doc = NULL;
    rc = SKIPPR_OK;
out:
    if (parser_ready)
        yaml_parser_delete(&b.parser);
    sk_yaml_free(doc);
    return rc;
}

/* The folder file path is in, with symlinks resolved: an absolute path
 * the caller frees (sk_free), or NULL with errno set. */
static char *file_dir(const char *path)
{
    char *real = realpath(path, NULL);
    if (!real)
        return NULL;
    char *slash = strrchr(real, '/');
    char *dir = sk_strndup(real, slash == real ? 1 : (size_t)(slash - real));
    free(real); /* realpath's, from malloc */
    if (!dir)
        errno = ENOMEM;
    return dir;
}

int sk_yaml_load(const char *path, sk_yaml_doc **out, sk_cfg_err *err)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        snprintf(err->msg, sizeof err->msg, "%s: cannot open: %s", path,
                 strerror(errno));
        return SKIPPR_NOENT;
    }
    int rc = yaml_load(path, f, NULL, 0, out, err);
    fclose(f);
    if (!rc && !((*out)->dir = file_dir(path))) {
        snprintf(err->msg, sizeof err->msg, "%s: cannot resolve its folder: "
                 "%s", path, strerror(errno));
        sk_yaml_free(*out);
        *out = NULL;
        rc = SKIPPR_INVAL;
    }
    return rc;
}

int sk_yaml_load_mem(const char *name, const void *data, size_t len,
                     sk_yaml_doc **out, sk_cfg_err *err)
{
    return yaml_load(name, NULL, data, len, out, err);
}
