/* The growing objects' handles by slice id: see handles.h. */
#include "pipeline/handles.h"

#include <pthread.h>
#include <string.h>

#include "base/common.h"
#include "base/endian.h"
#include "base/hash.h"
#include "base/map.h"

/* One open object: the map's key is id, the slice id's eight bytes. */
typedef struct entry {
    uint8_t id[8];
    void *handle;
} entry;

struct pl_handles {
    pthread_mutex_t mu;
    sk_map map; /* entry, by id */
};

pl_handles *pl_handles_new(void)
{
    pl_handles *h = sk_calloc(1, sizeof *h);
    if (!h)
        return NULL;
    if (pthread_mutex_init(&h->mu, NULL)) {
        sk_free(h);
        return NULL;
    }
    sk_map_init(&h->map);
    return h;
}

void pl_handles_free(pl_handles *h)
{
    if (!h)
        return;
    size_t it = 0;
    entry *x;
    while ((x = sk_map_next(&h->map, &it)))
        sk_free(x);
    sk_map_free(&h->map);
    pthread_mutex_destroy(&h->mu);
    sk_free(h);
}

/* The map key of slice id into k; its hash. */
static uint64_t id_key(uint64_t id, uint8_t k[8])
{
    sk_put_u64(k, id);
    return sk_hash_fast(k, 8);
}

void *pl_handle_get(pl_handles *h, uint64_t id)
{
    uint8_t k[8];
    uint64_t hash = id_key(id, k);
    pthread_mutex_lock(&h->mu);
    entry *x = sk_map_get(&h->map, (const char *)k, 8, hash);
    void *handle = x ? x->handle : NULL;
    pthread_mutex_unlock(&h->mu);
    return handle;
}

int pl_handle_keep(pl_handles *h, uint64_t id, void *handle)
{
    uint8_t k[8];
    uint64_t hash = id_key(id, k);
    int rc = SKIPPR_OK;
    pthread_mutex_lock(&h->mu);
    entry *x = sk_map_get(&h->map, (const char *)k, 8, hash);
    if (!x && (x = sk_calloc(1, sizeof *x))) {
        memcpy(x->id, k, 8);
        if (sk_map_put(&h->map, (const char *)x->id, 8, hash, x)) {
            sk_free(x);
            x = NULL;
        }
    }
    if (x)
        x->handle = handle;
    else
        rc = SKIPPR_NOMEM;
    pthread_mutex_unlock(&h->mu);
    return rc;
}

void *pl_handle_take(pl_handles *h, uint64_t id)
{
    uint8_t k[8];
    uint64_t hash = id_key(id, k);
    pthread_mutex_lock(&h->mu);
    entry *x = sk_map_del(&h->map, (const char *)k, 8, hash);
    pthread_mutex_unlock(&h->mu);
    void *handle = x ? x->handle : NULL;
    sk_free(x);
    return handle;
}

void *pl_handle_take_any(pl_handles *h, uint64_t *id)
{
    size_t it = 0;
    pthread_mutex_lock(&h->mu);
    entry *x = sk_map_next(&h->map, &it);
    if (x)
        sk_map_del(&h->map, (const char *)x->id, 8, sk_hash_fast(x->id, 8));
    pthread_mutex_unlock(&h->mu);
    if (!x)
        return NULL;
    *id = sk_get_u64(x->id);
    void *handle = x->handle;
    sk_free(x);
    return handle;
}
