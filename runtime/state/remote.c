/* State off the box: the lease, the store's copy of the state folder, and
 * the restore onto an empty disk (remote.h says what is where). */
#include "state/remote.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "base/common.h"
#include "base/crc32c.h"
#include "base/fence.h"
#include "base/fsio.h"
#include "state/remote_impl.h"
#include "state/walname.h"

/* The boot clock: it runs on while the process is stopped or the machine
 * sleeps, so a pause counts against the lease. */
static int64_t now_ms(void) { return sk_boot_ms(); }

/* The lease holds until until_ms: store it, and move the process's fence
 * when this lease guards the process's writes. */
static void lease_valid(sk_remote *r, int64_t until_ms)
{
    atomic_store(&r->valid_until_ms, until_ms);
    if (r->fences)
        sk_fence_extend(until_ms);
}

/* Another process took the lease. */
static void lease_lost(sk_remote *r)
{
    atomic_store(&r->lost, 1);
    if (r->fences)
        sk_fence_close();
}

static void sleep_ms(int64_t ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

/* ---- store calls (under mu) ----------------------------------------- */

int rm_get(sk_remote *r, const char *rel, uint64_t off, void *buf, size_t cap,
           size_t *got, uint64_t *size, char *etag, size_t etag_cap)
{
    char *key = sk_asprintf("%s%s", r->prefix, rel);
    if (!key)
        return SKIPPR_NOMEM;
    pthread_mutex_lock(&r->mu);
    int rc = r->ops->store_get(r->ctx, key, off, buf, cap, got, size, etag,
                               etag_cap);
    pthread_mutex_unlock(&r->mu);
    sk_free(key);
    return rc;
}

static int st_put(sk_remote *r, const char *rel, const void *p, size_t n,
                  const char *cond, char *etag, size_t etag_cap)
{
    char *key = sk_asprintf("%s%s", r->prefix, rel);
    if (!key)
        return SKIPPR_NOMEM;
    pthread_mutex_lock(&r->mu);
    int rc = r->ops->store_put(r->ctx, key, p, n, cond, etag, etag_cap);
    pthread_mutex_unlock(&r->mu);
    sk_free(key);
    return rc;
}

int sk_remote_delete(sk_remote *r, const char *rel)
{
    char *key = sk_asprintf("%s%s", r->prefix, rel);
    if (!key)
        return SKIPPR_NOMEM;
    pthread_mutex_lock(&r->mu);
    int rc = r->ops->store_delete(r->ctx, key);
    pthread_mutex_unlock(&r->mu);
    sk_free(key);
    return rc;
}

/* ---- the lease -------------------------------------------------------- */

/* The lease object: its body (NUL-terminated) and ETag. */
static int lease_read(sk_remote *r, char *body, char *etag)
{
    size_t got = 0;
    uint64_t size = 0;
    int rc = rm_get(r, "lease", 0, body, LEASE_MAX - 1, &got, &size, etag,
                    sizeof r->etag);
    body[rc ? 0 : got] = '\0';
    return rc;
}

/* Write the lease as ours (or, released, as free), if cond holds. */
static int lease_write(sk_remote *r, const char *cond, int released)
{
    char body[LEASE_MAX], etag[sizeof r->etag];
    int n = released
                ? snprintf(body, sizeof body, "skippr lease\nreleased by %s\n",
                           r->owner)
                : snprintf(body, sizeof body,
                           "skippr lease\nowner %s\nrenewal %" PRIu64
                           "\nlease_seconds %" PRId64 "\n",
                           r->owner, ++r->seq, r->lease_ms / 1000);
    int rc = st_put(r, "lease", body, (size_t)n, cond, etag, sizeof etag);
    if (!rc)
        memcpy(r->etag, etag, sizeof etag);
    return rc;
}

/* The holder named in a lease body, into out. */
static void lease_holder(const char *body, char *out, size_t cap)
{
    const char *o = strstr(body, "\nowner ");
    if (!o) {
        snprintf(out, cap, "another process");
        return;
    }
    o += 7;
    snprintf(out, cap, "%.*s", (int)strcspn(o, "\n"), o);
}

/* Watch a lease another process holds (ETag seen): SKIPPR_LOCKED when it
 * renews, SKIPPR_OK once we took it over after it lapsed, SKIPPR_RETRY
 * when it went away or was released (try again). */
static int lease_watch(sk_remote *r, const char *seen, const char *body,
                       const atomic_int *stop)
{
    char holder[200], now[LEASE_MAX], etag[sizeof r->etag];
    lease_holder(body, holder, sizeof holder);
    sk_info("state %s: leased to %s; watching it for up to %" PRId64
            " s: a renewal means it runs, none means it is gone",
            r->where, holder, r->lease_ms / 1000);
    int64_t t0 = now_ms(), step = SK_MIN(r->lease_ms / 10, 1000);
    for (;;) {
        sleep_ms(step);
        if (stop && atomic_load(stop))
            return SKIPPR_STOPPED;
        int rc = lease_read(r, now, etag);
        if (rc == SKIPPR_NOENT)
            return SKIPPR_RETRY;
        if (rc)
            return rc;
        if (strcmp(etag, seen) != 0) {
            if (strstr(now, "\nreleased"))
                return SKIPPR_RETRY;
            lease_holder(now, holder, sizeof holder);
            sk_error("state %s is leased to %s, which renewed it just now: "
                     "another skipprd runs this pipeline. Stop it first; a "
                     "process that was killed loses the lease %" PRId64
                     " s after its last renewal", r->where, holder,
                     r->lease_ms / 1000);
            return SKIPPR_LOCKED;
        }
        if (now_ms() - t0 >= r->lease_ms) {
            rc = lease_write(r, seen, 0);
            if (rc == SKIPPR_CHANGED)
                return SKIPPR_RETRY;
            if (!rc)
                sk_info("state %s: took over the lease of %s, not renewed "
                        "for %" PRId64 " s", r->where, holder,
                        (now_ms() - t0) / 1000);
            return rc;
        }
    }
}

static int lease_take(sk_remote *r, const atomic_int *stop)
{
    char body[LEASE_MAX], etag[sizeof r->etag];
    for (int round = 0; round < 20; round++) {
        int64_t t = now_ms();
        int rc = lease_read(r, body, etag);
        if (rc == SKIPPR_NOENT)
            rc = lease_write(r, "*", 0);
        else if (!rc && strstr(body, "\nreleased"))
            rc = lease_write(r, etag, 0);
        else if (!rc && (rc = lease_watch(r, etag, body, stop)) == SKIPPR_OK)
            t = now_ms();
        if (rc == SKIPPR_CHANGED || rc == SKIPPR_RETRY)
            continue; /* another process moved first: look again */
        if (!rc)
            lease_valid(r, t + r->lease_ms * 5 / 6);
        return rc;
    }
    sk_error("state %s: the lease changed hands 20 times while this process "
             "tried to take it", r->where);
    return SKIPPR_LOCKED;
}

static void *renew_main(void *arg)
{
    sk_remote *r = arg;
    pthread_mutex_lock(&r->th_mu);
    while (!r->th_stop) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        int64_t ns = ts.tv_nsec + (r->lease_ms / 3 % 1000) * 1000000;
        ts.tv_sec += r->lease_ms / 3 / 1000 + ns / 1000000000;
        ts.tv_nsec = ns % 1000000000;
        pthread_cond_timedwait(&r->th_cv, &r->th_mu, &ts);
        if (r->th_stop)
            break;
        pthread_mutex_unlock(&r->th_mu);
        int64_t t = now_ms();
        int rc = lease_write(r, r->etag, 0);
        if (!rc) {
            lease_valid(r, t + r->lease_ms * 5 / 6);
        } else if (rc == SKIPPR_CHANGED) {
            lease_lost(r);
        } else if (rc == SKIPPR_LOCKED) {
            break; /* fenced: past the lease, not even a renewal is sent */
        } else {
            sk_warn("state %s: the lease's renewal failed; trying again in "
                    "%" PRId64 " s", r->where, r->lease_ms / 3000);
        }
        pthread_mutex_lock(&r->th_mu);
        if (rc == SKIPPR_CHANGED || rc == SKIPPR_LOCKED)
            break;
    }
    pthread_mutex_unlock(&r->th_mu);
    return NULL;
}

