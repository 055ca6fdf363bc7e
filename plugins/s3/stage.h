/* stage.c: staging pieces, the tails of growing objects the disk
 * cannot hold. */
#ifndef SK_S3_STAGE_H
#define SK_S3_STAGE_H

#include <stddef.h>
#include <stdint.h>

#include <skippr/plugin.h>

#include "ctx.h"

int sink_stage_put(void *ctx, const skippr_object_info *info,
                   uint64_t offset, uint64_t tag, const void *p, size_t n);
int sink_stage_get(void *ctx, const skippr_object_info *info,
                   uint64_t offset, uint64_t tag, void *buf, size_t n);
int sink_stage_clear(void *ctx, const skippr_object_info *info);
void s3_stage_key(const s3_ctx *c, const skippr_object_info *info,
                  uint64_t offset, uint64_t tag, char *out, size_t cap);

#endif
