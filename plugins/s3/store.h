/* store.c: the engine's own state in the bucket
 * (skipprd_el_storage_mode: s3, SKIPPR_SINK_STORE). */
#ifndef SK_S3_STORE_H
#define SK_S3_STORE_H

#include <stddef.h>
#include <stdint.h>

#include <skippr/plugin.h>

int sink_store_get(void *ctx, const char *key, uint64_t offset, void *buf,
                   size_t cap, size_t *got, uint64_t *size, char *etag,
                   size_t etag_cap);
int sink_store_put(void *ctx, const char *key, const void *buf, size_t len,
                   const char *cond, char *etag, size_t etag_cap);
int sink_store_put_file(void *ctx, const char *key, int fd, uint64_t len,
                        char *etag, size_t etag_cap);
int sink_store_delete(void *ctx, const char *key);
int sink_store_list(void *ctx, const char *prefix, skippr_unit_cb cb,
                    void *cb_data);

#endif
