/* File-system faults for tests, an LD_PRELOAD library: power loss in the
 * manner of SQLite's crash VFS, and failing operations for fault loops.
 *
 * It lets a process write as usual but remembers, for every file and
 * folder under the modelled roots, what is not yet durable. At the chosen
 * operation it "loses power": it puts the roots back into a state a real
 * disk could have been left in, then kills the process. Or it makes the
 * Nth operation of one kind fail with EIO, once or from then on.
 *
 *   SKIPPR_POWERLOSS_ROOTS   folders to model, ':'-separated (absolute)
 *   SKIPPR_POWERLOSS_AT      lose power just before the Nth modelled
 *                            operation (1-based); 0 or unset: never
 *   SKIPPR_POWERLOSS_SEED    chooses what of the unsynced state survives
 *   SKIPPR_IOFAULT           KIND:N[:persist]: the Nth modelled operation
 *                            of KIND (open, write, fsync, rename, unlink,
 *                            mkdir) fails with EIO and is not done; with
 *                            persist every later one of KIND fails too
 *   SKIPPR_POWERLOSS_REPORT  lines are appended here: "ops N open N write
 *                            N ..." at a normal exit, "fault KIND N" when
 *                            a fault first fires, or what a power loss did
 *
 * Modelled operations: opening a file under a root for writing (open),
 * write, pwrite and ftruncate (write), fsync, fdatasync and syncfs
 * (fsync), rename, unlink and mkdir.
 *
 * The model (POSIX without the kindnesses of ext4):
 *  - A file's data is durable up to its last fsync (or fdatasync). Of its
 *    writes since, a prefix survives, the next write may be torn (a
 *    random part of its bytes kept), and the rest are lost.
 *  - A name is durable once the folder holding it is fsynced: a created
 *    file, an unlinked one, a made folder (its parent), a rename (the
 *    folder it moved into). Of the names changed since, in the order they
 *    were made, a prefix survives and the rest are undone: a file whose
 *    creation is undone vanishes with its data, a rename goes back (and
 *    the file it replaced returns), an unlinked file comes back.
 *  - syncfs makes everything durable.
 * Undoing runs newest first, so every step starts from the state its
 * operation left.
 *
 * Every modelled call holds one lock while it runs, so the log's order is
 * the order of the operations, and once power is lost no other thread
 * gets another modelled operation in before the SIGKILL.
 *
 * Unlinked and replaced files are kept by a hard link in a sibling folder
 * of their root ("<root>.powerloss"), so that they can come back.
 *
 * Limits: descriptors above FD_MAX, dup()ed descriptors, stdio writes and
 * mmap are not modelled (skippr writes with write/pwrite on descriptors
 * from open). It is a test tool: on its own errors it prints one line
 * and aborts.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#define FD_MAX 65536
#define MAX_ROOTS 8

typedef enum { U_WRITE, U_CREATE, U_MKDIR, U_RENAME, U_UNLINK } ukind;

/* Operation kinds, for fault injection and the counts. */
typedef enum { F_OPEN, F_WRITE, F_FSYNC, F_RENAME, F_UNLINK, F_MKDIR,
               F_KINDS } fkind;
static const char *const fkind_names[F_KINDS] = {"open", "write", "fsync",
                                                 "rename", "unlink", "mkdir"};

typedef struct undo {
    ukind kind;
    int durable;
    /* U_WRITE (also ftruncate): the file, the range it changed and what
     * was there before. */
    size_t file;
    off_t off;
    size_t len;
    off_t old_size;
    unsigned char *old; /* the bytes [off, off + old_len) overwrote */
    size_t old_len;
    /* names: dir is the folder whose fsync makes it durable */
    char *dir;
    char *path;   /* CREATE, MKDIR, UNLINK: the name; RENAME: the target */
    char *from;   /* RENAME: the old name */
    char *shadow; /* RENAME: the replaced file; UNLINK: the file */
} undo;

typedef struct file {
    dev_t dev;
    ino_t ino;
    char *path; /* its name now; a shadow name once unlinked */
} file;

