/* The definition a state belongs to. A state records what it copies
 * (config/identity.h: the source's and the sink's plugin and location,
 * and the transform) in {state}/definition when it is first used; a run
 * whose pipeline is defined otherwise stops before reading or writing
 * anything. Its ledger names units by their place in one source, its
 * objects by one layout in one sink: the same state under another
 * definition would take another archive's files for changed versions of
 * its own, or leave a copy half in one layout and half in another.
 *
 * The text ends with the partition folders the state writes
 * ("layout:partition=p_tenant_id="): the column's name is set by keys
 * (batch_partition_name, batch_partition_naming) that identity.h leaves
 * out, so that a state keeps its name when only they change and refuses
 * to go on in another layout.
 *
 * A state from before this file, or from before the layout line, wrote
 * each partition path's folder under the path's own name. It adopts the
 * definition it is next run with when that gives the same folders (or it
 * wrote nothing yet), and refuses otherwise, naming the key that keeps
 * the old names. The file goes to the state store too (state off the
 * box).
 * Pipelines given by flags name their state by this same text, so theirs
 * never differs. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "base/fsio.h"
#include "config/identity.h"
#include "pipeline/engine.h"
#include "route/route.h"
#include "state/ledger.h"

#define DEFINITION_MAX 65536

/* The file's text into buf (cap bytes, NUL-terminated): SKIPPR_OK,
 * SKIPPR_NOENT when there is none, or SKIPPR_IO. */
static int read_definition(const char *path, char *buf, size_t cap)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return errno == ENOENT ? SKIPPR_NOENT : SKIPPR_IO;
    size_t n = fread(buf, 1, cap - 1, f);
    int bad = ferror(f) || n == cap - 1;
    fclose(f);
    buf[n] = '\0';
    return bad ? SKIPPR_IO : SKIPPR_OK;
}

/* Non-zero when text (lines) holds the line p[0..n). */
static int has_line(const char *text, const char *p, size_t n)
{
    for (const char *t = text; *t;) {
        const char *nl = strchr(t, '\n');
        size_t len = nl ? (size_t)(nl - t) : strlen(t);
        if (len == n && memcmp(t, p, n) == 0)
            return 1;
        t += len + (nl != NULL);
    }
    return 0;
}

/* The lines of a that b lacks, into out as "'line', 'line'" (NUL-
 * terminated; "nothing else" when none). SKIPPR_OK or SKIPPR_NOMEM. */
static int missing_lines(const char *a, const char *b, skippr_buf *out)
{
    int rc = SKIPPR_OK;
    for (const char *t = a; *t && !rc;) {
        const char *nl = strchr(t, '\n');
        size_t len = nl ? (size_t)(nl - t) : strlen(t);
        if (len && !has_line(b, t, len))
            rc = skippr_buf_printf(out, "%s'%.*s'", out->len ? ", " : "",
                               (int)len, t);
        t += len + (nl != NULL);
    }
    if (!rc && !out->len)
        rc = skippr_buf_printf(out, "nothing else");
    return rc ? rc : skippr_buf_append(out, "", 1);
}

/* The stop: what the state was made for, what the run asks, the ways on. */
static void refuse(const engine *e, const char *was, const char *now)
{
    skippr_buf gone, added;
    skippr_buf_init(&gone, DEFINITION_MAX);
    skippr_buf_init(&added, DEFINITION_MAX);
    int bad = missing_lines(was, now, &gone) || missing_lines(now, was, &added);
    sk_error("pipeline '%s': its state (%s, in %s) was made for another "
             "definition: it had %s, the config now has %s. Continuing it "
             "would mix two copies in one ledger. To copy the new "
             "definition, give the pipeline another name or workspace (a "
             "state of its own); to go on with the old one, undo the "
             "change. Nothing was read or written.",
             e->cfg->name, sk_state_id(e->st), sk_state_dir(e->st),
             bad ? "?" : (const char *)gone.data,
             bad ? "?" : (const char *)added.data);
    skippr_buf_free(&gone);
    skippr_buf_free(&added);
}

/* Non-zero when the state has begun a copy: a slice made, a unit
 * recorded. */
static int state_wrote(const engine *e)
{
    return sk_state_made_slices(e->st) ||
           sk_ledger_count(sk_state_ledger(e->st)) > 0;
}

/* The partition folders the router would write with each path naming its
 * own: the layout of states from before the layout line. Caller frees. */
static char *per_path_heads(const engine *e)
{
    sk_route_config rc = e->cfg->route;
    rc.partition_per_path = 1;
    const char *err = NULL;
    sk_router *r = sk_router_new(&rc, &err);
    char *heads = r ? sk_router_part_heads(r) : NULL;
    sk_router_free(r);
    return heads;
}

/* The stop for a state that wrote partition folders old (heads, as
 * sk_router_part_heads gives them) that this config would continue as
 * now[0..now_len). The hint names the key that keeps the old names. */
static void refuse_layout(const engine *e, const char *old, const char *now,
                          size_t now_len)
{
    char *per_path = per_path_heads(e);
    int was_per_path = per_path && strcmp(per_path, old) == 0;
    sk_free(per_path);
    sk_error("pipeline '%s': its state (%s, in %s) wrote partition folders "
             "%s..., and this config names them %.*s... Going on would "
             "split every partition over two folder names. To keep the old "
             "names for this state, %s; to copy into the new layout, give "
             "the pipeline a new state and sink prefix. Nothing was read "
             "or written.", e->cfg->name, sk_state_id(e->st),
             sk_state_dir(e->st), old,
             (int)now_len, now,
             was_per_path ? "set `batch_partition_naming: per_path` in the "
                            "transform (flag --batch-partition-naming "
                            "per_path)"
                          : "set the transform's batch_partition_name "
                            "(flag --batch-partition-name) back to the "
                            "name it had");
}

