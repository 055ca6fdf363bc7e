/* The File plugin's instance, as its files share it: file.c (options,
 * init, the descriptor), source.c, sink.c (objects and growing objects),
 * store.c (the claim file) and dirs.c (folders known). Types only. */
#ifndef SKIPPR_FILE_CTX_H
#define SKIPPR_FILE_CTX_H

#include <stdint.h>

#include <skippr/plugin.h>
#include "walk.h"

typedef struct file_ctx {
    const skippr_host *host;
    const char *path;   /* option */
    const char *prefix; /* option */
    int fsync;          /* option (sink) */
    int deferred;       /* durability left to sync(): one syncfs a batch */
    uint64_t dirty;     /* the number of its latest change not yet synced
                         * (mark_dirty), or 0 */
    long grow_fds;      /* descriptors held by growing objects */
    long grow_fd_cap;   /* above this many, a write closes its own */
    walker walk;        /* the source's listing, paused between rounds */
} file_ctx;

#define LOG(c, lvl, ...) (c)->host->log((c)->host, (lvl), __VA_ARGS__)

#endif