static struct {
    int ready;
    char roots[MAX_ROOTS][PATH_MAX];
    size_t nroots;
    long at;
    unsigned long long seed;
    char report[PATH_MAX];
    long ops;
    long kind_ops[F_KINDS];
    int fault_kind; /* -1: no fault */
    long fault_at;
    int fault_persist;
    long faults; /* fired so far */
    int lost; /* power is gone: every thread waits for the SIGKILL */
    undo *log;
    size_t nlog, caplog;
    file *files;
    size_t nfiles, capfiles;
    long fd_file[FD_MAX]; /* file index + 1; -1: a folder; 0: not ours */
    char *fd_dir[FD_MAX]; /* a folder descriptor's path */
    unsigned long shadows;
} S;

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;

static int (*real_open)(const char *, int, ...);
static int (*real_openat)(int, const char *, int, ...);
static ssize_t (*real_write)(int, const void *, size_t);
static ssize_t (*real_pwrite)(int, const void *, size_t, off_t);
static int (*real_ftruncate)(int, off_t);
static int (*real_fsync)(int);
static int (*real_fdatasync)(int);
static int (*real_syncfs)(int);
static int (*real_rename)(const char *, const char *);
static int (*real_renameat)(int, const char *, int, const char *);
static int (*real_unlink)(const char *);
static int (*real_mkdir)(const char *, mode_t);
static int (*real_close)(int);

static void die(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "powerloss: ");
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n");
    va_end(ap);
    abort();
}

static void *xmalloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    if (!p)
        die("out of memory");
    return p;
}

static char *xstrdup(const char *s)
{
    char *p = strdup(s);
    if (!p)
        die("out of memory");
    return p;
}

static void report(const char *fmt, ...)
{
    if (!S.report[0])
        return;
    char line[1024];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    if (n < 0)
        return;
    if ((size_t)n >= sizeof line)
        n = sizeof line - 1;
    int fd = real_open(S.report, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC,
                       0644);
    if (fd >= 0) {
        ssize_t w = real_write(fd, line, (size_t)n);
        (void)w;
        real_close(fd);
    }
}

/* xorshift64*: the seed decides every choice. */
static unsigned long long rnd(void)
{
    S.seed ^= S.seed >> 12;
    S.seed ^= S.seed << 25;
    S.seed ^= S.seed >> 27;
    return S.seed * 2685821657736338717ULL;
}

static void resolve(void)
{
#define R(name) real_##name = dlsym(RTLD_NEXT, #name)
    R(open);
    R(openat);
    R(write);
    R(pwrite);
    R(ftruncate);
    R(fsync);
    R(fdatasync);
    R(syncfs);
    R(rename);
    R(renameat);
    R(unlink);
    R(mkdir);
    R(close);
#undef R
}

__attribute__((constructor)) static void init(void)
{
    resolve();
    const char *roots = getenv("SKIPPR_POWERLOSS_ROOTS");
    if (roots) {
        char *copy = xstrdup(roots);
        for (char *save = NULL, *t = strtok_r(copy, ":", &save); t;
             t = strtok_r(NULL, ":", &save)) {
            if (S.nroots == MAX_ROOTS)
                die("more than %d roots", MAX_ROOTS);
            if (t[0] != '/')
                die("root '%s' is not absolute", t);
            size_t n = strlen(t);
            while (n > 1 && t[n - 1] == '/')
                n--;
            if (n >= PATH_MAX)
                die("root too long");
            memcpy(S.roots[S.nroots], t, n);
            S.roots[S.nroots++][n] = '\0';
        }
        free(copy);
    }
    const char *at = getenv("SKIPPR_POWERLOSS_AT");
    S.at = at ? strtol(at, NULL, 10) : 0;
    const char *seed = getenv("SKIPPR_POWERLOSS_SEED");
    S.seed = (seed ? strtoull(seed, NULL, 10) : 1) * 0x9E3779B97F4A7C15ULL |
             1;
    S.fault_kind = -1;
    const char *f = getenv("SKIPPR_IOFAULT");
    if (f && *f) {
        char kind[16] = "", persist[16] = "";
        long n = 0;
        if (sscanf(f, "%15[a-z]:%ld:%15s", kind, &n, persist) < 2 || n < 1)
            die("SKIPPR_IOFAULT '%s': want KIND:N[:persist]", f);
        for (int k = 0; k < F_KINDS; k++)
            if (strcmp(kind, fkind_names[k]) == 0)
                S.fault_kind = k;
        if (S.fault_kind < 0)
            die("SKIPPR_IOFAULT: unknown kind '%s'", kind);
        S.fault_at = n;
        S.fault_persist = strcmp(persist, "persist") == 0;
    }
    const char *rep = getenv("SKIPPR_POWERLOSS_REPORT");
    if (rep)
        snprintf(S.report, sizeof S.report, "%s", rep);
    S.ready = S.nroots > 0;
}

