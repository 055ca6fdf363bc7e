/* The source's partitions against the sink's: see compare.h. */
#include "verify/compare.h"

#include <string.h>

#include "base/common.h"

const char *sk_verify_verdict_name(sk_verify_verdict v)
{
    static const char *const names[] = {"match", "differ", "missing",
                                        "extra", "open"};
    return (unsigned)v < sizeof names / sizeof *names ? names[v] : "?";
}

static sk_verify_verdict verdict_of(const sk_digest *a, const sk_digest *b)
{
    if (!b)
        return SK_VERIFY_MISSING;
    if (!a)
        return SK_VERIFY_EXTRA;
    return sk_digest_equal(a, b) ? SK_VERIFY_MATCH : SK_VERIFY_DIFFER;
}

/* A comparison under way: its result, the partitions still open. */
typedef struct cmp {
    sk_verify_result *r;
    const sk_partitions *open;
} cmp;

/* One key of the pairing (sk_partitions_fn). */
static int one(const char *key, size_t klen, const sk_digest *a,
               const sk_digest *b, void *ud)
{
    const cmp *c = ud;
    sk_verify_result *r = c->r;
    sk_verify_verdict v = verdict_of(a, b);
    if (v != SK_VERIFY_MATCH && c->open &&
        sk_partitions_get(c->open, key, klen))
        v = SK_VERIFY_OPEN;
    r->partitions++;
    r->by_verdict[v]++;
    if (a)
        sk_digest_merge(&r->want, a);
    if (b)
        sk_digest_merge(&r->got, b);
    if (v == SK_VERIFY_MATCH || v == SK_VERIFY_OPEN || r->nparts == r->keep)
        return SKIPPR_OK;
    sk_verify_part *p = &r->parts[r->nparts];
    if (!(p->key = sk_malloc(klen + 1)))
        return SKIPPR_NOMEM;
    memcpy(p->key, key, klen);
    p->key[klen] = '\0';
    p->verdict = v;
    p->want = a ? *a : (sk_digest){0};
    p->got = b ? *b : (sk_digest){0};
    r->nparts++;
    return SKIPPR_OK;
}

int sk_verify_compare(const sk_partitions *src, const sk_partitions *dst,
                      const sk_partitions *open, size_t keep,
                      sk_verify_result *out)
{
    cmp c = {.r = out, .open = open};
    *out = (sk_verify_result){.keep = keep};
    if (keep && !(out->parts = sk_calloc(keep, sizeof *out->parts)))
        return SKIPPR_NOMEM;
    int rc = sk_partitions_pair(src, dst, one, &c);
    if (rc)
        sk_verify_result_free(out);
    return rc;
}

void sk_verify_result_free(sk_verify_result *r)
{
    for (size_t i = 0; i < r->nparts; i++)
        sk_free(r->parts[i].key);
    sk_free(r->parts);
    *r = (sk_verify_result){0};
}

int sk_verify_clean(const sk_verify_result *r)
{
    return r->by_verdict[SK_VERIFY_MATCH] + r->by_verdict[SK_VERIFY_OPEN] ==
           r->partitions;
}