void sk_remote_fence(sk_remote *r)
{
    atomic_store(&r->fences, 1);
    sk_fence_extend(atomic_load(&r->valid_until_ms));
    if (atomic_load(&r->lost))
        sk_fence_close();
}

void sk_remote_tell_fenced(const sk_remote *r)
{
    sk_error("state %s: this process's lease %s: it was stopped or cut off "
             "for longer than the lease (%" PRId64 " s), and from then on "
             "it sent nothing to the sink or the state (fenced). The "
             "process that holds the lease now copies whatever this one "
             "had not stored; exiting with code 3",
             r->where, atomic_load(&r->lost) ? "was taken by another process"
                                             : "lapsed",
             r->lease_ms / 1000);
}

int sk_remote_check(sk_remote *r)
{
    if (!atomic_load(&r->lost) && now_ms() <= atomic_load(&r->valid_until_ms))
        return SKIPPR_OK;
    if (!r->told)
        sk_error("state %s: the lease was %s; stopping, so that only the "
                 "process that holds it writes this pipeline's state",
                 r->where,
                 atomic_load(&r->lost) ? "taken by another process"
                                       : "not renewed in time");
    r->told = 1;
    return SKIPPR_LOCKED;
}

int sk_remote_open(const skippr_sink_ops *ops, void *ctx, const char *where,
                   const char *prefix, int64_t lease_seconds,
                   const atomic_int *stop, sk_remote **out)
{
    *out = NULL;
    sk_remote *r = sk_calloc(1, sizeof *r);
    if (!r)
        return SKIPPR_NOMEM;
    r->ops = ops;
    r->ctx = ctx;
    r->lease_ms = lease_seconds * 1000;
    pthread_mutex_init(&r->mu, NULL);
    pthread_mutex_init(&r->th_mu, NULL);
    /* The renewal's waits run on the monotonic clock: a step of the
     * wall clock must not delay a renewal past the lease. */
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&r->th_cv, &ca);
    pthread_condattr_destroy(&ca);
    r->where = sk_asprintf("%s%s", where, prefix);
    r->prefix = sk_strdup(prefix);
    char host[64] = "";
    gethostname(host, sizeof host - 1);
    uint64_t tag = sk_now_ns() ^ ((uint64_t)getpid() << 32);
    snprintf(r->owner, sizeof r->owner, "%s pid %d (%016" PRIx64 ")", host,
             (int)getpid(), tag);
    int rc = r->where && r->prefix ? lease_take(r, stop) : SKIPPR_NOMEM;
    if (!rc && pthread_create(&r->th, NULL, renew_main, r) != 0)
        rc = SKIPPR_NOMEM;
    if (rc) {
        sk_remote_close(r, 0);
        return rc;
    }
    r->th_started = 1;
    sk_debug("state %s: lease taken as %s", r->where, r->owner);
    *out = r;
    return SKIPPR_OK;
}