/* A normal exit: the shadow links of this process are not needed. */
__attribute__((destructor)) static void fini(void)
{
    if (!S.ready || S.lost)
        return;
    report("ops %ld open %ld write %ld fsync %ld rename %ld unlink %ld mkdir "
           "%ld faults %ld\n", S.ops, S.kind_ops[F_OPEN], S.kind_ops[F_WRITE],
           S.kind_ops[F_FSYNC], S.kind_ops[F_RENAME], S.kind_ops[F_UNLINK],
           S.kind_ops[F_MKDIR], S.faults);
    for (size_t i = 0; i < S.nlog; i++)
        if (S.log[i].shadow)
            real_unlink(S.log[i].shadow);
}

/* An absolute form of path (relative to dirfd or the working folder),
 * with "." and ".." segments and repeated slashes removed. */
static void absolute(int dirfd, const char *path, char out[PATH_MAX])
{
    char buf[2 * PATH_MAX];
    if (path[0] == '/') {
        snprintf(buf, sizeof buf, "%s", path);
    } else {
        char base[PATH_MAX];
        if (dirfd != AT_FDCWD && dirfd >= 0 && dirfd < FD_MAX &&
            S.fd_dir[dirfd]) {
            snprintf(base, sizeof base, "%s", S.fd_dir[dirfd]);
        } else if (dirfd == AT_FDCWD) {
            if (!getcwd(base, sizeof base))
                die("getcwd: %s", strerror(errno));
        } else {
            char link[64];
            snprintf(link, sizeof link, "/proc/self/fd/%d", dirfd);
            ssize_t n = readlink(link, base, sizeof base - 1);
            if (n < 0)
                die("readlink %s: %s", link, strerror(errno));
            base[n] = '\0';
        }
        snprintf(buf, sizeof buf, "%s/%s", base, path);
    }
    /* normalise */
    size_t o = 0;
    out[0] = '\0';
    for (char *save = NULL, *t = strtok_r(buf, "/", &save); t;
         t = strtok_r(NULL, "/", &save)) {
        if (strcmp(t, ".") == 0)
            continue;
        if (strcmp(t, "..") == 0) {
            while (o > 0 && out[o - 1] != '/')
                o--;
            if (o > 0)
                o--;
            out[o] = '\0';
            continue;
        }
        size_t n = strlen(t);
        if (o + 1 + n >= PATH_MAX)
            die("path too long");
        out[o++] = '/';
        memcpy(out + o, t, n);
        o += n;
        out[o] = '\0';
    }
    if (o == 0)
        snprintf(out, PATH_MAX, "/");
}

static int under_root(const char *abs)
{
    for (size_t i = 0; i < S.nroots; i++) {
        size_t n = strlen(S.roots[i]);
        if (strncmp(abs, S.roots[i], n) == 0 &&
            (abs[n] == '/' || abs[n] == '\0'))
            return 1;
    }
    return 0;
}

static const char *root_of(const char *abs)
{
    for (size_t i = 0; i < S.nroots; i++) {
        size_t n = strlen(S.roots[i]);
        if (strncmp(abs, S.roots[i], n) == 0 &&
            (abs[n] == '/' || abs[n] == '\0'))
            return S.roots[i];
    }
    return NULL;
}

static void parent_of(const char *abs, char out[PATH_MAX])
{
    snprintf(out, PATH_MAX, "%s", abs);
    char *slash = strrchr(out, '/');
    if (slash == out)
        out[1] = '\0';
    else if (slash)
        *slash = '\0';
}

static undo *log_add(ukind kind)
{
    if (S.nlog == S.caplog) {
        size_t nc = S.caplog ? S.caplog * 2 : 256;
        undo *nl = realloc(S.log, nc * sizeof *nl);
        if (!nl)
            die("out of memory");
        S.log = nl;
        S.caplog = nc;
    }
    undo *u = &S.log[S.nlog++];
    memset(u, 0, sizeof *u);
    u->kind = kind;
    return u;
}

