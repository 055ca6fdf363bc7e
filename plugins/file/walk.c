#include "walk.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <skippr/buf.h>

/* Files a helper stats per claim, and the fewest files in a folder for
 * which stats are taken ahead at all. */
enum { CHUNK = 64, AHEAD_MIN = 2 * CHUNK, HELPERS_MAX = 7 };

/* What the walk needs of a file's stat. */
typedef struct file_meta {
    int64_t size, mtime_sec;
    int32_t mtime_nsec;
    uint8_t ok; /* the stat succeeded and the name is a regular file */
} file_meta;

/* The stats of one folder's files, taken ahead of the walk by helper
 * threads in chunks of CHUNK names, in order. Allocated apart from its
 * level (w->lv moves when it grows) and freed only once no helper is
 * inside (ahead_drop). */
typedef struct ahead {
    int fd;               /* the level's folder; borrowed */
    char *const *names;   /* the level's sorted names; borrowed */
    size_t n, nchunks;
    file_meta *meta;      /* meta[k] for names[k], once its chunk is done */
    atomic_size_t next;   /* the next chunk to claim */
    atomic_uchar *done;   /* done[c]: chunk c is written */
    atomic_int waiting;   /* the walk waits in pool->chunk for a chunk */
    int active;           /* helpers working on it; pool->mu held */
    struct walk_pool *pool;
} ahead;

/* Helper threads that stat the current folder's files ahead of the walk,
 * so that the walk's caller (the engine's skip check) and the kernel's
 * path lookups run at once, on as many cores as there are helpers. */
struct walk_pool {
    pthread_mutex_t mu;
    pthread_cond_t work, idle, chunk;
    ahead *target; /* the folder to work on; NULL: none */
    int stop;
    size_t n;
    pthread_t t[HELPERS_MAX];
};

struct walk_level {
    char *rel;    /* this folder's key without the '/', "" for the root */
    int fd;       /* the folder, for openat and fstatat */
    char **names; /* entries in key order; a folder's ends with '/' */
    size_t n, cap, i;
    ahead *ah;    /* its files' stats taken ahead; NULL: stat on the way */
    int ah_tried; /* ahead_start was called for it */
};

/* Stat the files of chunk c into a->meta and publish it. */
static void stat_chunk(ahead *a, size_t c)
{
    size_t end = (c + 1) * CHUNK < a->n ? (c + 1) * CHUNK : a->n;
    for (size_t k = c * CHUNK; k < end; k++) {
        const char *name = a->names[k];
        size_t len = strlen(name);
        file_meta *m = &a->meta[k];
        m->ok = 0;
        if (len && name[len - 1] == '/')
            continue; /* a folder: the walk enters it */
        struct stat st;
        if (fstatat(a->fd, name, &st, 0) != 0 || !S_ISREG(st.st_mode))
            continue; /* removed since the folder was read */
        m->size = (int64_t)st.st_size;
        m->mtime_sec = (int64_t)st.st_mtim.tv_sec;
        m->mtime_nsec = (int32_t)st.st_mtim.tv_nsec;
        m->ok = 1;
    }
    /* Sequentially consistent with ahead_get's: either it sees the chunk
     * done or this sees it waiting and wakes it. */
    atomic_store(&a->done[c], 1);
    if (atomic_load(&a->waiting)) {
        pthread_mutex_lock(&a->pool->mu);
        pthread_cond_broadcast(&a->pool->chunk);
        pthread_mutex_unlock(&a->pool->mu);
    }
}

