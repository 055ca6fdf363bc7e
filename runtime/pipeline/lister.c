/* The listing of a listed source (lister.h): a pass starts after the
 * listing mark (or at the first key), lists in rounds after the last unit
 * listed, skips what the ledger has done (and another shard's folders),
 * says what changed since it was copied, and fills a batch of at most
 * list_batch units for the lanes, each with its resume offset and its
 * arrival time.
 *
 * Owns: its struct (the batch, where the next round starts, the counts).
 * Thread: the pipeline thread.
 */
#include "pipeline/lister.h"

#include <inttypes.h>
#include <string.h>

#include "pipeline/clock.h"
#include "pipeline/mark.h"
#include "pipeline/shard.h"
#include "pipeline/verify.h"

struct pl_lister {
    todo *todo;        /* the batch */
    size_t n, cap;
    size_t undone;     /* todo[..undone) are done (pl_watermark) */
    char *after;       /* where the next listing round starts */
    char *last;        /* the last unit listed this round */
    size_t last_cap;
    int names_first;   /* a version NULL is a report by name alone */
    pl_list_counts count;
};

/* Forget the batch's units (their array is kept for the next one). */
static void batch_clear(pl_lister *l)
{
    for (size_t i = 0; i < l->n; i++) {
        sk_free(l->todo[i].id);
        sk_free(l->todo[i].version);
    }
    l->n = 0;
    l->undone = 0;
}

pl_lister *pl_lister_new(void)
{
    return sk_calloc(1, sizeof(pl_lister));
}

void pl_lister_free(pl_lister *l)
{
    if (!l)
        return;
    batch_clear(l);
    sk_free(l->todo);
    sk_free(l->after);
    sk_free(l->last);
    sk_free(l);
}

todo *pl_lister_batch(pl_lister *l, size_t *n)
{
    *n = l->n;
    return l->todo;
}

pl_list_counts pl_lister_counts(const pl_lister *l)
{
    return l->count;
}

int pl_lister_undone_arrival(pl_lister *l, int64_t *a)
{
    /* Units only become done, so the first one not done only moves on:
     * asked after every finished unit, this stays linear in the batch. */
    while (l->undone < l->n && l->todo[l->undone].done)
        l->undone++;
    if (l->undone == l->n)
        return 0;
    *a = l->todo[l->undone].arrival;
    return 1;
}

/* The key just past every key of a folder (which ends in '/'): the
 * folder followed by U+10FFFF, the highest code point, so that a listing
 * asked to start after it goes on with the next folder. Caller frees. */
static char *past_folder(const char *id, size_t folder_len)
{
    static const char top[] = "\xf4\x8f\xbf\xbf";
    char *k = sk_malloc(folder_len + sizeof top);
    if (k) {
        memcpy(k, id, folder_len);
        memcpy(k + folder_len, top, sizeof top);
    }
    return k;
}

/* Copy s into *buf (cap bytes, grown as needed; the caller owns it):
 * a per-unit copy without an allocation per unit. */
static int buf_copy(char **buf, size_t *cap, const char *s)
{
    size_t n = strlen(s);
    if (*cap < n + 1) {
        char *p = sk_realloc(*buf, n + 1);
        if (!p)
            return SKIPPR_NOMEM;
        *buf = p;
        *cap = n + 1;
    }
    memcpy(*buf, s, n + 1);
    return SKIPPR_OK;
}

/* The arrival time a unit's key gives (arrival_key_pattern, else a
 * Firehose or Hive date): 1 with *a set, 0 when it gives none. */
static int key_arrival(const engine *e, const char *id, int64_t *a)
{
    const char *pat = e->cfg->arrival_key_pattern;
    return sk_route_unit_arrival(pat && *pat ? pat : NULL, id, a);
}

/* A listed unit: while every unit so far arrived long enough ago (and is
 * done by the pass's end), the candidate mark moves on to it. known: its
 * key's arrival time when the caller has it already, else NULL. */
static void mark_note(engine *e, const skippr_unit *u, const int64_t *known)
{
    if (!e->mark || pl_mark_frozen(e->mark))
        return;
    int64_t a = known ? *known : 0;
    const skippr_source_ops *ops = e->src->plugin->source;
    int has = known || key_arrival(e, u->id, &a);
    if (!has && SKIPPR_OPS_HAS(skippr_source_ops, ops, flags) &&
        (ops->flags & SKIPPR_SOURCE_MODIFIED) && u->modified > 0) {
        a = u->modified;
        has = 1;
    }
    pl_mark_note(e->mark, u->id, has, a);
}

