/* One growing object in the sink (growobj.c), as grow.c and staging.c
 * both reach it. Each slice's sink calls are made by the instance that
 * owns it. */
#ifndef SKIPPR_PIPELINE_GROWOBJ_H
#define SKIPPR_PIPELINE_GROWOBJ_H

#include "pipeline/engine.h"
#include "pipeline/handles.h"

/* The sink's ops; the instance that owns slice s's growing object; the
 * uploader (its instance and backoff) that owns slice id's: one rule,
 * uploaders[id % upload_concurrency]. */
const skippr_sink_ops *pl_grow_ops(const engine *e);
sk_instance *pl_grow_owner(const engine *e, const sk_slice *s);
uploader *pl_grow_owner_up(const engine *e, uint64_t id);
/* What the sink can do: grow objects (SKIPPR_SINK_GROWS), keep staging
 * pieces, make staging pieces parts itself; its part size (0: none). */
int pl_sink_grows(const engine *e);
int pl_sink_stages(const engine *e);
int pl_sink_copies(const engine *e);
uint64_t pl_sink_part_bytes(const engine *e);

/* The object info of streamed slice s, for key (its object key). */
void pl_grow_info(engine *e, const sk_slice *s, const char *key,
                  char *slice_id, size_t cap, skippr_object_info *info);
/* The info of an open slice's growing object, under the key it will get
 * when sealed. Caller owns the returned key (info->key points to it);
 * NULL on allocation failure. */
char *pl_grow_open_info(engine *e, const sk_slice *s, char *sid, size_t cap,
                        skippr_object_info *info);
/* Open s's growing object: new (length 0), or reopened at length; its
 * handle goes into the map (handles.h) until closed or committed. */
int pl_grow_attach(engine *e, sk_slice *s, uint64_t length);
/* s's growing object's handle; NULL while it is not open. */
void *pl_grow_handle(const engine *e, const sk_slice *s);
/* Let go of s's growing object (the sink keeps what it holds), if open. */
void pl_grow_close(engine *e, const sk_slice *s);
/* Finish s's open growing object as info says (the sink's grow_commit);
 * open or not, it is no longer open after. SKIPPR_INVAL when it was not
 * open. */
int pl_grow_commit(engine *e, const sk_slice *s,
                   const skippr_object_info *info);

/* One attempt at an operation on a slice's object in the sink, with what
 * it needs (the slice among it) in arg. */
typedef int (*attempt_fn)(engine *e, void *arg);
/* fn, tried again after each SKIPPR_RETRY with the backoff of the
 * uploader that owns s (see grow.c). */
int pl_grow_retries(engine *e, const sk_slice *s, const char *what,
                    attempt_fn fn, void *arg);
/* Write n bytes to s's growing object (a part per part_bytes, with the
 * sink's note of each while s is open). */
int pl_grow_write(engine *e, sk_slice *s, const uint8_t *p, size_t n);
/* The sink's note of the part it just added to open slice s's object. */
int pl_grow_note(engine *e, sk_slice *s);
/* The error line of a put that failed. */
void pl_grow_write_failed(engine *e, const sk_slice *s, int rc);

#endif