static size_t file_index(dev_t dev, ino_t ino, const char *path)
{
    for (size_t i = 0; i < S.nfiles; i++)
        if (S.files[i].dev == dev && S.files[i].ino == ino) {
            if (path && strcmp(S.files[i].path, path) != 0) {
                free(S.files[i].path);
                S.files[i].path = xstrdup(path);
            }
            return i;
        }
    if (S.nfiles == S.capfiles) {
        size_t nc = S.capfiles ? S.capfiles * 2 : 64;
        file *nf = realloc(S.files, nc * sizeof *nf);
        if (!nf)
            die("out of memory");
        S.files = nf;
        S.capfiles = nc;
    }
    S.files[S.nfiles] = (file){dev, ino, xstrdup(path ? path : "?")};
    return S.nfiles++;
}

/* Names of tracked files under `from` now live under `to`. */
static void files_moved(const char *from, const char *to)
{
    size_t n = strlen(from);
    for (size_t i = 0; i < S.nfiles; i++) {
        const char *p = S.files[i].path;
        if (strncmp(p, from, n) == 0 && (p[n] == '\0' || p[n] == '/')) {
            char buf[PATH_MAX];
            if ((size_t)snprintf(buf, sizeof buf, "%s%s", to, p + n) >=
                sizeof buf)
                die("path too long");
            free(S.files[i].path);
            S.files[i].path = xstrdup(buf);
        }
    }
}

/* Keep the file at abs by a hard link under "<root>.powerloss"; returns
 * the link's path (owned by the caller). */
static char *shadow_keep(const char *abs)
{
    char dir[PATH_MAX + 16], path[PATH_MAX + 64];
    snprintf(dir, sizeof dir, "%s.powerloss", root_of(abs));
    if (real_mkdir(dir, 0755) != 0 && errno != EEXIST)
        die("mkdir %s: %s", dir, strerror(errno));
    snprintf(path, sizeof path, "%s/%d-%lu", dir, (int)getpid(), S.shadows++);
    if (link(abs, path) != 0)
        die("link %s %s: %s", abs, path, strerror(errno));
    return xstrdup(path);
}

/* ---- losing power -------------------------------------------------------- */

static void restore_write(const undo *u, size_t keep)
{
    const char *path = S.files[u->file].path;
    int fd = real_open(path, O_WRONLY | O_CLOEXEC);
    if (fd < 0) {
        if (errno == ENOENT)
            return; /* its name is gone too */
        die("open %s: %s", path, strerror(errno));
    }
    /* Bytes it overwrote come back (after the kept part)... */
    if (u->old_len > keep) {
        ssize_t w = real_pwrite(fd, u->old + keep, u->old_len - keep,
                                u->off + (off_t)keep);
        if (w != (ssize_t)(u->old_len - keep))
            die("pwrite %s: %s", path, strerror(errno));
    }
    /* ...and the file is as long as before, or as the kept part. */
    off_t size = u->old_size;
    if (keep && u->off + (off_t)keep > size)
        size = u->off + (off_t)keep;
    if (u->len > 0 || u->old_size != size) {
        struct stat st;
        if (fstat(fd, &st) == 0 && st.st_size != size &&
            real_ftruncate(fd, size) != 0)
            die("ftruncate %s: %s", path, strerror(errno));
    }
    real_close(fd);
}

static int remove_one(const char *path, const struct stat *st, int type,
                      struct FTW *ftw)
{
    (void)st;
    (void)ftw;
    int rc = type == FTW_DP ? rmdir(path) : real_unlink(path);
    if (rc != 0 && errno != ENOENT)
        die("remove %s: %s", path, strerror(errno));
    return 0;
}

static void remove_tree(const char *path)
{
    if (nftw(path, remove_one, 16, FTW_DEPTH | FTW_PHYS) != 0 &&
        errno != ENOENT)
        die("cannot remove %s: %s", path, strerror(errno));
}

/* Undo what was not durable, newest first, as the seed chooses; then die
 * like a machine without power. Called with mu held. */
