/* The records of the partitions that differ, matched: see records.h. */
#include "verify/records.h"

#include <stdlib.h>
#include <string.h>

#include "base/common.h"
#include "base/hash.h"
#include "base/map.h"
#include "verify/recruns.h"

typedef sk_rec rec;

typedef struct side {
    rec *v;           /* in memory, at most max */
    size_t n, cap;
    sk_recruns *runs; /* the rest, spilled */
    uint64_t dropped; /* past the runs' bound: counted, not kept */
} side;

struct sk_recset {
    side sides[2];
    size_t max;
    char **names; /* partitions and places, each once */
    size_t nnames, names_cap;
    sk_map index; /* name -> its index + 1 */
};

sk_recset *sk_recset_new(size_t max)
{
    sk_recset *s = sk_calloc(1, sizeof *s);
    if (s) {
        s->max = max;
        sk_map_init(&s->index);
    }
    return s;
}

void sk_recset_free(sk_recset *s)
{
    if (!s)
        return;
    for (size_t i = 0; i < s->nnames; i++)
        sk_free(s->names[i]);
    sk_free(s->names);
    sk_map_free(&s->index);
    for (int i = 0; i < 2; i++) {
        sk_free(s->sides[i].v);
        sk_recruns_free(s->sides[i].runs);
    }
    sk_free(s);
}

/* The index of name[0..len) in s->names, added when new; UINT32_MAX on
 * allocation failure. */
static uint32_t intern(sk_recset *s, const char *name, size_t len)
{
    uint64_t h = sk_hash_fast(name, len);
    void *x = sk_map_get(&s->index, name, len, h);
    if (x)
        return (uint32_t)((uintptr_t)x - 1);
    if (s->nnames >= UINT32_MAX - 1 ||
        skippr_array_grow(&s->names, s->nnames, &s->names_cap,
                          sizeof *s->names, 64))
        return UINT32_MAX;
    char *c = sk_malloc(len + 1);
    if (!c)
        return UINT32_MAX;
    memcpy(c, name, len);
    c[len] = '\0';
    if (sk_map_put(&s->index, c, len, h, (void *)(uintptr_t)(s->nnames + 1))) {
        sk_free(c);
        return UINT32_MAX;
    }
    s->names[s->nnames] = c;
    return (uint32_t)s->nnames++;
}

int sk_recset_add(sk_recset *s, int sd, sk_record_hash h, const char *part,
                  size_t plen, const char *where, uint64_t offset)
{
    side *d = &s->sides[sd ? 1 : 0];
    if (d->dropped) {
        d->dropped++;
        return SKIPPR_OK;
    }
    if (d->n >= s->max) { /* a share of memory full: to disk, sorted */
        if (!d->runs && !(d->runs = sk_recruns_new()))
            return SKIPPR_NOMEM;
        int rc = sk_recruns_spill(d->runs, d->v, d->n);
        if (rc == SKIPPR_RANGE) {
            d->dropped++;
            return SKIPPR_OK;
        }
        if (rc)
            return rc;
        d->n = 0;
    }
    uint32_t p = intern(s, part, plen), w = intern(s, where, strlen(where));
    if (p == UINT32_MAX || w == UINT32_MAX ||
        skippr_array_grow(&d->v, d->n, &d->cap, sizeof *d->v, 1024))
        return SKIPPR_NOMEM;
    d->v[d->n++] = (rec){h.hi, h.lo, p, w, offset};
    return SKIPPR_OK;
}

size_t sk_recset_runs(const sk_recset *s)
{
    size_t n = 0;
    for (int i = 0; i < 2; i++)
        n += s->sides[i].runs ? sk_recruns_count(s->sides[i].runs) : 0;
    return n;
}

const char *sk_rec_kind_name(sk_rec_kind k)
{
    static const char *const names[] = {"missing", "moved", "duplicated",
                                        "unexpected"};
    return (unsigned)k < sizeof names / sizeof *names ? names[k] : "?";
}

void sk_rec_report_free(sk_rec_report *r)
{
    sk_free(r->first);
    *r = (sk_rec_report){0};
}

/* -1, 0 or 1 as x's hash is below, equal to or above y's. */
static int hash_cmp(const rec *x, const rec *y)
{
    if (x->hi != y->hi)
        return x->hi < y->hi ? -1 : 1;
    return x->lo == y->lo ? 0 : x->lo < y->lo ? -1 : 1;
}

typedef struct match {
    const sk_recset *s;
    sk_rec_report *r;
    const rec **left[2]; /* one hash's records without a twin, a side */
    size_t nleft[2], cap[2];
} match;

