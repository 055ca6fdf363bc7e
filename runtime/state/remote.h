/* State off the box (skipprd_el_storage_mode: s3): a pipeline's state
 * held in a store (a sink with SKIPPR_SINK_STORE) under a prefix, with the
 * state folder as a working copy that may be lost with the box.
 *
 *   {prefix}lease              who owns the pipeline, renewed while it runs
 *   {prefix}state_id           written last when a state is first stored
 *   {prefix}definition         what the state copies (pipeline/definition.c)
 *   {prefix}listing_mark       as in the folder (taken_over and took_over
 *                              too: a change of the shard count)
 *   {prefix}ledger.d/NAME.run  each ledger run, as in the folder
 *   {prefix}wal/{n}            the WAL's bytes, one object per sync: a
 *                              header (segment, offset, length, CRC32C)
 *                              then the bytes; n counts up (16 hex digits).
 *                              After 256 of one segment, the segment so
 *                              far is stored again from offset 0 in a few
 *                              objects and those before are removed, so a
 *                              restore reads few objects per segment
 *
 * A commit is durable once its WAL bytes are stored: sk_wal_sync() stores
 * them after the fsync. Each wal/{n} is written with If-None-Match: *, and
 * a process numbers its objects on from the highest it found, so two
 * processes that both believe they own the state collide on a name and
 * the second stops. The lease is the first guard: a process that finds it
 * held watches it; a renewal means its holder lives (this one exits), no
 * renewal for the lease's length means the holder is gone (this one takes
 * over with If-Match). The holder renews every third of the lease on a
 * thread of its own and stores nothing once five sixths of the lease have
 * passed since the last renewal that went through.
 *
 * Thread: the pipeline thread, besides the renewal thread inside.
 */
#ifndef SK_REMOTE_H
#define SK_REMOTE_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include <skippr/plugin.h>

typedef struct sk_remote sk_remote;

/* Take the lease on the state under prefix ("ws/pipeline/") of the store
 * (ops, ctx: an initialised sink instance with SKIPPR_SINK_STORE; where:
 * its s3://bucket/prefix, for messages). May wait up to about
 * lease_seconds for a holder that does not renew, unless *stop is set
 * (SKIPPR_STOPPED). SKIPPR_LOCKED (logged) when another process holds it.
 * Caller owns *out: sk_remote_close(). */
int sk_remote_open(const skippr_sink_ops *ops, void *ctx, const char *where,
                   const char *prefix, int64_t lease_seconds,
                   const atomic_int *stop, sk_remote **out);
/* Stop renewing; with release, mark the lease free so that the next
 * process need not wait. NULL is a no-op. */
void sk_remote_close(sk_remote *r, int release);

/* Every key of the store under prefix (relative to the store, not to
 * this state), to cb, as the store's list does. */
int sk_remote_list(sk_remote *r, const char *prefix, skippr_unit_cb cb,
                   void *ud);
/* 1 when the store holds a state (its state_id), 0 when not, or a
 * negative status. */
int sk_remote_has_state(sk_remote *r);
/* Replace the state files of the folder dir (wal/, ledger.d/, ledger,
 * listing_mark, state_id, definition) with the store's. */
int sk_remote_restore(sk_remote *r, const char *dir);
/* Clear whatever a first store cut short left under the prefix (all but
 * the lease), so that sk_remote_seed_done() can follow the uploads of the
 * folder's files. */
int sk_remote_seed_begin(sk_remote *r);
/* Store state_id from dir: the state is complete in the store. */
int sk_remote_seed_done(sk_remote *r, const char *dir);

/* Store the file at path as key rel ("ledger.d/X.run", "listing_mark"):
 * read a part at a time when the store has store_put_file, else mapped
 * whole. */
int sk_remote_put_file(sk_remote *r, const char *rel, const char *path);
/* Remove key rel. */
int sk_remote_delete(sk_remote *r, const char *rel);
/* Store WAL bytes p[0..n) of segment seg at offset off (the next wal/{n}
 * object, written only if absent). */
int sk_remote_wal(sk_remote *r, uint64_t seg, uint64_t off, const void *p,
                  size_t n);
/* The n the next wal/{n} object gets. */
uint64_t sk_remote_wal_next(const sk_remote *r);
/* The objects of segment seg from first on hold it whole from offset 0:
 * remove its objects before them (newest first). */
int sk_remote_wal_rebased(sk_remote *r, uint64_t seg, uint64_t first);
/* Remove the stored WAL bytes of segments before seg, oldest first. */
int sk_remote_wal_drop(sk_remote *r, uint64_t seg);
/* This lease guards every write of the process (base/fence.h): the
 * pipeline's own state, not the old ones a shard takes over. */
void sk_remote_fence(sk_remote *r);
/* Log the line a fenced process ends with (base/fence.h lapsed). */
void sk_remote_tell_fenced(const sk_remote *r);
/* SKIPPR_OK while the lease is ours and fresh; else SKIPPR_LOCKED,
 * logged once. */
int sk_remote_check(sk_remote *r);
/* Requests made, for the summary: PUTs of WAL bytes and their bytes. */
void sk_remote_stats(const sk_remote *r, uint64_t *wal_puts,
                     uint64_t *wal_bytes);

#endif
