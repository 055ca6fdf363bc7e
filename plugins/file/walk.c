#include "walk.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "growbuf.h"

struct walk_level {
    char *rel;    /* this folder's key without the '/', "" for the root */
    int fd;       /* the folder, for openat and fstatat */
    char **names; /* entries in key order; a folder's ends with '/' */
    size_t n, cap, i;
};

static void level_free(walk_level *L)
{
    for (size_t k = 0; k < L->n; k++)
        free(L->names[k]);
    free(L->names);
    free(L->rel);
    if (L->fd >= 0)
        close(L->fd);
}

void walk_reset(walker *w)
{
    while (w->depth)
        level_free(&w->lv[--w->depth]);
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
        level_free(L);
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
            level_free(L);
            w->depth--;
            continue;
        }
        const char *name = L->names[L->i++];
        int kl = snprintf(key, sizeof key, "%s%s%s", L->rel,
                          *L->rel ? "/" : "", name);
        if (kl <= 0 || (size_t)kl >= sizeof key)
            continue; /* a key no object store could hold */
        size_t klen = (size_t)kl;
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
        struct stat st;
        if (fstatat(L->fd, name, &st, 0) != 0 || !S_ISREG(st.st_mode))
            continue; /* removed since the folder was read */
        memcpy(w->last, key, klen + 1);
        if (fn(ud, key, &st)) {
            w->paused = 1;
            return 0;
        }
    }
    return 0;
}
