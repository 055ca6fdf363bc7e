/* A string-keyed hash map (open addressing, linear probing). Keys are
 * borrowed: the caller keeps each key alive while it is in the map (the
 * usual pattern is a key stored inside the value). Not thread-safe. */
#ifndef SK_MAP_H
#define SK_MAP_H

#include <stddef.h>
#include <stdint.h>

typedef struct sk_map_slot {
    const char *key; /* NULL: empty; (const char *)1: deleted */
    size_t klen;
    uint64_t hash;
    void *value;
} sk_map_slot;

typedef struct sk_map {
    sk_map_slot *slots;
    size_t cap; /* power of two */
    size_t used; /* live + deleted */
    size_t live;
} sk_map;

void sk_map_init(sk_map *m);
void sk_map_free(sk_map *m);
void *sk_map_get(const sk_map *m, const char *key, size_t klen, uint64_t hash);
/* Insert or replace. Returns SKIPPR_OK or SKIPPR_NOMEM. */
int sk_map_put(sk_map *m, const char *key, size_t klen, uint64_t hash,
               void *value);
/* Remove; returns the old value or NULL. */
void *sk_map_del(sk_map *m, const char *key, size_t klen, uint64_t hash);
/* Iterate: start with *it = 0; returns NULL when done. */
void *sk_map_next(const sk_map *m, size_t *it);

#endif
