/* The File sink (sink.c): an object "a/b/c.jsonl" is written as
 * {dir}/.c.jsonl.tmp-{slice} and renamed into place; a growing object
 * keeps its temp file between writes; sync() makes a batch durable by one
 * syncfs. The ops of plugin.h, and the folder helpers store.c shares. */
#ifndef SKIPPR_FILE_SINK_H
#define SKIPPR_FILE_SINK_H

#include <stddef.h>
#include <stdint.h>

#include <skippr/plugin.h>
#include "ctx.h"

/* A key that cannot leave the folder: no empty, "." or ".." segment, no
 * leading '/'. */
int file_key_is_safe(const char *key);
/* fsync folder dir; SKIPPR_FATAL (logged) when it fails. */
int file_fsync_dir(file_ctx *c, const char *dir);
/* Make the folders of path (up to its last '/'), each once. */
int file_mkdirs(file_ctx *c, char *path);

int file_sink_open(void *ctx, const skippr_object_info *info, void **h);
int file_sink_write(void *ctx, void *h, const void *buf, size_t len);
void file_sink_abort(void *ctx, void *h);
int file_sink_commit(void *ctx, void *h);
int file_sink_check(void *ctx, const skippr_object_info *info);
int file_sink_sync(void *ctx);
int file_sink_probe(void *ctx);

int file_grow_open(void *ctx, const skippr_object_info *info,
                   uint64_t length, const char *notes, size_t notes_len,
                   void **h);
int file_grow_write(void *ctx, void *h, const void *buf, size_t len);
void file_grow_close(void *ctx, void *h);
int file_grow_commit(void *ctx, void *h, const skippr_object_info *info);
int file_grow_discard(void *ctx, const skippr_object_info *info);

#endif
