#include "base/fsio.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/common.h"
#include "base/fault.h"

int sk_io_status_from_errno(int err)
{
    switch (err) {
    case ENOSPC:
    case EDQUOT:
        return SKIPPR_NOSPC;
    case ENOENT:
        return SKIPPR_NOENT;
    case ENOMEM:
        return SKIPPR_NOMEM;
    default:
        return SKIPPR_IO;
    }
}

/* open(2) with O_CLOEXEC, retried on EINTR, through the fault hook. */
static int open_fd(const char *path, int flags, int mode)
{
    if (sk_fault_hit(SK_FAULT_OPEN)) {
        errno = EIO;
        return -1;
    }
    int fd;
    do
        fd = open(path, flags | O_CLOEXEC, mode);
    while (fd < 0 && errno == EINTR);
    return fd;
}

static int open_failed(const char *path, int flags, int err)
{
    if (err != ENOENT || (flags & O_CREAT))
        sk_error("open %s: %s", path, strerror(err));
    return sk_io_status_from_errno(err);
}

int sk_io_open(const char *path, int flags, int mode, int *fd_out)
{
    int fd = open_fd(path, flags, mode);
    if (fd < 0)
        return open_failed(path, flags, errno);
    *fd_out = fd;
    return SKIPPR_OK;
}

int sk_io_open_direct(const char *path, int flags, int mode, int *fd_out,
                      int *direct)
{
    *direct = 0;
#ifdef O_DIRECT
    int fd = open_fd(path, flags | O_DIRECT, mode);
    if (fd >= 0) {
        *direct = 1;
        *fd_out = fd;
        return SKIPPR_OK;
    }
    if (errno != EINVAL)
        return open_failed(path, flags, errno);
    /* The file system has no direct I/O; O_CREAT may have made the file
     * before that was found, so it is not made exclusively again. */
    flags &= ~O_EXCL;
#endif
    return sk_io_open(path, flags, mode, fd_out);
}

/* write() (off < 0) or pwrite() at off of all n bytes. quiet: EINVAL is
 * SKIPPR_INVAL, not logged (sk_io_pwrite_all). */
static int write_all_at(int fd, const void *p, size_t n, off_t off,
                        const char *what, int quiet)
{
    const uint8_t *s = p;
    while (n > 0) {
        ssize_t w;
        if (sk_fault_hit(SK_FAULT_WRITE)) {
            errno = sk_fault_nospc_armed() ? ENOSPC : EIO;
            w = -1;
        } else {
            w = off < 0 ? write(fd, s, n) : pwrite(fd, s, n, off);
        }
        if (w < 0) {
            if (errno == EINTR)
                continue;
            int err = errno;
            if (quiet && err == EINVAL)
                return SKIPPR_INVAL;
            sk_error("write %s: %s", what, strerror(err));
            int st = sk_io_status_from_errno(err);
            return st == SKIPPR_IO ? SKIPPR_IO_WRITE : st;
        }
        s += w;
        n -= (size_t)w;
        if (off >= 0)
            off += w;
    }
    return SKIPPR_OK;
}

int sk_io_write_all(int fd, const void *p, size_t n, const char *what)
{
    return write_all_at(fd, p, n, -1, what, 0);
}

int sk_io_pwrite_all(int fd, const void *p, size_t n, off_t off,
                     const char *what)
{
    return write_all_at(fd, p, n, off, what, 1);
}

int sk_io_pread_all(int fd, void *p, size_t n, off_t off, size_t *got,
                    const char *what)
{
    uint8_t *d = p;
    size_t total = 0;
    while (total < n) {
        ssize_t r;
        if (sk_fault_hit(SK_FAULT_READ)) {
            errno = EIO;
            r = -1;
        } else {
            r = pread(fd, d + total, n - total, off + (off_t)total);
        }
        if (r < 0) {
            if (errno == EINTR)
                continue;
            sk_error("read %s at offset %lld: %s", what,
                     (long long)(off + (off_t)total), strerror(errno));
            return SKIPPR_IO;
        }
        if (r == 0)
            break;
        total += (size_t)r;
    }
    *got = total;
    return SKIPPR_OK;
}

