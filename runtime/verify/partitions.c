/* One side's partitions and their digests: see partitions.h. */
#include "verify/partitions.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/common.h"
#include "base/hash.h"
#include "base/map.h"

typedef struct entry {
    sk_digest d;
    size_t klen;
    char key[]; /* klen bytes and a NUL */
} entry;

struct sk_partitions {
    sk_map map; /* entry, by key */
};

sk_partitions *sk_partitions_new(void)
{
    sk_partitions *p = sk_calloc(1, sizeof *p);
    if (p)
        sk_map_init(&p->map);
    return p;
}

void sk_partitions_free(sk_partitions *p)
{
    if (!p)
        return;
    size_t it = 0;
    entry *x;
    while ((x = sk_map_next(&p->map, &it)))
        sk_free(x);
    sk_map_free(&p->map);
    sk_free(p);
}

sk_digest *sk_partitions_at(sk_partitions *p, const char *key, size_t klen)
{
    uint64_t h = sk_hash_fast(key, klen);
    entry *x = sk_map_get(&p->map, key, klen, h);
    if (x)
        return &x->d;
    if (klen > SIZE_MAX - sizeof *x - 1 ||
        !(x = sk_calloc(1, sizeof *x + klen + 1)))
        return NULL;
    memcpy(x->key, key, klen);
    x->klen = klen;
    if (sk_map_put(&p->map, x->key, klen, h, x)) {
        sk_free(x);
        return NULL;
    }
    return &x->d;
}

const sk_digest *sk_partitions_get(const sk_partitions *p, const char *key,
                                   size_t klen)
{
    const entry *x = sk_map_get(&p->map, key, klen, sk_hash_fast(key, klen));
    return x ? &x->d : NULL;
}

int sk_partitions_merge(sk_partitions *into, const sk_partitions *from)
{
    size_t it = 0;
    const entry *x;
    while ((x = sk_map_next(&from->map, &it))) {
        sk_digest *d = sk_partitions_at(into, x->key, x->klen);
        if (!d)
            return SKIPPR_NOMEM;
        sk_digest_merge(d, &x->d);
    }
    return SKIPPR_OK;
}

size_t sk_partitions_count(const sk_partitions *p)
{
    return p->map.live;
}

void sk_partitions_total(const sk_partitions *p, sk_digest *total)
{
    *total = (sk_digest){0};
    size_t it = 0;
    const entry *x;
    while ((x = sk_map_next(&p->map, &it)))
        sk_digest_merge(total, &x->d);
}

static int by_key(const void *a, const void *b)
{
    const entry *x = *(const entry *const *)a, *y = *(const entry *const *)b;
    int c = memcmp(x->key, y->key, x->klen < y->klen ? x->klen : y->klen);
    return c ? c : (x->klen > y->klen) - (x->klen < y->klen);
}

/* p's entries in key order into *out (n of them); the caller frees it. */
static int sorted(const sk_partitions *p, const entry ***out, size_t *n)
{
    *n = p->map.live;
    *out = sk_calloc(*n ? *n : 1, sizeof **out);
    if (!*out)
        return SKIPPR_NOMEM;
    size_t it = 0, k = 0;
    const entry *x;
    while ((x = sk_map_next(&p->map, &it)) && k < *n)
        (*out)[k++] = x;
    qsort(*out, k, sizeof **out, by_key);
    return SKIPPR_OK;
}

int sk_partitions_pair(const sk_partitions *a, const sk_partitions *b,
                       sk_partitions_fn fn, void *ud)
{
    const entry **va = NULL, **vb = NULL;
    size_t na = 0, nb = 0, i = 0, j = 0;
    int rc = sorted(a, &va, &na);
    if (!rc)
        rc = sorted(b, &vb, &nb);
    while (!rc && (i < na || j < nb)) {
        int c = i == na ? 1 : j == nb ? -1 : by_key(&va[i], &vb[j]);
        const entry *x = c <= 0 ? va[i++] : NULL;
        const entry *y = c >= 0 ? vb[j++] : NULL;
        const entry *k = x ? x : y;
        rc = fn(k->key, k->klen, x ? &x->d : NULL, y ? &y->d : NULL, ud);
    }
    sk_free(va);
    sk_free(vb);
    return rc;
}
