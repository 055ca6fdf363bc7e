/* list.c: listing (ListObjectsV2), serial or by sub-prefix in parallel. */
#ifndef SK_S3_LIST_H
#define SK_S3_LIST_H

#include <stddef.h>

#include "ctx.h"

int s3_list_serial(s3_ctx *c, const char *prefix, const char *after,
                   skippr_unit_cb cb, void *cb_data);
int src_list(void *ctx, const char *start_after, skippr_unit_cb cb,
             void *cb_data);

#endif
