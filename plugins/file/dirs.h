/* Folders known to exist under the File sink's path, for every instance of
 * the process (dirs.c): an object in a known folder costs no mkdir and no
 * failed open. Thread-safe. */
#ifndef SKIPPR_FILE_DIRS_H
#define SKIPPR_FILE_DIRS_H

#include <stddef.h>

/* An instance starts or stops using the set; the last one frees it. */
void file_dirs_use(void);
void file_dirs_release(void);
/* Whether folder dir[0..n) is known; remember it; forget every folder
 * (one was removed behind our back). */
int file_dir_known(const char *dir, size_t n);
void file_dir_note(const char *dir, size_t n);
void file_dirs_clear(void);

#endif
