/* The listing mark (mark.h).
 *
 * Owns: the mark and the pass's candidate.
 * Thread: the pipeline thread.
 */
#include "pipeline/mark.h"

#include <stdio.h>
#include <string.h>
#include <time.h>

#include "base/common.h"
#include "base/fsio.h"

#define MARK_FILE "listing_mark"
#define MARK_MAX 65535 /* the longest id the ledger holds */

struct pl_mark {
    char *mark;       /* owned; NULL: list everything */
    char *next;       /* this pass's candidate; owned */
    size_t next_cap;
    int frozen;       /* a unit too new (or timeless) was listed */
    int pass_ok;      /* the pass listed and copied to its end */
    int pass_full;    /* this pass lists everything */
    int64_t now;      /* the pass's clock, Unix s */
    uint64_t last_full_ns; /* when the last whole listing began; 0: never */
    int64_t lateness; /* allowed_lateness_seconds */
};

int pl_mark_load(const sk_state *st, int64_t lateness, pl_mark **out)
{
    pl_mark *m = sk_calloc(1, sizeof *m);
    char *path = sk_asprintf("%s/" MARK_FILE, sk_state_dir(st));
    if (!m || !path) {
        sk_free(m);
        sk_free(path);
        return SKIPPR_NOMEM;
    }
    m->lateness = lateness;
    *out = m;
    FILE *f = fopen(path, "rb");
    sk_free(path);
    if (!f)
        return SKIPPR_OK; /* none yet: list everything */
    char *buf = sk_malloc(MARK_MAX + 1);
    size_t n = buf ? fread(buf, 1, MARK_MAX + 1, f) : 0;
    fclose(f);
    if (!buf)
        return SKIPPR_NOMEM;
    if (n > 0 && n <= MARK_MAX) /* else damaged: a whole listing is safe */
        m->mark = sk_strndup(buf, n);
    sk_free(buf);
    return n > 0 && n <= MARK_MAX && !m->mark ? SKIPPR_NOMEM : SKIPPR_OK;
}

void pl_mark_free(pl_mark *m)
{
    if (!m)
        return;
    sk_free(m->mark);
    sk_free(m->next);
    sk_free(m);
}

/* Copy key into the pass's candidate. */
static int set_next(pl_mark *m, const char *key)
{
    size_t n = strlen(key);
    if (m->next_cap < n + 1) {
        char *p = sk_realloc(m->next, n + 1);
        if (!p)
            return SKIPPR_NOMEM;
        m->next = p;
        m->next_cap = n + 1;
    }
    memcpy(m->next, key, n + 1);
    return SKIPPR_OK;
}

int pl_mark_pass(pl_mark *m, const sk_pipeline_cfg *cfg, int once,
                 char **after)
{
    uint64_t now = sk_now_ns();
    int incremental = m->mark && (!once || cfg->incremental_listing);
    int due = cfg->full_listing_interval_seconds == 0 ||
              (m->last_full_ns == 0 && !once) ||
              now - m->last_full_ns >=
                  (uint64_t)cfg->full_listing_interval_seconds * 1000000000ULL;
    if (once && cfg->incremental_listing && m->last_full_ns == 0)
        due = 0; /* a --once run's clock starts with it */
    m->pass_full = !incremental || due;
    if (m->pass_full)
        m->last_full_ns = now;
    m->now = (int64_t)time(NULL);
    m->frozen = 0;
    m->pass_ok = 0;
    if (m->next)
        m->next[0] = '\0';
    *after = NULL;
    if (m->pass_full) {
        sk_debug("listing everything (whole listing)");
        return SKIPPR_OK;
    }
    if (!(*after = sk_strdup(m->mark)) || set_next(m, m->mark))
        return SKIPPR_NOMEM;
    sk_debug("listing after %s (incremental)", m->mark);
    return SKIPPR_OK;
}

void pl_mark_note(pl_mark *m, const char *id, int has_arrival,
                  int64_t arrival)
{
    if (m->frozen)
        return;
    if (!has_arrival || arrival > m->now - m->lateness ||
        strlen(id) > MARK_MAX || set_next(m, id))
        m->frozen = 1;
}

int pl_mark_frozen(const pl_mark *m)
{
    return m->frozen;
}

void pl_mark_pass_done(pl_mark *m)
{
    m->pass_ok = 1;
}

int pl_mark_save(pl_mark *m, sk_state *st)
{
    if (!m || !m->pass_ok)
        return SKIPPR_OK;
    m->pass_ok = 0;
    const char *next = m->next && *m->next ? m->next : NULL;
    if (!next && !m->pass_full)
        return SKIPPR_OK;
    if (next && m->mark && strcmp(next, m->mark) == 0)
        return SKIPPR_OK;
    char *path = sk_asprintf("%s/" MARK_FILE, sk_state_dir(st));
    int rc = path ? SKIPPR_OK : SKIPPR_NOMEM;
    if (!rc && !next) {
        if (!(rc = sk_io_unlink(path)))
            rc = sk_state_file_changed(st, MARK_FILE, 1);
    } else if (!rc && !(rc = sk_io_replace_file(path, next, strlen(next)))) {
        rc = sk_state_file_changed(st, MARK_FILE, 0);
    }
    if (!rc) {
        char *copy = next ? sk_strdup(next) : NULL;
        if (next && !copy)
            rc = SKIPPR_NOMEM;
        else {
            sk_free(m->mark);
            m->mark = copy;
        }
    }
    sk_free(path);
    return rc;
}