static void lose_power(const char *what, const char *path)
{
    S.lost = 1;
    /* Per file: how many of its pending writes survive (a prefix), and
     * whether the next is torn. */
    size_t nmeta = 0;
    for (size_t i = 0; i < S.nlog; i++)
        if (!S.log[i].durable && S.log[i].kind != U_WRITE)
            nmeta++;
    size_t keep_meta = nmeta ? (size_t)(rnd() % (nmeta + 1)) : 0;
    size_t *pending = calloc(S.nfiles + 1, sizeof *pending);
    size_t *keep = calloc(S.nfiles + 1, sizeof *keep);
    if (!pending || !keep)
        die("out of memory");
    for (size_t i = 0; i < S.nlog; i++)
        if (!S.log[i].durable && S.log[i].kind == U_WRITE)
            pending[S.log[i].file]++;
    for (size_t f = 0; f < S.nfiles; f++)
        keep[f] = pending[f] ? (size_t)(rnd() % (pending[f] + 1)) : 0;
    size_t kept = 0, torn = 0, dropped = 0, undone = 0;
    size_t meta_seen = nmeta;
    size_t *seen = calloc(S.nfiles + 1, sizeof *seen);
    if (!seen)
        die("out of memory");
    for (size_t i = S.nlog; i-- > 0;) {
        undo *u = &S.log[i];
        if (u->durable)
            continue;
        if (u->kind == U_WRITE) {
            size_t idx = pending[u->file] - ++seen[u->file]; /* 0-based */
            if (idx < keep[u->file]) {
                kept++;
            } else if (idx == keep[u->file] && u->len > 1 && rnd() % 2) {
                restore_write(u, (size_t)(rnd() % u->len));
                torn++;
            } else {
                restore_write(u, 0);
                dropped++;
            }
            continue;
        }
        if (--meta_seen < keep_meta)
            continue; /* this name change survived */
        undone++;
        switch (u->kind) {
        case U_CREATE:
            if (real_unlink(u->path) != 0 && errno != ENOENT)
                die("unlink %s: %s", u->path, strerror(errno));
            break;
        case U_MKDIR:
            remove_tree(u->path);
            break;
        case U_RENAME:
            if (real_rename(u->path, u->from) != 0)
                die("rename back %s: %s", u->path, strerror(errno));
            files_moved(u->path, u->from);
            if (u->shadow) {
                if (real_rename(u->shadow, u->path) != 0)
                    die("restore %s: %s", u->path, strerror(errno));
                files_moved(u->shadow, u->path);
            }
            break;
        case U_UNLINK:
            if (real_rename(u->shadow, u->path) != 0)
                die("restore %s: %s", u->path, strerror(errno));
            files_moved(u->shadow, u->path);
            break;
        case U_WRITE:
            break;
        }
    }
    report("power lost at op %ld (%s %s): writes pending %zu, kept %zu, "
           "torn %zu, dropped %zu; name changes pending %zu, undone %zu\n",
           S.ops, what, path ? path : "", kept + torn + dropped, kept, torn,
           dropped, nmeta, undone);
    fprintf(stderr, "powerloss: power lost at op %ld (%s)\n", S.ops, what);
    raise(SIGKILL);
    for (;;)
        pause();
}

/* Count one modelled operation; power goes before the chosen one.
 * Returns non-zero when the operation is to fail with EIO instead (errno
 * is set). Called with mu held. */
static int tick(fkind kind, const char *what, const char *path)
{
    S.ops++;
    long n = ++S.kind_ops[kind];
    if (S.at > 0 && S.ops == S.at)
        lose_power(what, path);
    if ((int)kind == S.fault_kind &&
        (n == S.fault_at || (S.fault_persist && n > S.fault_at))) {
        if (S.faults++ == 0)
            report("fault %s %ld (%s %s)\n", fkind_names[kind], n, what,
                   path ? path : "");
        errno = EIO;
        return 1;
    }
    return 0;
}

static void lock(void)
{
    pthread_mutex_lock(&mu);
    while (S.lost) { /* another thread is losing power: wait for it */
        pthread_mutex_unlock(&mu);
        pause();
    }
}

static void unlock(void) { pthread_mutex_unlock(&mu); }

/* ---- the wrappers -------------------------------------------------------- */