int sk_io_fsync(int fd, const char *what)
{
    int rc;
    if (sk_fault_hit(SK_FAULT_FSYNC)) {
        errno = EIO;
        rc = -1;
    } else {
        rc = fsync(fd);
    }
    if (rc != 0) {
        sk_error("fsync %s: %s (fatal: data may not be durable)", what,
                 strerror(errno));
        return SKIPPR_IO_FSYNC;
    }
    return SKIPPR_OK;
}

int sk_io_fsync_dir(const char *dir)
{
    int fd;
    int rc = sk_io_open(dir, O_RDONLY | O_DIRECTORY, 0, &fd);
    if (rc)
        return rc;
    rc = sk_io_fsync(fd, dir);
    close(fd);
    return rc;
}

static void dir_of(const char *path, char *out, size_t cap)
{
    const char *slash = strrchr(path, '/');
    if (!slash) {
        snprintf(out, cap, ".");
    } else if (slash == path) {
        snprintf(out, cap, "/");
    } else {
        size_t n = (size_t)(slash - path);
        if (n >= cap)
            n = cap - 1;
        memcpy(out, path, n);
        out[n] = '\0';
    }
}

int sk_io_rename(const char *from, const char *to)
{
    int rc;
    if (sk_fault_hit(SK_FAULT_RENAME)) {
        errno = EIO;
        rc = -1;
    } else {
        rc = rename(from, to);
    }
    if (rc != 0) {
        sk_error("rename %s -> %s: %s", from, to, strerror(errno));
        return SKIPPR_IO_RENAME;
    }
    char dir[PATH_MAX];
    dir_of(to, dir, sizeof dir);
    return sk_io_fsync_dir(dir);
}

int sk_io_unlink(const char *path)
{
    int rc;
    if (sk_fault_hit(SK_FAULT_UNLINK)) {
        errno = EIO;
        rc = -1;
    } else {
        rc = unlink(path);
    }
    if (rc != 0 && errno != ENOENT) {
        sk_error("unlink %s: %s", path, strerror(errno));
        return SKIPPR_IO;
    }
    char dir[PATH_MAX];
    dir_of(path, dir, sizeof dir);
    return sk_io_fsync_dir(dir);
}

int sk_io_mkdir_p(const char *path, int mode)
{
    char buf[PATH_MAX];
    size_t n = strlen(path);
    if (n == 0 || n >= sizeof buf) {
        sk_error("mkdir %s: path too long", path);
        return SKIPPR_RANGE;
    }
    memcpy(buf, path, n + 1);
    for (size_t i = 1; i <= n; i++) {
        if (buf[i] != '/' && buf[i] != '\0')
            continue;
        char saved = buf[i];
        buf[i] = '\0';
        if (mkdir(buf, (mode_t)mode) == 0) {
            char parent[PATH_MAX];
            dir_of(buf, parent, sizeof parent);
            int rc = sk_io_fsync_dir(parent);
            if (rc)
                return rc;
        } else if (errno != EEXIST) {
            sk_error("mkdir %s: %s", buf, strerror(errno));
            return sk_io_status_from_errno(errno);
        }
        buf[i] = saved;
    }
    return SKIPPR_OK;
}

int sk_io_replace_file(const char *path, const void *p, size_t n)
{
    char *tmp = sk_asprintf("%s.tmp", path);
    int fd = -1;
    int rc = tmp ? sk_io_open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC,
                              0644, &fd)
                 : SKIPPR_NOMEM;
    if (!rc)
        rc = sk_io_write_all(fd, p, n, tmp);
    if (!rc)
        rc = sk_io_fsync(fd, tmp);
    if (fd >= 0)
        close(fd);
    if (!rc)
        rc = sk_io_rename(tmp, path);
    sk_free(tmp);
    return rc;
}
