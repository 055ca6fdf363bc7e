/* Staging pieces (staging.c): the tails of growing objects that the disk
 * cannot hold, kept in the sink, and the finish of sealed parted slices.
 * The state calls the hooks (sk_grow_hooks fetch, stage and copy). */
#ifndef SKIPPR_PIPELINE_STAGING_H
#define SKIPPR_PIPELINE_STAGING_H

#include "pipeline/engine.h"

int pl_grow_fetch(void *ud, const sk_slice *s, uint64_t off, uint64_t tag,
                  void *buf, size_t len);
int pl_grow_store(void *ud, sk_slice *s, uint64_t off, uint64_t tag,
                  const void *p, size_t n);
int pl_grow_copy(void *ud, sk_slice *s);

#endif