static void track_fd(int fd, const char *abs)
{
    if (fd < 0 || fd >= FD_MAX)
        return;
    struct stat st;
    if (fstat(fd, &st) != 0)
        return;
    free(S.fd_dir[fd]);
    S.fd_dir[fd] = NULL;
    if (S_ISDIR(st.st_mode)) {
        S.fd_file[fd] = -1;
        S.fd_dir[fd] = xstrdup(abs);
    } else if (S_ISREG(st.st_mode)) {
        S.fd_file[fd] = (long)file_index(st.st_dev, st.st_ino, abs) + 1;
    }
}

static int do_open(int dirfd, const char *path, int flags, mode_t mode)
{
    if (!S.ready)
        return dirfd == AT_FDCWD ? real_open(path, flags, mode)
                                 : real_openat(dirfd, path, flags, mode);
    char abs[PATH_MAX];
    absolute(dirfd, path, abs);
    if (!under_root(abs))
        return real_openat(dirfd, path, flags, mode);
    lock();
    int creating = 0;
    if (flags & O_CREAT) {
        struct stat st;
        creating = stat(abs, &st) != 0;
    }
    if ((flags & (O_CREAT | O_TRUNC)) || (flags & O_ACCMODE) != O_RDONLY) {
        if (tick(F_OPEN, creating ? "create" : "open", abs)) {
            unlock();
            return -1;
        }
    }
    if (!creating && (flags & O_TRUNC) && (flags & O_ACCMODE) != O_RDONLY) {
        /* O_TRUNC of an existing file: a write that empties it. */
        struct stat st;
        if (stat(abs, &st) == 0 && S_ISREG(st.st_mode) && st.st_size > 0) {
            int rfd = real_open(abs, O_RDONLY | O_CLOEXEC);
            if (rfd < 0)
                die("open %s: %s", abs, strerror(errno));
            unsigned char *old = xmalloc((size_t)st.st_size);
            if (pread(rfd, old, (size_t)st.st_size, 0) != st.st_size)
                die("pread %s", abs);
            real_close(rfd);
            undo *u = log_add(U_WRITE);
            u->file = file_index(st.st_dev, st.st_ino, abs);
            u->off = 0;
            u->len = 0;
            u->old_size = st.st_size;
            u->old = old;
            u->old_len = (size_t)st.st_size;
        }
    }
    int fd = real_openat(dirfd, path, flags, mode);
    if (fd >= 0) {
        track_fd(fd, abs);
        if (creating) {
            undo *u = log_add(U_CREATE);
            char dir[PATH_MAX];
            parent_of(abs, dir);
            u->dir = xstrdup(dir);
            u->path = xstrdup(abs);
        }
    }
    unlock();
    return fd;
}

int open(const char *path, int flags, ...)
{
    mode_t mode = 0;
    if (flags & (O_CREAT | O_TMPFILE)) {
        va_list ap;
        va_start(ap, flags);
        mode = va_arg(ap, mode_t);
        va_end(ap);
    }
    if (!real_open)
        resolve();
    return do_open(AT_FDCWD, path, flags, mode);
}

int open64(const char *path, int flags, ...)
    __attribute__((alias("open")));

int openat(int dirfd, const char *path, int flags, ...)
{
    mode_t mode = 0;
    if (flags & (O_CREAT | O_TMPFILE)) {
        va_list ap;
        va_start(ap, flags);
        mode = va_arg(ap, mode_t);
        va_end(ap);
    }
    if (!real_openat)
        resolve();
    return do_open(dirfd, path, flags, mode);
}

int openat64(int dirfd, const char *path, int flags, ...)
    __attribute__((alias("openat")));

static long ours(int fd)
{
    return S.ready && fd >= 0 && fd < FD_MAX ? S.fd_file[fd] : 0;
}

/* Record a write of n bytes at off (-1: the descriptor's position, or the
 * end under O_APPEND) before it happens. */