static void *helper(void *arg)
{
    struct walk_pool *p = arg;
    pthread_mutex_lock(&p->mu);
    for (;;) {
        while (!p->stop && !p->target)
            pthread_cond_wait(&p->work, &p->mu);
        if (p->stop)
            break;
        ahead *a = p->target;
        a->active++;
        pthread_mutex_unlock(&p->mu);
        for (;;) {
            size_t c = atomic_fetch_add(&a->next, 1);
            if (c >= a->nchunks)
                break;
            stat_chunk(a, c);
        }
        pthread_mutex_lock(&p->mu);
        if (p->target == a)
            p->target = NULL; /* every chunk is claimed */
        if (--a->active == 0)
            pthread_cond_broadcast(&p->idle);
    }
    pthread_mutex_unlock(&p->mu);
    return NULL;
}

/* Stop and free the helpers. */
static void pool_free(struct walk_pool *p)
{
    if (!p)
        return;
    pthread_mutex_lock(&p->mu);
    p->stop = 1;
    pthread_cond_broadcast(&p->work);
    pthread_mutex_unlock(&p->mu);
    for (size_t i = 0; i < p->n; i++)
        pthread_join(p->t[i], NULL);
    pthread_cond_destroy(&p->work);
    pthread_cond_destroy(&p->idle);
    pthread_cond_destroy(&p->chunk);
    pthread_mutex_destroy(&p->mu);
    free(p);
}

/* Start one helper per online core but the walk's own, at most
 * HELPERS_MAX. NULL on a single core or when no thread can be made: the
 * walk then takes every stat itself. The caller owns the pool. */
static struct walk_pool *pool_new(void)
{
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    size_t want = cores > 1 ? (size_t)cores - 1 : 0;
    if (want > HELPERS_MAX)
        want = HELPERS_MAX;
    if (!want)
        return NULL;
    struct walk_pool *p = calloc(1, sizeof *p);
    if (!p)
        return NULL;
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->work, NULL);
    pthread_cond_init(&p->idle, NULL);
    pthread_cond_init(&p->chunk, NULL);
    while (p->n < want && pthread_create(&p->t[p->n], NULL, helper, p) == 0)
        p->n++;
    if (!p->n) {
        pool_free(p);
        return NULL;
    }
    return p;
}

/* Take a out of the helpers' hands and free it: no chunk is claimed after
 * this, and the ones being stat'ed are finished first. */
static void ahead_drop(struct walk_pool *p, ahead *a)
{
    if (!a)
        return;
    pthread_mutex_lock(&p->mu);
    if (p->target == a)
        p->target = NULL;
    atomic_store(&a->next, a->nchunks);
    while (a->active)
        pthread_cond_wait(&p->idle, &p->mu);
    pthread_mutex_unlock(&p->mu);
    free(a->meta);
    free(a->done);
    free(a);
}

/* Have the helpers stat L's files from index `first` on. Without memory
 * or helpers, L stays without: the walk stats as it goes. */
static void ahead_start(walker *w, walk_level *L, size_t first)
{
    size_t files = 0;
    for (size_t k = first; k < L->n; k++)
        files += L->names[k][strlen(L->names[k]) - 1] != '/';
    if (files < AHEAD_MIN)
        return;
    if (!w->pool && !(w->pool = pool_new()))
        return;
    ahead *a = calloc(1, sizeof *a);
    if (!a)
        return;
    a->pool = w->pool;
    a->fd = L->fd;
    a->names = L->names;
    a->n = L->n;
    a->nchunks = (L->n + CHUNK - 1) / CHUNK;
    a->meta = malloc(L->n * sizeof *a->meta);
    a->done = calloc(a->nchunks, sizeof *a->done);
    if (!a->meta || !a->done) {
        free(a->meta);
        free(a->done);
        free(a);
        return;
    }
    /* Chunks before `first` are never read: mark them done unwritten. */
    size_t c0 = first / CHUNK;
    for (size_t c = 0; c < c0; c++)
        atomic_init(&a->done[c], 1);
    atomic_init(&a->next, c0);
    atomic_init(&a->waiting, 0);
    L->ah = a;
    pthread_mutex_lock(&w->pool->mu);
    w->pool->target = a; /* a deeper folder: the one the walk reads next */
    pthread_cond_broadcast(&w->pool->work);
    pthread_mutex_unlock(&w->pool->mu);
}