void sk_remote_close(sk_remote *r, int release)
{
    if (!r)
        return;
    if (r->th_started) {
        pthread_mutex_lock(&r->th_mu);
        r->th_stop = 1;
        pthread_cond_signal(&r->th_cv);
        pthread_mutex_unlock(&r->th_mu);
        pthread_join(r->th, NULL);
        if (release && !atomic_load(&r->lost) &&
            lease_write(r, r->etag, 1) == SKIPPR_OK)
            sk_debug("state %s: lease released", r->where);
    }
    pthread_cond_destroy(&r->th_cv);
    pthread_mutex_destroy(&r->th_mu);
    pthread_mutex_destroy(&r->mu);
    sk_free(r->deltas);
    sk_free(r->where);
    sk_free(r->prefix);
    sk_free(r);
}

void sk_remote_stats(const sk_remote *r, uint64_t *wal_puts,
                     uint64_t *wal_bytes)
{
    *wal_puts = r ? r->wal_puts : 0;
    *wal_bytes = r ? r->wal_bytes : 0;
}

/* ---- files and WAL bytes --------------------------------------------- */

/* The key of WAL object n, relative to the state's prefix. */
static void delta_key(uint64_t n, char out[40])
{
    snprintf(out, 40, "wal/%016" PRIx64, n);
}

/* Remove the stored WAL objects of r->deltas[from, to) and their entries,
 * oldest first or newest first; on a failure, those removed so far. */