/* The layout line's value in a definition's text, and its length; NULL
 * when it has none. */
static const char *layout_of(const char *text, size_t *len)
{
    static const char tag[] = "\nlayout:partition=";
    const char *l = strstr(text, tag);
    if (!l)
        return NULL;
    l += sizeof tag - 1;
    *len = strcspn(l, "\n");
    return l;
}

/* A state whose definition (was, NULL when it has none) predates the
 * layout line: it wrote folders per path. Adopt now when that layout is
 * this config's (or it wrote nothing yet); else refuse. */
static int adopt_old(engine *e, const char *was, const char *now,
                     const char *path)
{
    size_t cur_len = 0;
    const char *cur = layout_of(now, &cur_len);
    size_t head = cur ? (size_t)(strstr(now, "\nlayout:") - now) + 1
                      : strlen(now);
    if (was && (strlen(was) != head || memcmp(was, now, head) != 0)) {
        refuse(e, was, now);
        return SKIPPR_CHANGED;
    }
    int wrote = state_wrote(e);
    char *old = wrote ? per_path_heads(e) : NULL;
    int rc = wrote && !old ? SKIPPR_NOMEM : SKIPPR_OK;
    if (!rc && old && (strlen(old) != cur_len ||
                       memcmp(old, cur, cur_len) != 0)) {
        refuse_layout(e, old, cur, cur_len);
        rc = SKIPPR_CHANGED;
    }
    sk_free(old);
    if (!rc)
        rc = sk_io_replace_file(path, now, strlen(now));
    return rc ? rc : sk_state_file_changed(e->st, "definition", 0);
}

/* The definition's text: what identity.h says defines the copy, and the
 * partition folders this router writes. Caller frees (sk_free). */
static char *definition_text(engine *e)
{
    char *id = sk_identity_text(e->doc, e->cfg, SK_ID_SOURCE | SK_ID_SINK |
                                SK_ID_TRANSFORM);
    char *heads = sk_router_part_heads(e->router);
    char *text = id && heads ? sk_asprintf("%slayout:partition=%s\n", id,
                                           heads) : NULL;
    sk_free(heads);
    sk_free(id);
    return text;
}

/* A state with a layout line, defined otherwise than now: when only the
 * folders differ, say which and the key that keeps them. */
static void refuse_changed(const engine *e, const char *was, const char *now)
{
    size_t wl = 0, nl = 0;
    const char *wlay = layout_of(was, &wl), *nlay = layout_of(now, &nl);
    size_t wh = wlay ? (size_t)(wlay - was) : 0;
    size_t nh = nlay ? (size_t)(nlay - now) : 0;
    if (!wlay || !nlay || wh != nh || memcmp(was, now, wh) != 0) {
        refuse(e, was, now);
        return;
    }
    char *old = sk_strndup(wlay, wl);
    if (old)
        refuse_layout(e, old, nlay, nl);
    else
        refuse(e, was, now);
    sk_free(old);
}

int pl_definition_take(engine *e, const char *from_dir)
{
    char *mine = sk_asprintf("%s/definition", sk_state_dir(e->st));
    char *theirs = sk_asprintf("%s/definition", from_dir);
    char *buf = sk_malloc(DEFINITION_MAX);
    int rc = mine && theirs && buf ? SKIPPR_OK : SKIPPR_NOMEM;
    if (!rc)
        rc = read_definition(theirs, buf, DEFINITION_MAX);
    if (!rc)
        rc = sk_io_replace_file(mine, buf, strlen(buf));
    if (!rc)
        rc = sk_state_file_changed(e->st, "definition", 0);
    sk_free(buf);
    sk_free(theirs);
    sk_free(mine);
    return rc;
}

int pl_definition_check(engine *e)
{
    char *now = definition_text(e);
    char *was = sk_malloc(DEFINITION_MAX);
    char *path = sk_asprintf("%s/definition", sk_state_dir(e->st));
    int rc = now && was && path ? SKIPPR_OK : SKIPPR_NOMEM;
    if (!rc)
        rc = read_definition(path, was, DEFINITION_MAX);
    if (rc == SKIPPR_OK && strcmp(was, now) != 0 && !state_wrote(e)) {
        /* Nothing copied under the old one (its first run stopped before,
         * say at the preflight): nothing to protect. */
        sk_info("pipeline '%s': its state had copied nothing yet; it now "
                "belongs to this definition", e->cfg->name);
        rc = sk_io_replace_file(path, now, strlen(now));
        if (!rc)
            rc = sk_state_file_changed(e->st, "definition", 0);
    } else if (rc == SKIPPR_OK && strcmp(was, now) != 0) {
        if (strstr(was, "\nlayout:")) {
            refuse_changed(e, was, now);
            rc = SKIPPR_CHANGED;
        } else {
            rc = adopt_old(e, was, now, path);
        }
    } else if (rc == SKIPPR_NOENT) {
        rc = adopt_old(e, NULL, now, path);
    } else if (rc == SKIPPR_IO) {
        sk_error("cannot read %s: %s", path, strerror(errno));
    }
    sk_free(path);
    sk_free(was);
    sk_free(now);
    return rc;
}
