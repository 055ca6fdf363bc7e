/* The lanes of listed units (lanes.c): how many the threads and the
 * memory budget allow, each carrying one unit at a time (engine.h, struct
 * lane). units.c runs them; pipeline.c makes them and, between polls,
 * sheds what their buffers grew to. */
#ifndef SKIPPR_PIPELINE_LANES_H
#define SKIPPR_PIPELINE_LANES_H

#include "pipeline/engine.h"

typedef struct pl_lanes pl_lanes;

/* e's lanes: LANES_PER_THREAD per thread plus one (fewer if their windows
 * would not fit the memory budget; one with one thread), their windows up
 * to the largest window that max_record_bytes asks for. The caller owns
 * *out (pl_lanes_free, also after a failure). */
int pl_lanes_new(engine *e, pl_lanes **out);
void pl_lanes_free(pl_lanes *ls);
/* When every lane is idle: make them anew, their buffers empty, so that
 * memory follows the work of the last poll rather than the largest unit
 * seen since the start. */
int pl_lanes_shed(pl_lanes **ls, engine *e);

/* Give every idle lane a unit of todo[*next..ntodo) and every lane its
 * next window. */
int pl_lanes_feed(pl_lanes *ls, todo *todo, size_t ntodo, size_t *next);
/* A lane whose window is framed, or NULL when no lane is busy; round
 * robin from *turn (updated). */
lane *pl_lanes_next_finished(pl_lanes *ls, size_t *turn);
/* Wait for every lane's tasks and close its unit (tasks point into the
 * lanes: before anything goes). */
void pl_lanes_drain(pl_lanes *ls);

#endif
