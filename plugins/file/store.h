/* store_get and store_put of the File sink (store.c), without
 * SKIPPR_SINK_STORE: enough for the engine's claim on the sink, not for
 * holding state. */
#ifndef SKIPPR_FILE_STORE_H
#define SKIPPR_FILE_STORE_H

#include <stddef.h>
#include <stdint.h>

int file_store_get(void *ctx, const char *key, uint64_t offset, void *buf,
                   size_t cap, size_t *got, uint64_t *size, char *etag,
                   size_t etag_cap);
int file_store_put(void *ctx, const char *key, const void *buf, size_t len,
                   const char *cond, char *etag, size_t etag_cap);

#endif
