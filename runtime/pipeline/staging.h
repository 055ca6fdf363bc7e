/* Staging pieces (staging.c): the tails of growing objects that the disk
 * cannot hold, kept in the sink, and the finish of sealed parted slices.
 * The state says when (state/streamed.h); these move the bytes. */
#ifndef SKIPPR_PIPELINE_STAGING_H
#define SKIPPR_PIPELINE_STAGING_H

#include "pipeline/engine.h"

/* Append parted slice s's bytes [from, upto) (from s->pushed on) to out,
 * from its staging pieces and TAIL frames; f is scratch. */
int pl_grow_read(engine *e, const sk_slice *s, uint64_t from, uint64_t upto,
                 skippr_buf *out, skippr_buf *f);
/* Make spilled parted slice s's buffer whole before a put: its first
 * staging pieces copied into parts if the sink can, the rest of its tail
 * read back (sk_state_spilled). */
int pl_grow_unspill(engine *e, sk_slice *s);
/* Before a commit: tails over the WAL's disk budget become staging
 * pieces (sk_state_tails_to_stage). */
int pl_grow_stage_tails(engine *e);

#endif
