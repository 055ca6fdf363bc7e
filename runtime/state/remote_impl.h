/* State off the box, private parts: struct sk_remote and the store calls
 * that remote.c (the lease, storing the state's files and WAL bytes) and
 * remote_restore.c (what the store holds, the restore onto an empty disk,
 * the first store) share. Nothing else includes it; remote.h is the
 * contract. */
#ifndef SK_STATE_REMOTE_IMPL_H
#define SK_STATE_REMOTE_IMPL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include <skippr/plugin.h>

#define WAL_CHUNK ((size_t)8 << 20) /* bytes of one wal/{n} object, at most */
#define DELTA_MAGIC 0x57524B53u     /* "SKRW" */
#define DELTA_HEADER 28 /* magic, segment, offset, length, CRC32C */
#define LEASE_MAX 1024  /* bytes of the lease object */

typedef struct delta {
    uint64_t n, seg;
} delta;

struct sk_remote {
    const skippr_sink_ops *ops;
    void *ctx;
    char *where;  /* s3://bucket/prefix/ws/pipeline/, for messages */
    char *prefix; /* "ws/pipeline/" */
    pthread_mutex_t mu; /* one store call at a time: the instance is not
                         * thread-safe */
    int64_t lease_ms;
    char owner[160];
    char etag[160]; /* the lease's, under mu */
    uint64_t seq;   /* renewals, in the lease's body */
    /* renewal thread */
    pthread_t th;
    int th_started;
    pthread_mutex_t th_mu;
    pthread_cond_t th_cv;
    int th_stop;
    _Atomic int64_t valid_until_ms; /* store nothing after this */
    atomic_int lost;
    atomic_int fences; /* this lease guards the process's writes */
    int told; /* the loss was logged */
    /* WAL objects stored and not yet dropped, in order */
    delta *deltas;
    size_t ndeltas, cap;
    uint64_t next_n;
    uint64_t wal_puts, wal_bytes;
};

/* Reads up to cap bytes of the stored object rel (under the state's
 * prefix) from offset off into buf: *got of its *size bytes, and its ETag
 * when etag is given. One store call at a time (r->mu). */
int rm_get(sk_remote *r, const char *rel, uint64_t off, void *buf, size_t cap,
           size_t *got, uint64_t *size, char *etag, size_t etag_cap);

/* Removes the stored WAL objects of r->deltas[from, to) and their entries,
 * oldest first or newest first; on a failure, those removed so far. */
int rm_forget(sk_remote *r, size_t from, size_t to, int newest_first);

#endif
