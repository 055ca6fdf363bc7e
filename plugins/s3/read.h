/* read.c: a unit read with ranged GETs (If-Match its ETag). */
#ifndef SK_S3_READ_H
#define SK_S3_READ_H

#include <stddef.h>
#include <stdint.h>

#include <skippr/plugin.h>

int src_open(void *ctx, const skippr_unit *u, int64_t offset,
             void **stream);
int src_read(void *ctx, void *stream, void *out, size_t cap,
             size_t *n_out);
void src_close(void *ctx, void *stream);

#endif
