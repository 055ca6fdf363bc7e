/* The File source (source.c): regular files under {path}/{prefix...},
 * listed in key order, read from an offset. The ops of plugin.h. */
#ifndef SKIPPR_FILE_SOURCE_H
#define SKIPPR_FILE_SOURCE_H

#include <stddef.h>
#include <stdint.h>

#include <skippr/plugin.h>

int file_src_list(void *ctx, const char *start_after, skippr_unit_cb cb,
                  void *cb_data);
int file_src_open(void *ctx, const skippr_unit *unit, int64_t offset,
                  void **stream);
int file_src_read(void *ctx, void *stream, void *buf, size_t cap,
                  size_t *n_out);
void file_src_close(void *ctx, void *stream);
int file_src_probe(void *ctx);

#endif
