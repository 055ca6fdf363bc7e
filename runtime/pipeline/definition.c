/* The definition a state belongs to. A state records what it copies
 * (config/identity.h: the source's and the sink's plugin and location,
 * and the transform) in {state}/definition when it is first used; a run
 * whose pipeline is defined otherwise stops before reading or writing
 * anything. Its ledger names units by their place in one source, its
 * objects by one layout in one sink: the same state under another
 * definition would take another archive's files for changed versions of
 * its own, or leave a copy half in one layout and half in another.
 *
 * A state from before this file adopts the definition it is next run
 * with. The file goes to the state store too (state off the box).
 * Pipelines given by flags name their state by this same text, so theirs
 * never differs. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "base/fsio.h"
#include "config/identity.h"
#include "pipeline/engine.h"

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
static int missing_lines(const char *a, const char *b, sk_buf *out)
{
    int rc = SKIPPR_OK;
    for (const char *t = a; *t && !rc;) {
        const char *nl = strchr(t, '\n');
        size_t len = nl ? (size_t)(nl - t) : strlen(t);
        if (len && !has_line(b, t, len))
            rc = sk_buf_printf(out, "%s'%.*s'", out->len ? ", " : "",
                               (int)len, t);
        t += len + (nl != NULL);
    }
    if (!rc && !out->len)
        rc = sk_buf_printf(out, "nothing else");
    return rc ? rc : sk_buf_append(out, "", 1);
}

/* The stop: what the state was made for, what the run asks, the ways on. */
static void refuse(const engine *e, const char *was, const char *now)
{
    sk_buf gone, added;
    sk_buf_init(&gone, DEFINITION_MAX);
    sk_buf_init(&added, DEFINITION_MAX);
    int bad = missing_lines(was, now, &gone) || missing_lines(now, was, &added);
    sk_error("pipeline '%s': its state (%s, in %s) was made for another "
             "definition: it had %s, the config now has %s. Continuing it "
             "would mix two copies in one ledger. To copy the new "
             "definition, give the pipeline another name or workspace (a "
             "state of its own); to go on with the old one, undo the "
             "change. Nothing was read or written.",
             e->cfg->name, e->st->state_id, e->st->dir,
             bad ? "?" : (const char *)gone.data,
             bad ? "?" : (const char *)added.data);
    sk_buf_free(&gone);
    sk_buf_free(&added);
}

int pl_definition_check(engine *e)
{
    char *now = sk_identity_text(e->doc, e->cfg, SK_ID_SOURCE | SK_ID_SINK |
                                 SK_ID_TRANSFORM);
    char *was = sk_malloc(DEFINITION_MAX);
    char *path = sk_asprintf("%s/definition", e->st->dir);
    int rc = now && was && path ? SKIPPR_OK : SKIPPR_NOMEM;
    if (!rc)
        rc = read_definition(path, was, DEFINITION_MAX);
    if (rc == SKIPPR_OK && strcmp(was, now) != 0) {
        refuse(e, was, now);
        rc = SKIPPR_CHANGED;
    } else if (rc == SKIPPR_NOENT) {
        rc = sk_io_replace_file(path, now, strlen(now));
        if (!rc)
            rc = sk_state_file_changed(e->st, "definition", 0);
    } else if (rc == SKIPPR_IO) {
        sk_error("cannot read %s: %s", path, strerror(errno));
    }
    sk_free(path);
    sk_free(was);
    sk_free(now);
    return rc;
}
