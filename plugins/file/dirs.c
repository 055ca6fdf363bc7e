/* The folders the File sink has made or found, shared by every instance
 * of the process: see dirs.h. */
#include "dirs.h"

#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* Folders made or found, by any instance of the process (the upload
 * threads' instances write into one tree): a set of absolute paths (open
 * addressing, DIRS_CAP slots, emptied when three quarters full), so that
 * an object in a known folder costs no mkdir and no failed open, a new
 * one only the file_mkdirs of its missing levels, and each folder is made
 * once, not once per instance. Freed with the last instance. */
#define DIRS_CAP 65536u
static struct {
    pthread_mutex_t lock;
    char **v;
    size_t n;
    long users; /* instances alive */
} dirset = {PTHREAD_MUTEX_INITIALIZER, NULL, 0, 0};

/* Empty the folder set; dirset.lock held. */
static void dirs_clear_locked(void)
{
    if (!dirset.v)
        return;
    for (size_t i = 0; i < DIRS_CAP; i++)
        free(dirset.v[i]);
    memset(dirset.v, 0, DIRS_CAP * sizeof *dirset.v);
    dirset.n = 0;
}

/* Forget every folder (one was removed behind our back). */
void file_dirs_clear(void)
{
    pthread_mutex_lock(&dirset.lock);
    dirs_clear_locked();
    pthread_mutex_unlock(&dirset.lock);
}

void file_dirs_use(void)
{
    pthread_mutex_lock(&dirset.lock);
    dirset.users++;
    pthread_mutex_unlock(&dirset.lock);
}

void file_dirs_release(void)
{
    pthread_mutex_lock(&dirset.lock);
    if (--dirset.users == 0) {
        dirs_clear_locked();
        free(dirset.v);
        dirset.v = NULL;
    }
    pthread_mutex_unlock(&dirset.lock);
}

/* The slot of dir (n bytes) in the set: where it is, or the empty slot
 * where it would go. NULL when the set cannot be made. dirset.lock held. */
static char **dirs_slot(const char *dir, size_t n)
{
    if (!dirset.v && !(dirset.v = calloc(DIRS_CAP, sizeof *dirset.v)))
        return NULL;
    uint64_t h = 1469598103934665603ULL;
    for (size_t i = 0; i < n; i++)
        h = (h ^ (uint8_t)dir[i]) * 1099511628211ULL;
    for (size_t i = (size_t)h & (DIRS_CAP - 1);; i = (i + 1) & (DIRS_CAP - 1))
        if (!dirset.v[i] ||
            (strncmp(dirset.v[i], dir, n) == 0 && dirset.v[i][n] == '\0'))
            return &dirset.v[i];
}

int file_dir_known(const char *dir, size_t n)
{
    pthread_mutex_lock(&dirset.lock);
    char **slot = dirs_slot(dir, n);
    int known = slot && *slot;
    pthread_mutex_unlock(&dirset.lock);
    return known;
}

/* Remember dir; forgetting is harmless (it only costs a mkdir). */
void file_dir_note(const char *dir, size_t n)
{
    pthread_mutex_lock(&dirset.lock);
    if (dirset.n >= DIRS_CAP / 4 * 3)
        dirs_clear_locked();
    char **slot = dirs_slot(dir, n);
    if (slot && !*slot && (*slot = strndup(dir, n)))
        dirset.n++;
    pthread_mutex_unlock(&dirset.lock);
}