/* names[k]'s metadata from the helpers, taking the stats of the chunks
 * still unclaimed up to k's meanwhile. 1 with *st set; 0 when the file
 * went away or is not a regular file. */
static int ahead_get(ahead *a, size_t k, struct stat *st)
{
    size_t c = k / CHUNK;
    while (!atomic_load(&a->done[c])) {
        size_t m = atomic_fetch_add(&a->next, 1);
        if (m < a->nchunks) {
            stat_chunk(a, m);
            continue;
        }
        /* A helper has it in hand: sleep until it is done. */
        pthread_mutex_lock(&a->pool->mu);
        atomic_fetch_add(&a->waiting, 1);
        while (!atomic_load(&a->done[c]))
            pthread_cond_wait(&a->pool->chunk, &a->pool->mu);
        atomic_fetch_sub(&a->waiting, 1);
        pthread_mutex_unlock(&a->pool->mu);
    }
    const file_meta *m = &a->meta[k];
    if (!m->ok)
        return 0;
    memset(st, 0, sizeof *st);
    st->st_mode = S_IFREG;
    st->st_size = (off_t)m->size;
    st->st_mtim.tv_sec = (time_t)m->mtime_sec;
    st->st_mtim.tv_nsec = m->mtime_nsec;
    return 1;
}

static void level_free(walker *w, walk_level *L)
{
    ahead_drop(w->pool, L->ah);
    for (size_t k = 0; k < L->n; k++)
        free(L->names[k]);
    free(L->names);
    free(L->rel);
    if (L->fd >= 0)
        close(L->fd);
}

void walk_reset(walker *w)
{
    while (w->depth) {
        w->depth--;
        level_free(w, &w->lv[w->depth]);
    }
    pool_free(w->pool);
    w->pool = NULL;
    free(w->lv);
    w->lv = NULL;
    w->cap = 0;
    w->paused = 0;
}

