#include "base/map.h"

#include <string.h>

#include "base/common.h"

#define TOMB ((const char *)1)

void sk_map_init(sk_map *m) { memset(m, 0, sizeof *m); }

void sk_map_free(sk_map *m)
{
    sk_free(m->slots);
    memset(m, 0, sizeof *m);
}

static sk_map_slot *find(const sk_map *m, const char *key, size_t klen,
                         uint64_t hash)
{
    if (!m->cap)
        return NULL;
    size_t mask = m->cap - 1;
    for (size_t i = hash & mask;; i = (i + 1) & mask) {
        sk_map_slot *s = &m->slots[i];
        if (!s->key)
            return NULL;
        if (s->key != TOMB && s->hash == hash && s->klen == klen &&
            memcmp(s->key, key, klen) == 0)
            return s;
    }
}

void *sk_map_get(const sk_map *m, const char *key, size_t klen, uint64_t hash)
{
    sk_map_slot *s = find(m, key, klen, hash);
    return s ? s->value : NULL;
}

static int grow(sk_map *m)
{
    size_t ncap = m->cap ? m->cap * 2 : 64;
    if (m->live * 4 < m->cap)
        ncap = m->cap; /* mostly tombstones: rehash in place */
    sk_map_slot *ns = sk_calloc(ncap, sizeof *ns);
    if (!ns)
        return SKIPPR_NOMEM;
    for (size_t i = 0; i < m->cap; i++) {
        sk_map_slot *s = &m->slots[i];
        if (!s->key || s->key == TOMB)
            continue;
        size_t j = s->hash & (ncap - 1);
        while (ns[j].key)
            j = (j + 1) & (ncap - 1);
        ns[j] = *s;
    }
    sk_free(m->slots);
    m->slots = ns;
    m->cap = ncap;
    m->used = m->live;
    return SKIPPR_OK;
}

int sk_map_put(sk_map *m, const char *key, size_t klen, uint64_t hash,
               void *value)
{
    sk_map_slot *s = find(m, key, klen, hash);
    if (s) {
        s->value = value;
        s->key = key;
        return SKIPPR_OK;
    }
    if ((m->used + 1) * 4 > m->cap * 3) {
        int rc = grow(m);
        if (rc)
            return rc;
    }
    size_t mask = m->cap - 1;
    size_t i = hash & mask;
    while (m->slots[i].key && m->slots[i].key != TOMB)
        i = (i + 1) & mask;
    if (!m->slots[i].key)
        m->used++;
    m->slots[i] = (sk_map_slot){key, klen, hash, value};
    m->live++;
    return SKIPPR_OK;
}

void *sk_map_del(sk_map *m, const char *key, size_t klen, uint64_t hash)
{
    sk_map_slot *s = find(m, key, klen, hash);
    if (!s)
        return NULL;
    void *v = s->value;
    s->key = TOMB;
    s->value = NULL;
    m->live--;
    return v;
}

void *sk_map_next(const sk_map *m, size_t *it)
{
    while (*it < m->cap) {
        sk_map_slot *s = &m->slots[(*it)++];
        if (s->key && s->key != TOMB)
            return s->value;
    }
    return NULL;
}