static undo *before_write(int fd, off_t off, size_t n)
{
    size_t fi = (size_t)S.fd_file[fd] - 1;
    if (tick(F_WRITE, "write", S.files[fi].path))
        return NULL;
    struct stat st;
    if (fstat(fd, &st) != 0)
        die("fstat: %s", strerror(errno));
    if (off < 0) {
        int fl = fcntl(fd, F_GETFL);
        off = (fl & O_APPEND) ? st.st_size : lseek(fd, 0, SEEK_CUR);
    }
    undo *u = log_add(U_WRITE);
    u->file = fi;
    u->off = off;
    u->len = n;
    u->old_size = st.st_size;
    if (off < st.st_size && n > 0) {
        size_t k = (size_t)(st.st_size - off) < n ? (size_t)(st.st_size - off)
                                                   : n;
        char link[64];
        snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
        int rfd = real_open(link, O_RDONLY | O_CLOEXEC);
        if (rfd < 0)
            die("reopen %s: %s", link, strerror(errno));
        u->old = xmalloc(k);
        if (pread(rfd, u->old, k, off) != (ssize_t)k)
            die("pread %s", S.files[fi].path);
        real_close(rfd);
        u->old_len = k;
    }
    return u;
}

ssize_t write(int fd, const void *buf, size_t n)
{
    if (!real_write)
        resolve();
    if (ours(fd) <= 0)
        return real_write(fd, buf, n);
    lock();
    undo *u = before_write(fd, -1, n);
    if (!u) {
        unlock();
        return -1;
    }
    size_t idx = (size_t)(u - S.log);
    ssize_t w = real_write(fd, buf, n);
    S.log[idx].len = w > 0 ? (size_t)w : 0;
    unlock();
    return w;
}

ssize_t pwrite(int fd, const void *buf, size_t n, off_t off)
{
    if (!real_pwrite)
        resolve();
    if (ours(fd) <= 0)
        return real_pwrite(fd, buf, n, off);
    lock();
    undo *u = before_write(fd, off, n);
    if (!u) {
        unlock();
        return -1;
    }
    size_t idx = (size_t)(u - S.log);
    ssize_t w = real_pwrite(fd, buf, n, off);
    S.log[idx].len = w > 0 ? (size_t)w : 0;
    unlock();
    return w;
}

ssize_t pwrite64(int fd, const void *buf, size_t n, off_t off)
    __attribute__((alias("pwrite")));

int ftruncate(int fd, off_t size)
{
    if (!real_ftruncate)
        resolve();
    if (ours(fd) <= 0)
        return real_ftruncate(fd, size);
    lock();
    struct stat st;
    if (fstat(fd, &st) != 0)
        die("fstat: %s", strerror(errno));
    size_t fi = (size_t)S.fd_file[fd] - 1;
    if (size < st.st_size) {
        /* the cut bytes come back if this is undone */
        undo *u = before_write(fd, size, (size_t)(st.st_size - size));
        if (!u) {
            unlock();
            return -1;
        }
        u->len = 0;
    } else {
        if (tick(F_WRITE, "ftruncate", S.files[fi].path)) {
            unlock();
            return -1;
        }
        undo *u = log_add(U_WRITE);
        u->file = fi;
        u->off = st.st_size;
        u->len = 0;
        u->old_size = st.st_size;
    }
    int rc = real_ftruncate(fd, size);
    unlock();
    return rc;
}

int ftruncate64(int fd, off_t size) __attribute__((alias("ftruncate")));

/* fd is durable: its data if a file, the names in it if a folder. */
static void made_durable(int fd)
{
    long f = S.fd_file[fd];
    if (f > 0) {
        for (size_t i = 0; i < S.nlog; i++)
            if (S.log[i].kind == U_WRITE && S.log[i].file == (size_t)f - 1)
                S.log[i].durable = 1;
    } else if (f < 0 && S.fd_dir[fd]) {
        for (size_t i = 0; i < S.nlog; i++)
            if (S.log[i].kind != U_WRITE && S.log[i].dir &&
                strcmp(S.log[i].dir, S.fd_dir[fd]) == 0)
                S.log[i].durable = 1;
    }
}

static int do_sync(int fd, int (*fn)(int), const char *what)
{
    if (!fn)
        resolve();
    if (!ours(fd))
        return fn(fd);
    lock();
    if (tick(F_FSYNC, what, S.fd_file[fd] > 0
                                ? S.files[S.fd_file[fd] - 1].path
                                : S.fd_dir[fd])) {
        unlock();
        return -1;
    }
    int rc = fn(fd);
    if (rc == 0)
        made_durable(fd);
    unlock();
    return rc;
}

int fsync(int fd) { return do_sync(fd, real_fsync, "fsync"); }