int rm_forget(sk_remote *r, size_t from, size_t to, int newest_first)
{
    int rc = SKIPPR_OK;
    size_t lo = from, hi = to; /* still stored: [lo, hi) */
    while (lo < hi && !rc) {
        char rel[40];
        delta_key(r->deltas[newest_first ? hi - 1 : lo].n, rel);
        if (!(rc = sk_remote_delete(r, rel))) {
            if (newest_first)
                hi--;
            else
                lo++;
        }
    }
    memmove(r->deltas + from, r->deltas + lo, (hi - lo) * sizeof *r->deltas);
    memmove(r->deltas + from + (hi - lo), r->deltas + to,
            (r->ndeltas - to) * sizeof *r->deltas);
    r->ndeltas -= (lo - from) + (to - hi);
    return rc;
}

/* rel from the open file fd of len bytes, through the store's
 * store_put_file, which reads it a part at a time. */
static int st_put_fd(sk_remote *r, const char *rel, int fd, uint64_t len)
{
    char *key = sk_asprintf("%s%s", r->prefix, rel);
    if (!key)
        return SKIPPR_NOMEM;
    pthread_mutex_lock(&r->mu);
    int rc = r->ops->store_put_file(r->ctx, key, fd, len, NULL, 0);
    pthread_mutex_unlock(&r->mu);
    sk_free(key);
    return rc;
}

int sk_remote_put_file(sk_remote *r, const char *rel, const char *path)
{
    int rc = sk_remote_check(r);
    if (rc)
        return rc;
    int fd;
    if ((rc = sk_io_open(path, O_RDONLY | O_CLOEXEC, 0, &fd)))
        return rc;
    int by_fd = SKIPPR_OPS_HAS(skippr_sink_ops, r->ops, store_put_file) &&
                r->ops->store_put_file;
    struct stat st;
    void *map = NULL;
    if (fstat(fd, &st) != 0) {
        sk_error("stat %s: %s", path, strerror(errno));
        rc = SKIPPR_IO;
    } else if (by_fd) {
        rc = st_put_fd(r, rel, fd, (uint64_t)st.st_size);
    } else if (st.st_size > 0 &&
               (map = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_SHARED,
                           fd, 0)) == MAP_FAILED) {
        sk_error("map %s: %s", path, strerror(errno));
        map = NULL;
        rc = SKIPPR_IO;
    }
    close(fd);
    if (!rc && !by_fd)
        rc = st_put(r, rel, map ? map : "", (size_t)st.st_size, NULL, NULL,
                    0);
    if (map)
        munmap(map, (size_t)st.st_size);
    return rc;
}

int sk_remote_wal(sk_remote *r, uint64_t seg, uint64_t off, const void *p,
                  size_t n)
{
    int rc = sk_remote_check(r);
    if (rc)
        return rc;
    if (skippr_array_grow(&r->deltas, r->ndeltas, &r->cap, sizeof *r->deltas,
                          64))
        return SKIPPR_NOMEM;
    uint8_t *buf = sk_malloc(DELTA_HEADER + n);
    if (!buf)
        return SKIPPR_NOMEM;
    sk_put_u32(buf, DELTA_MAGIC);
    sk_put_u64(buf + 4, seg);
    sk_put_u64(buf + 12, off);
    sk_put_u32(buf + 20, (uint32_t)n);
    memcpy(buf + DELTA_HEADER, p, n);
    sk_put_u32(buf + 24, sk_crc32c(sk_crc32c(0, buf, 24), p, n));
    char rel[40];
    delta_key(r->next_n, rel);
    rc = st_put(r, rel, buf, DELTA_HEADER + n, "*", NULL, 0);
    sk_free(buf);
    if (rc == SKIPPR_CHANGED) {
        sk_error("state %s: %s was written by another process: two "
                 "processes ran this pipeline; stopping", r->where, rel);
        lease_lost(r);
        r->told = 1;
        return SKIPPR_LOCKED;
    }
    if (rc)
        return rc;
    r->deltas[r->ndeltas++] = (delta){r->next_n++, seg};
    r->wal_puts++;
    r->wal_bytes += n;
    return SKIPPR_OK;
}

int sk_remote_wal_drop(sk_remote *r, uint64_t seg)
{
    size_t k = 0;
    while (k < r->ndeltas && r->deltas[k].seg < seg)
        k++;
    return rm_forget(r, 0, k, 0);
}
