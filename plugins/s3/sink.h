/* sink.c: objects written: PUT or multipart, conditional, checked; and
 * growing objects (multipart uploads that grow part by part). */
#ifndef SK_S3_SINK_H
#define SK_S3_SINK_H

#include <stddef.h>
#include <stdint.h>

#include <skippr/plugin.h>

int sink_open(void *ctx, const skippr_object_info *info, void **h);
int sink_write(void *ctx, void *h, const void *p, size_t n);
void sink_abort(void *ctx, void *h);
int sink_commit(void *ctx, void *h);
int sink_check(void *ctx, const skippr_object_info *info);

int sink_grow_open(void *ctx, const skippr_object_info *info,
                   uint64_t length, const char *notes, size_t notes_len,
                   void **h);
int sink_grow_write(void *ctx, void *h, const void *p, size_t n);
int sink_grow_note(void *ctx, void *h, char *buf, size_t cap, size_t *len);
int sink_grow_commit(void *ctx, void *h, const skippr_object_info *info);
void sink_grow_close(void *ctx, void *h);
int sink_grow_discard(void *ctx, const skippr_object_info *info);
uint64_t sink_grow_part_bytes(void *ctx);

/* sink.c: a staging piece made a part of its growing object */
int sink_stage_copy(void *ctx, void *h, const skippr_object_info *info,
                    uint64_t offset, uint64_t tag, uint64_t len);

#endif