int fdatasync(int fd) { return do_sync(fd, real_fdatasync, "fdatasync"); }

int syncfs(int fd)
{
    if (!real_syncfs)
        resolve();
    if (!S.ready)
        return real_syncfs(fd);
    lock();
    if (tick(F_FSYNC, "syncfs", NULL)) {
        unlock();
        return -1;
    }
    int rc = real_syncfs(fd);
    if (rc == 0)
        for (size_t i = 0; i < S.nlog; i++)
            S.log[i].durable = 1;
    unlock();
    return rc;
}

static int do_rename(int ofd, const char *from, int nfd, const char *to)
{
    char a[PATH_MAX], b[PATH_MAX];
    absolute(ofd, from, a);
    absolute(nfd, to, b);
    if (!under_root(a) && !under_root(b))
        return real_renameat(ofd, from, nfd, to);
    if (under_root(a) != under_root(b))
        die("rename across the modelled roots: %s -> %s", a, b);
    lock();
    if (tick(F_RENAME, "rename", b)) {
        unlock();
        return -1;
    }
    struct stat st;
    char *shadow = NULL;
    if (stat(b, &st) == 0 && S_ISREG(st.st_mode))
        shadow = shadow_keep(b);
    int rc = real_renameat(ofd, from, nfd, to);
    if (rc == 0) {
        undo *u = log_add(U_RENAME);
        char dir[PATH_MAX];
        parent_of(b, dir);
        u->dir = xstrdup(dir);
        u->path = xstrdup(b);
        u->from = xstrdup(a);
        u->shadow = shadow;
        if (shadow)
            files_moved(b, shadow);
        files_moved(a, b);
    } else if (shadow) {
        unlink(shadow);
        free(shadow);
    }
    unlock();
    return rc;
}

int rename(const char *from, const char *to)
{
    if (!real_renameat)
        resolve();
    if (!S.ready)
        return real_rename(from, to);
    return do_rename(AT_FDCWD, from, AT_FDCWD, to);
}

int renameat(int ofd, const char *from, int nfd, const char *to)
{
    if (!real_renameat)
        resolve();
    if (!S.ready)
        return real_renameat(ofd, from, nfd, to);
    return do_rename(ofd, from, nfd, to);
}

int unlink(const char *path)
{
    if (!real_unlink)
        resolve();
    char abs[PATH_MAX];
    if (!S.ready || (absolute(AT_FDCWD, path, abs), !under_root(abs)))
        return real_unlink(path);
    lock();
    if (tick(F_UNLINK, "unlink", abs)) {
        unlock();
        return -1;
    }
    struct stat st;
    char *shadow = NULL;
    if (lstat(abs, &st) == 0 && S_ISREG(st.st_mode))
        shadow = shadow_keep(abs);
    int rc = real_unlink(path);
    if (rc == 0 && shadow) {
        undo *u = log_add(U_UNLINK);
        char dir[PATH_MAX];
        parent_of(abs, dir);
        u->dir = xstrdup(dir);
        u->path = xstrdup(abs);
        u->shadow = shadow;
        files_moved(abs, shadow);
    } else if (shadow) {
        real_unlink(shadow);
        free(shadow);
    }
    unlock();
    return rc;
}

int mkdir(const char *path, mode_t mode)
{
    if (!real_mkdir)
        resolve();
    char abs[PATH_MAX];
    if (!S.ready || (absolute(AT_FDCWD, path, abs), !under_root(abs)))
        return real_mkdir(path, mode);
    lock();
    if (tick(F_MKDIR, "mkdir", abs)) {
        unlock();
        return -1;
    }
    int rc = real_mkdir(path, mode);
    if (rc == 0) {
        undo *u = log_add(U_MKDIR);
        char dir[PATH_MAX];
        parent_of(abs, dir);
        u->dir = xstrdup(dir);
        u->path = xstrdup(abs);
    }
    unlock();
    return rc;
}

int close(int fd)
{
    if (!real_close)
        resolve();
    if (S.ready && fd >= 0 && fd < FD_MAX && S.fd_file[fd]) {
        lock();
        S.fd_file[fd] = 0;
        free(S.fd_dir[fd]);
        S.fd_dir[fd] = NULL;
        unlock();
    }
    return real_close(fd);
}