int pl_lister_pass(engine *e)
{
    pl_lister *l = e->lister;
    const skippr_source_ops *ops = e->src->plugin->source;
    l->names_first = !e->verify && !e->cfg->verify_done_units &&
                     SKIPPR_OPS_HAS(skippr_source_ops, ops, flags) &&
                     (ops->flags & SKIPPR_SOURCE_NAMES_FIRST);
    sk_free(l->after);
    l->after = NULL;
    return e->mark ? pl_mark_pass(e->mark, e->cfg, e->once, &l->after)
                   : SKIPPR_OK;
}

typedef struct list_ctx {
    engine *e;
    int rc;
    int jumped; /* stopped to list again past another shard's folder */
    int listed; /* the lister's last holds the last unit the round listed */
} list_ctx;

/* Event time: t's arrival time (clock.h). The units listed before it
 * that are not done yet count as arriving with it when it came earlier,
 * so that the watermark (pl_watermark) stays the earliest. */
static void note_arrival(engine *e, todo *t, int64_t modified)
{
    int64_t a;
    if (!pl_clock_arrival(e->clock, e->cfg, t->id, modified, &a))
        return;
    for (size_t i = e->lister->n; i > e->lister->undone; i--)
        if (e->lister->todo[i - 1].arrival > a)
            e->lister->todo[i - 1].arrival = a;
        else
            break;
    t->arrival = a;
}

/* What every listed unit goes through first: count it, move the mark,
 * and skip another shard's. -1 to go on with it; otherwise what list()
 * gets back. */
static int list_enter(list_ctx *c, const skippr_unit *u,
                      const int64_t *arrival)
{
    engine *e = c->e;
    e->lister->count.listed++;
    mark_note(e, u, arrival);
    uint32_t nshards = e->cfg->shard_count;
    if (nshards > 1 && sk_shard_of(u->id, nshards) != e->cfg->shard_index) {
        /* Another shard's: skip its whole folder by listing again after
         * it (the check above stays what decides). */
        e->lister->count.shard++;
        size_t fl = sk_shard_folder_len(u->id);
        if (fl == 0 || u->id[fl - 1] != '/')
            return 0;
        char *after = past_folder(u->id, fl);
        if (!after) {
            c->rc = SKIPPR_NOMEM;
            return 1;
        }
        sk_free(e->lister->after);
        e->lister->after = after;
        c->jumped = 1;
        return 1;
    }
    if (buf_copy(&e->lister->last, &e->lister->last_cap, u->id)) {
        c->rc = SKIPPR_NOMEM;
        return 1;
    }
    c->listed = 1;
    return -1;
}

/* A unit reported by name alone (verify_done_units: false): skipped when
 * the ledger has it done, unless the listing mark needs its modification
 * time; any other is asked for whole, and list_cb sees it from the top. */
static int list_name(list_ctx *c, const skippr_unit *u)
{
    engine *e = c->e;
    int64_t a;
    int has = 0;
    if (e->mark && !pl_mark_frozen(e->mark)) {
        if (!key_arrival(e, u->id, &a))
            return SKIPPR_UNIT_DESCRIBE; /* the mark needs its mtime */
        has = 1;
    }
    const sk_unit_rec *known = NULL;
    int rc = sk_ledger_lookup(sk_state_ledger(e->st), u->id, &known);
    if (rc) {
        c->rc = rc;
        return 1;
    }
    if (!known || !(sk_unit_flags(known) & SK_UNIT_DONE))
        return SKIPPR_UNIT_DESCRIBE;
    int r = list_enter(c, u, has ? &a : NULL);
    if (r >= 0)
        return r;
    e->lister->count.done++;
    return 0;
}

/* A done unit u whose version or size is not the ledger's (known's), by
 * changed_units: 1 skip it, -1 stop the listing (fail, c->rc set), 0 copy
 * it again from its start. Each is logged and counted. */
static int list_changed(list_ctx *c, const skippr_unit *u,
                        const sk_unit_rec *known)
{
    engine *e = c->e;
    const char *ver = u->version ? u->version : "";
    static const char *const what[] = {
        "skipped (changed_units: skip; the run will exit with code 4)",
        "copied again whole (changed_units: copy)",
        "the run stops (changed_units: fail)"};
    int policy = e->cfg->changed_units;
    sk_log(policy == SK_CHANGED_FAIL ? SKIPPR_LOG_ERROR : SKIPPR_LOG_WARN,
           "%s: unit %s changed since it was copied (version %s, %" PRId64
           " bytes; now %s, %" PRId64 " bytes): %s",
           e->src->label, u->id, sk_unit_version(known), sk_unit_size(known),
           ver, u->size, what[policy]);
    if (policy == SK_CHANGED_COPY) {
        e->lister->count.recopied++;
        return 0;
    }
    e->lister->count.changed++;
    if (policy == SK_CHANGED_FAIL) {
        c->rc = SKIPPR_CHANGED;
        return -1;
    }
    return 1;
}

