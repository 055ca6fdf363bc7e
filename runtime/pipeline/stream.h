/* Streaming sources (stream.c): the units a source with poll() delivers,
 * their positions and acks, and the lane that frames documents. The run's
 * pl_streamer is made and freed by pipeline.c; only stream.c reads its
 * fields.
 */
#ifndef SK_PIPELINE_STREAM_H
#define SK_PIPELINE_STREAM_H

#include <stdint.h>

#include "plugin/instance.h"

typedef struct pl_streamer pl_streamer;
struct engine;

/* The run's streamer, whose hooks reach e. NULL when out of memory.
 * Caller owns it: pl_streamer_free(). */
pl_streamer *pl_streamer_new(struct engine *e);
void pl_streamer_free(pl_streamer *s);
/* What the source's host calls reach (emit, position, sync); owned by s,
 * which must outlive the source instance. */
const sk_stream_hooks *pl_streamer_hooks(const pl_streamer *s);
/* Messages dropped as already durable. */
uint64_t pl_streamer_duplicates(const pl_streamer *s);
/* Poll the source until a stop or, with --once, until it is drained. */
int pl_stream_run(struct engine *e);

#endif
