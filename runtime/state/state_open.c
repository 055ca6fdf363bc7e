/* Opening and closing the state: the folder's lock, its state id, the
 * restore from the bucket and the store of a first run (remote.c), the
 * replay of the WAL (replay.c). The writing is state.c's. */
#include "state/state.h"
#include "state/state_impl.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>
#include <zstd.h>

#include "base/fsio.h"
#include "state/remote.h"
#include "state/replay.h"
#include "state/slice.h"

#define DEFAULT_BLOCK_BYTES (64u << 10)

int sk_state_in_use(const char *dir, char *pid, size_t cap)
{
    if (pid && cap)
        pid[0] = '\0';
    char *path = sk_asprintf("%s/lock", dir);
    FILE *f = path ? fopen(path, "r") : NULL;
    sk_free(path);
    if (!f)
        return 0;
    int busy = flock(fileno(f), LOCK_SH | LOCK_NB) != 0;
    if (busy && pid && cap && fgets(pid, (int)cap, f))
        pid[strcspn(pid, "\n")] = '\0';
    fclose(f);
    return busy;
}

static int take_lock(sk_state *st, const char *pipeline)
{
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/lock", st->dir);
    int rc = sk_io_open(path, O_RDWR | O_CREAT, 0644, &st->lock_fd);
    if (rc)
        return rc;
    if (flock(st->lock_fd, LOCK_EX | LOCK_NB) != 0) {
        char pid[32] = "";
        ssize_t n = pread(st->lock_fd, pid, sizeof pid - 1, 0);
        if (n > 0)
            pid[n] = '\0';
        pid[strcspn(pid, "\n")] = '\0';
        sk_error("pipeline '%s' is already running (process %s holds %s); "
                 "only one skipprd may run a pipeline at a time",
                 pipeline, *pid ? pid : "?", path);
        return SKIPPR_LOCKED;
    }
    char pid[32];
    int n = snprintf(pid, sizeof pid, "%ld\n", (long)getpid());
    if (ftruncate(st->lock_fd, 0) != 0 ||
        pwrite(st->lock_fd, pid, (size_t)n, 0) != n)
        sk_warn("could not write pid into %s", path);
    return SKIPPR_OK;
}

static int load_state_id(sk_state *st)
{
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/state_id", st->dir);
    FILE *f = fopen(path, "r");
    if (f) {
        char buf[32] = "";
        size_t n = fread(buf, 1, sizeof buf - 1, f);
        fclose(f);
        buf[n] = '\0';
        buf[strcspn(buf, "\n")] = '\0';
        if (strlen(buf) != 16 || strspn(buf, "0123456789abcdef") != 16) {
            sk_error("%s is damaged: expected 16 hex digits", path);
            return SKIPPR_CORRUPT;
        }
        memcpy(st->state_id, buf, 17);
        return SKIPPR_OK;
    }
    if (st->readonly) {
        strcpy(st->state_id, "----------------");
        return SKIPPR_OK;
    }
    uint64_t r;
    if (getrandom(&r, sizeof r, 0) != (ssize_t)sizeof r) {
        sk_error("getrandom: %s", strerror(errno));
        return SKIPPR_IO;
    }
    snprintf(st->state_id, sizeof st->state_id, "%016" PRIx64, r);
    char line[18];
    snprintf(line, sizeof line, "%s\n", st->state_id);
    return sk_io_replace_file(path, line, 17);
}

/* Before the folder is read: the store's copy replaces it (*seed 0), or
 * the store has none and gets the folder's once it is open (*seed 1). */
static int remote_before(sk_state *st, sk_remote *r, int *seed)
{
    int has = sk_remote_has_state(r);
    if (has < 0)
        return has;
    *seed = !has;
    return has ? sk_remote_restore(r, st->dir) : sk_remote_seed_begin(r);
}

int sk_state_file_changed(sk_state *st, const char *name, int removed)
{
    if (!st->remote)
        return SKIPPR_OK;
    if (removed)
        return sk_remote_delete(st->remote, name);
    char *path = sk_asprintf("%s/%s", st->dir, name);
    int rc = path ? sk_remote_put_file(st->remote, name, path)
                  : SKIPPR_NOMEM;
    sk_free(path);
    return rc;
}

