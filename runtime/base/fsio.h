/* File I/O wrappers. Every durable write in the engine and the file plugin
 * goes through these, so that fault tests can fail the Nth open, write,
 * fsync, rename or unlink (fault.h), and so that errors carry the syscall
 * and path.
 *
 * All functions return SKIPPR_OK or a negative status and log the cause at
 * error level, naming the path. A failed fsync is reported as
 * SKIPPR_IO_FSYNC; callers treat it as fatal and never retry, because the
 * kernel may have dropped the dirty pages (the PostgreSQL fsync lesson).
 */
#ifndef SK_FSIO_H
#define SK_FSIO_H

#include <stddef.h>
#include <sys/types.h>

int sk_io_open(const char *path, int flags, int mode, int *fd_out);
/* sk_io_open() with O_DIRECT where the file system takes it (*direct = 1),
 * else without it (*direct = 0; a file O_CREAT | O_EXCL asked for may then
 * exist already, made by the refused attempt). */
int sk_io_open_direct(const char *path, int flags, int mode, int *fd_out,
                      int *direct);
/* Write all n bytes, retrying short writes and EINTR. */
int sk_io_write_all(int fd, const void *p, size_t n, const char *what);
/* The same at file offset off (>= 0). EINVAL (an O_DIRECT write the file
 * system refuses: its alignment, or no direct I/O at all) is returned as
 * SKIPPR_INVAL without a log line, so the caller can fall back. */
int sk_io_pwrite_all(int fd, const void *p, size_t n, off_t off,
                     const char *what);
/* Read up to n bytes at off; *got is what was read (short only at EOF). */
int sk_io_pread_all(int fd, void *p, size_t n, off_t off, size_t *got,
                    const char *what);
int sk_io_fsync(int fd, const char *what);
/* fsync a directory, so a create, rename or unlink in it is durable. */
int sk_io_fsync_dir(const char *dir);
/* rename(2) then fsync the destination's directory. */
int sk_io_rename(const char *from, const char *to);
/* Make path hold p[0..n) durably and whole: path.tmp written, fsynced,
 * then renamed over path. */
int sk_io_replace_file(const char *path, const void *p, size_t n);
/* unlink(2) then fsync the directory. ENOENT is not an error. */
int sk_io_unlink(const char *path);
/* mkdir -p, fsyncing each parent whose entry was created. */
int sk_io_mkdir_p(const char *path, int mode);
/* Map an errno from a write-like call to a status. */
int sk_io_status_from_errno(int err);

#endif
