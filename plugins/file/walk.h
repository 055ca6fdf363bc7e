/* A folder tree listed in key order, as a stream that can pause and go on.
 *
 * Keys are paths relative to the root ("2021/10/03/events-1"), produced in
 * strcmp order of the whole key, as S3 lists them: within a folder, entries
 * sort by name with a '/' after each sub-folder's name, so "a.b" comes
 * before everything under "a/". Only the folders on the way down are held
 * (each one's sorted entries and a descriptor), never the tree: memory is
 * bounded by the largest folder, not by the number of files.
 *
 * A walk paused by its callback resumes where it stopped when the next
 * call asks for the keys after the last one it gave; any other start
 * begins again from the root and skips, without descending, every
 * sub-folder whose keys all sort before the start.
 *
 * The stats of a folder's files are taken ahead of the walk by helper
 * threads (one per online core but one, at most 7) from the first file
 * wanted on, in chunks, so that the kernel's path lookups overlap the
 * caller's work and each other; the walk takes any chunk they have not
 * reached itself. Folders of fewer than 128 files are stat'ed as they
 * are walked. The helpers start with the first such folder and stop in
 * walk_reset().
 */
#ifndef SKIPPR_FILE_WALK_H
#define SKIPPR_FILE_WALK_H

#include <stddef.h>
#include <sys/stat.h>

typedef struct walk_level walk_level;
struct walk_pool;

typedef struct walker {
    walk_level *lv; /* lv[0] is the root; lv[depth - 1] the current folder */
    size_t depth, cap;
    int paused;        /* fn paused the walk after `last` */
    char last[4096];   /* the last key given: where a resume goes on */
    char failed[4096]; /* the folder a failed walk could not read */
    struct walk_pool *pool; /* stat helpers; NULL until a big folder */
    int names_first; /* report each file by name before its stat */
} walker;

/* Called for each regular file, in key order, with its key and stat
 * metadata (symbolic links are followed): only st_mode, st_size and
 * st_mtim are set. A nonzero return pauses the walk after this key.
 *
 * With names_first set, each file (each entry that readdir says is one)
 * is first given with st NULL, before any stat: WALK_STAT asks for it
 * again with its stat (a file removed meanwhile is then left out), 0 goes
 * on without one, and another nonzero value pauses after it. A folder's
 * stats are taken ahead (below) only from its first WALK_STAT on. */
typedef int (*walk_fn)(void *ud, const char *key, const struct stat *st);
#define WALK_STAT 2

/* Give every file under root whose key starts with prefix and sorts after
 * start_after (NULL: from the first). Returns 0 at the end of the tree or
 * when fn paused it; otherwise an errno value (ENOMEM, or why a folder
 * could not be read: w->failed names it). A sub-folder or file removed
 * during the walk is skipped; a missing root is ENOENT. */
int walk_run(walker *w, const char *root, const char *prefix,
             const char *start_after, walk_fn fn, void *ud);

/* Free what a paused walk holds. The walker may be used again. */
void walk_reset(walker *w);

#endif