static void note(match *m, sk_rec_kind kind, const rec *a, const rec *b)
{
    sk_rec_report *r = m->r;
    r->counts[kind]++;
    if (r->nfirst == r->keep)
        return;
    char *const *n = m->s->names;
    r->first[r->nfirst++] = (sk_rec_diff){
        .kind = kind,
        .partition = n[a ? a->part : b->part],
        .src_where = a ? n[a->where] : NULL,
        .src_offset = a ? a->offset : 0,
        .sink_where = b ? n[b->where] : NULL,
        .sink_offset = b ? b->offset : 0,
        .sink_partition = b ? n[b->part] : NULL};
}

static int leave(match *m, int sd, const rec *x)
{
    if (skippr_array_grow(&m->left[sd], m->nleft[sd], &m->cap[sd],
                          sizeof *m->left[sd], 16))
        return SKIPPR_NOMEM;
    m->left[sd][m->nleft[sd]++] = x;
    return SKIPPR_OK;
}

/* One hash's records: a[0..na) of the source, b[0..nb) of the sink, each
 * sorted by partition. Twins in one partition match; what is left pairs
 * up as moved, and the rest is missing, duplicated or unexpected. */
static int one_hash(match *m, const rec *a, size_t na, const rec *b,
                    size_t nb)
{
    m->nleft[0] = m->nleft[1] = 0;
    size_t i = 0, j = 0;
    int rc = SKIPPR_OK;
    while (!rc && (i < na || j < nb)) {
        if (i < na && j < nb && a[i].part == b[j].part) {
            i++;
            j++;
        } else if (j == nb || (i < na && a[i].part < b[j].part)) {
            rc = leave(m, 0, &a[i++]);
        } else {
            rc = leave(m, 1, &b[j++]);
        }
    }
    size_t k = 0;
    for (; !rc && k < m->nleft[0] && k < m->nleft[1]; k++)
        note(m, SK_REC_MOVED, m->left[0][k], m->left[1][k]);
    for (size_t x = k; !rc && x < m->nleft[0]; x++)
        note(m, SK_REC_MISSING, m->left[0][x], NULL);
    for (size_t x = k; !rc && x < m->nleft[1]; x++)
        note(m, na ? SK_REC_DUPLICATED : SK_REC_UNEXPECTED, NULL,
             m->left[1][x]);
    return rc;
}

/* One side's records in order, read a hash's worth at a time: the
 * cursor, the record it stands on, the group of one hash. */
typedef struct stream {
    sk_recmerge *m;
    const rec *head;
    rec *g;
    size_t n, cap;
} stream;

/* The records of x's next hash (its head's) into x->g. */
static int group(stream *x)
{
    x->n = 0;
    if (!x->head)
        return SKIPPR_OK;
    rec h = *x->head;
    int rc = SKIPPR_OK;
    while (!rc && x->head && hash_cmp(x->head, &h) == 0) {
        if (skippr_array_grow(&x->g, x->n, &x->cap, sizeof *x->g, 16))
            return SKIPPR_NOMEM;
        x->g[x->n++] = *x->head;
        x->head = sk_recmerge_next(x->m, &rc);
    }
    return rc;
}

/* Match the two streams, a hash at a time. */
static int match_streams(match *m, stream *a, stream *b)
{
    int rc = SKIPPR_OK;
    while (!rc && (a->head || b->head)) {
        int c = !a->head ? 1 : !b->head ? -1 : hash_cmp(a->head, b->head);
        a->n = b->n = 0;
        if (c <= 0)
            rc = group(a);
        if (!rc && c >= 0)
            rc = group(b);
        if (!rc)
            rc = one_hash(m, a->n ? a->g : NULL, a->n, b->n ? b->g : NULL,
                          b->n);
    }
    return rc;
}

int sk_recset_compare(sk_recset *s, size_t keep, sk_rec_report *r)
{
    *r = (sk_rec_report){.keep = keep,
                         .partial = s->sides[0].dropped ||
                                    s->sides[1].dropped,
                         .runs = sk_recset_runs(s)};
    if (keep && !(r->first = sk_calloc(keep, sizeof *r->first)))
        return SKIPPR_NOMEM;
    match m = {.s = s, .r = r};
    stream st[2] = {{0}, {0}};
    int rc = SKIPPR_OK;
    for (int i = 0; !rc && i < 2; i++) {
        side *d = &s->sides[i];
        if (!d->runs && !(d->runs = sk_recruns_new()))
            rc = SKIPPR_NOMEM;
        if (!rc)
            rc = sk_recmerge_open(d->runs, d->v, d->n, &st[i].m);
        if (!rc)
            st[i].head = sk_recmerge_next(st[i].m, &rc);
    }
    if (!rc)
        rc = match_streams(&m, &st[0], &st[1]);
    for (int i = 0; i < 2; i++) {
        sk_recmerge_free(st[i].m);
        sk_free(st[i].g);
    }
    sk_free(m.left[0]);
    sk_free(m.left[1]);
    if (rc)
        sk_rec_report_free(r);
    return rc;
}
