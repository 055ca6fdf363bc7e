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

int sk_io_open(const char *path, int flags, int mode, int *fd_out)
{
    int fd;
    if (sk_fault_hit(SK_FAULT_OPEN)) {
        errno = EIO;
        fd = -1;
    } else {
        do
            fd = open(path, flags | O_CLOEXEC, mode);
        while (fd < 0 && errno == EINTR);
    }
    int rc = SKIPPR_OK;
    if (fd < 0) {
        int err = errno;
        if (err != ENOENT || (flags & O_CREAT))
            sk_error("open %s: %s", path, strerror(err));
        rc = sk_io_status_from_errno(err);
    } else {
        *fd_out = fd;
    }
    return rc;
}

int sk_io_write_all(int fd, const void *p, size_t n, const char *what)
{
    const uint8_t *s = p;
    while (n > 0) {
        ssize_t w;
        if (sk_fault_hit(SK_FAULT_WRITE)) {
            errno = sk_fault_nospc_armed() ? ENOSPC : EIO;
            w = -1;
        } else {
            w = write(fd, s, n);
        }
        if (w < 0) {
            if (errno == EINTR)
                continue;
            int err = errno;
            sk_error("write %s: %s", what, strerror(err));
            int st = sk_io_status_from_errno(err);
            return st == SKIPPR_IO ? SKIPPR_IO_WRITE : st;
        }
        s += w;
        n -= (size_t)w;
    }
    return SKIPPR_OK;
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