/* Unit u into the batch, to be read from offset with flags (SK_UNIT_*):
 * what list() gets back (1 when the batch is full or on failure, c->rc
 * set). */
static int batch_add(list_ctx *c, const skippr_unit *u, int64_t offset,
                     uint32_t flags)
{
    engine *e = c->e;
    const char *ver = u->version ? u->version : "";
    if (skippr_array_grow(&e->lister->todo, e->lister->n, &e->lister->cap, sizeof *e->lister->todo,
                          256)) {
        c->rc = SKIPPR_NOMEM;
        return 1;
    }
    todo *t = &e->lister->todo[e->lister->n];
    t->id = sk_strdup(u->id);
    t->version = sk_strdup(ver);
    if (!t->id || !t->version) {
        sk_free(t->id);
        sk_free(t->version);
        c->rc = SKIPPR_NOMEM;
        return 1;
    }
    t->size = u->size;
    t->offset = offset;
    t->flags = flags;
    t->done = 0;
    t->arrival = INT64_MIN;
    const skippr_source_ops *ops = e->src->plugin->source;
    note_arrival(e, t,
                 SKIPPR_OPS_HAS(skippr_source_ops, ops, flags) &&
                         (ops->flags & SKIPPR_SOURCE_MODIFIED)
                     ? u->modified
                     : 0);
    e->lister->n++;
    return e->lister->n >= (size_t)e->cfg->list_batch; /* process in batches */
}

static int list_cb(void *ud, const skippr_unit *u)
{
    list_ctx *c = ud;
    engine *e = c->e;
    if (!u->version && e->lister->names_first)
        return list_name(c, u);
    int r = list_enter(c, u, NULL);
    if (r >= 0)
        return r;
    if (e->verify) { /* read whole; the copy's ledger is not asked */
        int read = pl_verify_listed(e->verify, u, &c->rc);
        return c->rc ? 1 : read ? batch_add(c, u, 0, 0) : 0;
    }
    const sk_unit_rec *known = NULL;
    int rc = sk_ledger_lookup(sk_state_ledger(e->st), u->id, &known);
    if (rc) {
        c->rc = rc;
        return 1;
    }
    const char *ver = u->version ? u->version : "";
    int64_t offset = 0;
    uint32_t flags = 0;
    if (known) {
        int same = strcmp(sk_unit_version(known), ver) == 0 &&
                   sk_unit_size(known) == u->size;
        if ((sk_unit_flags(known) & SK_UNIT_DONE) && same) {
            e->lister->count.done++;
            return 0;
        }
        if (sk_unit_flags(known) & SK_UNIT_DONE) {
            int r = list_changed(c, u, known);
            if (r)
                return r > 0 ? 0 : 1;
            known = NULL; /* copied again, whole */
        }
    }
    if (known) {
        /* A partly copied unit resumes where it stood, changed or not. */
        offset = sk_unit_offset(known);
        flags = sk_unit_flags(known);
        if (strcmp(sk_unit_version(known), ver) != 0 ||
            sk_unit_size(known) != u->size)
            sk_warn("%s: unit %s changed while partly copied; records up to "
                    "offset %" PRId64 " are kept and reading resumes there",
                    e->src->label, u->id, offset);
    }
    return batch_add(c, u, offset, flags);
}

/* One listing round after l->after, into the batch; the plugin reads
 * start_after meanwhile, so the round's stays alive until it returns.
 * The next round lists after the last unit this one listed, or past
 * another shard's folder (list_cb sets l->after). */
static int list_round(engine *e, list_ctx *c)
{
    pl_lister *l = e->lister;
    const skippr_source_ops *ops = e->src->plugin->source;
    *c = (list_ctx){.e = e};
    char *from = l->after;
    l->after = NULL;
    int rc = ops->list(e->src->ctx, from, list_cb, c);
    if (!c->rc && !c->jumped && c->listed && !(l->after = sk_strdup(l->last)))
        c->rc = SKIPPR_NOMEM;
    if (!l->after)
        l->after = from;
    else
        sk_free(from);
    if (c->rc)
        return c->rc;
    if (rc)
        plugin_failed(e->src, "%s: listing failed: %s", e->src->label,
                      skippr_status_str(rc));
    return rc;
}

int pl_lister_next(engine *e, int *more)
{
    pl_lister *l = e->lister;
    batch_clear(l);
    list_ctx c;
    int rc;
    do { /* a round ends with a full batch or the end of the list */
        if ((rc = list_round(e, &c)))
            return rc;
        *more = l->n >= (size_t)e->cfg->list_batch;
    } while (!*more && c.jumped && !sk_stop_requested);
    *more = *more || c.jumped;
    return SKIPPR_OK;
}
