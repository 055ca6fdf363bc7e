/* The sink's handles of the growing objects (handles.c), by slice id: the
 * pipeline's side of a streamed slice, from its object's open (or reopen
 * after a restart) to its finish, its discard or the engine's teardown.
 * The state knows nothing of them.
 *
 * Owns: its struct and the map; not the handles, which the sink made and
 * grow.c, growobj.c and staging.c close or commit. Thread: any; a mutex
 * guards the map, because a flush's puts and a batch's finishes run one
 * thread per sink instance, each opening and letting go of the handles of
 * its own slices.
 */
#ifndef SK_PIPELINE_HANDLES_H
#define SK_PIPELINE_HANDLES_H

#include <stdint.h>

typedef struct pl_handles pl_handles;

/* An empty map; NULL on allocation failure. The caller frees it with
 * pl_handles_free, once every handle has been taken. */
pl_handles *pl_handles_new(void);
void pl_handles_free(pl_handles *h);

/* Slice id's handle; NULL: its object is not open. */
void *pl_handle_get(pl_handles *h, uint64_t id);
/* Keep handle (not NULL) as slice id's; SKIPPR_NOMEM when it cannot. */
int pl_handle_keep(pl_handles *h, uint64_t id, void *handle);
/* Slice id's handle, which the map lets go of (the caller closes or
 * commits it); NULL when it had none. */
void *pl_handle_take(pl_handles *h, uint64_t id);
/* Any handle, let go of as pl_handle_take does, with its slice's id in
 * *id; NULL when none is left (teardown). */
void *pl_handle_take_any(pl_handles *h, uint64_t *id);

#endif