static int cmp_name(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Add name (a folder's with a '/') to L; 0 or ENOMEM. */
static int level_add(walk_level *L, const char *name, int is_dir)
{
    if (skippr_array_grow(&L->names, L->n, &L->cap, sizeof *L->names, 64))
        return ENOMEM;
    size_t n = strlen(name);
    char *s = malloc(n + 2);
    if (!s)
        return ENOMEM;
    memcpy(s, name, n);
    s[n] = '/';
    s[n + is_dir] = '\0';
    L->names[L->n++] = s;
    return 0;
}

/* Read the entries of L->fd into L, sorted. Hidden names ('.' first) and
 * anything but regular files and folders are left out. 0 or an errno. */
static int level_read(walk_level *L)
{
    int dup_fd = fcntl(L->fd, F_DUPFD_CLOEXEC, 0);
    DIR *d = dup_fd >= 0 ? fdopendir(dup_fd) : NULL;
    if (!d) {
        int err = errno;
        if (dup_fd >= 0)
            close(dup_fd);
        return err;
    }
    int rc = 0;
    struct dirent *e;
    errno = 0;
    while (rc == 0 && (e = readdir(d))) {
        if (e->d_name[0] == '.')
            continue;
        int is_dir = e->d_type == DT_DIR;
        if (e->d_type == DT_UNKNOWN || e->d_type == DT_LNK) {
            struct stat st;
            if (fstatat(L->fd, e->d_name, &st, 0) != 0)
                continue; /* removed, or a dangling link */
            is_dir = S_ISDIR(st.st_mode);
            if (!is_dir && !S_ISREG(st.st_mode))
                continue;
        } else if (!is_dir && e->d_type != DT_REG) {
            continue;
        }
        rc = level_add(L, e->d_name, is_dir);
    }
    if (rc == 0 && errno != 0)
        rc = errno;
    closedir(d);
    if (rc == 0 && L->n > 1)
        qsort(L->names, L->n, sizeof *L->names, cmp_name);
    return rc;
}

/* Open and read the folder rel (its last segment `name` under the
 * current level, or root for the first) as a new level. 0; ENOENT when
 * it went away; another errno with w->failed set. */
static int push(walker *w, const char *root, const char *name,
                const char *rel)
{
    if (skippr_array_grow(&w->lv, w->depth, &w->cap, sizeof *w->lv, 8))
        return ENOMEM;
    walk_level *L = &w->lv[w->depth];
    memset(L, 0, sizeof *L);
    L->fd = w->depth == 0
                ? open(root, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
                : openat(w->lv[w->depth - 1].fd, name,
                         O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    int rc = L->fd < 0 ? errno : 0;
    if (rc == 0 && !(L->rel = strdup(rel)))
        rc = ENOMEM;
    if (rc == 0)
        rc = level_read(L);
    if (rc) {
        if (rc != ENOMEM)
            snprintf(w->failed, sizeof w->failed, "%s%s%s", root,
                     *rel ? "/" : "", rel);
        level_free(w, L);
        return rc;
    }
    w->depth++;
    return 0;
}

int walk_run(walker *w, const char *root, const char *prefix,
             const char *start_after, walk_fn fn, void *ud)
{
    if (!(w->paused && start_after && strcmp(w->last, start_after) == 0)) {
        walk_reset(w);
        int rc = push(w, root, NULL, "");
        if (rc)
            return rc;
    }
    w->paused = 0;
    size_t plen = strlen(prefix);
    char key[sizeof w->last];
    while (w->depth) {
        walk_level *L = &w->lv[w->depth - 1];
        if (L->i == L->n) {
            level_free(w, L);
            w->depth--;
            continue;
        }
        const char *name = L->names[L->i++];
        size_t rlen = strlen(L->rel), nlen = strlen(name);
        size_t klen = rlen + (rlen > 0) + nlen;
        if (klen >= sizeof key)
            continue; /* a key no object store could hold */
        memcpy(key, L->rel, rlen);
        if (rlen)
            key[rlen] = '/';
        memcpy(key + klen - nlen, name, nlen + 1);
        if (key[klen - 1] == '/') {
            /* A folder: enter it unless no key under it can match the
             * prefix or sort after start_after. */
            size_t m = klen < plen ? klen : plen;
            if (strncmp(key, prefix, m) != 0)
                continue;
            if (start_after && strcmp(key, start_after) < 0 &&
                strncmp(start_after, key, klen) != 0)
                continue;
            key[klen - 1] = '\0';
            char sub[sizeof key];
            memcpy(sub, name, strlen(name) - 1);
            sub[strlen(name) - 1] = '\0';
            int rc = push(w, root, sub, key);
            if (rc == ENOENT)
                continue; /* removed since its parent was read */
            if (rc)
                return rc;
            continue;
        }
        if (strncmp(key, prefix, plen) != 0 ||
            (start_after && strcmp(key, start_after) <= 0))
            continue;
        if (w->names_first) {
            int r = fn(ud, key, NULL);
            if (r != WALK_STAT) {
                memcpy(w->last, key, klen + 1);
                if (r) {
                    w->paused = 1;
                    return 0;
                }
                continue;
            }
        }
        /* The first file wanted in a folder starts its stats ahead. */
        if (!L->ah && !L->ah_tried) {
            L->ah_tried = 1;
            ahead_start(w, L, L->i - 1);
        }
        struct stat st;
        if (L->ah ? !ahead_get(L->ah, L->i - 1, &st)
                  : fstatat(L->fd, name, &st, 0) != 0 || !S_ISREG(st.st_mode))
            continue; /* removed since the folder was read */
        memcpy(w->last, key, klen + 1);
        if (fn(ud, key, &st)) {
            w->paused = 1;
            return 0;
        }
    }
    return 0;
}