/* Once the folder is open: from now on its changes go to the store too;
 * when seeding, what it holds now goes first, the state_id last. */
static int remote_after(sk_state *st, sk_remote *r, int seed)
{
    int rc = sk_ledger_set_remote(st->ledger, r, seed);
    if (!rc)
        rc = sk_wal_set_remote(st->wal, r, seed);
    st->remote = r;
    if (!rc && seed) {
        char *mark = sk_asprintf("%s/listing_mark", st->dir);
        if (!mark)
            return SKIPPR_NOMEM;
        if (access(mark, F_OK) == 0)
            rc = sk_state_file_changed(st, "listing_mark", 0);
        sk_free(mark);
        if (!rc)
            rc = sk_remote_seed_done(r, st->dir);
    }
    return rc;
}

int sk_state_open(const char *state_dir, const char *workspace,
                  const char *pipeline, int readonly, sk_remote *remote,
                  sk_state **out)
{
    int seed = 0;
    int rc = SKIPPR_NOMEM;
    char path[PATH_MAX];
    sk_state *st = sk_calloc(1, sizeof *st);
    if (!st)
        goto fail;
    st->lock_fd = -1;
    st->readonly = readonly;
    st->block_bytes = DEFAULT_BLOCK_BYTES;
    skippr_buf_init(&st->zbuf, SK_WAL_MAX_PAYLOAD);
    skippr_buf_init(&st->ident, (size_t)1 << 20);
    sk_bufpool_init(&st->pool, 0);
    sk_map_init(&st->open_by_key);
    st->dir = sk_asprintf("%s/%s/%s", state_dir, workspace, pipeline);
    if (!st->dir)
        goto fail;
    if (!readonly) {
        if ((rc = sk_io_mkdir_p(st->dir, 0755)) ||
            (rc = take_lock(st, pipeline)))
            goto fail;
    } else if (access(st->dir, F_OK) != 0) {
        rc = SKIPPR_NOENT;
        goto fail;
    }
    if (remote && !readonly && (rc = remote_before(st, remote, &seed)))
        goto fail;
    if ((rc = load_state_id(st)))
        goto fail;
    /* Staging piece tags: a random start, so that no run reuses a name a
     * crashed one may still have a write in flight for. */
    if (getrandom(&st->stage_tag, sizeof st->stage_tag, 0) !=
        (ssize_t)sizeof st->stage_tag)
        st->stage_tag = (uint64_t)time(NULL) << 20 ^ (uint64_t)getpid();
    snprintf(path, sizeof path, "%s/ledger", st->dir);
    if ((rc = sk_ledger_open(path, readonly, &st->ledger)))
        goto fail;
    st->next_slice_id = sk_ledger_next_slice_id(st->ledger);
    snprintf(path, sizeof path, "%s/wal", st->dir);
    /* `status` of a pipeline that never wrote a WAL: the ledger alone */
    int no_wal = readonly && access(path, F_OK) != 0;
    if (!no_wal && ((rc = sk_wal_open(path, &st->wal)) ||
                    (rc = st_replay(st))))
        goto fail;
    if (remote && !readonly && (rc = remote_after(st, remote, seed)))
        goto fail;
    *out = st;
    st = NULL; /* handed to the caller */
    rc = SKIPPR_OK;
fail:
    sk_state_close(st);
    return rc;
}

void sk_state_close(sk_state *st)
{
    if (!st)
        return;
    for (size_t i = 0; i < st->nlive; i++)
        st_slice_free(st->live[i]);
    sk_free(st->live);
    sk_state_orphans_clear(st);
    sk_map_free(&st->open_by_key);
    sk_bufpool_clear(&st->pool);
    skippr_buf_free(&st->zbuf);
    skippr_buf_free(&st->ident);
    ZSTD_freeCCtx(st->zctx);
    sk_wal_close(st->wal);
    sk_ledger_close(st->ledger);
    if (st->lock_fd >= 0)
        close(st->lock_fd); /* releases the flock */
    sk_free(st->dir);
    sk_free(st);
}

