/* skippr-testkit: loads a sink plugin and runs the conformance battery that
 * the engine's exactly-once protocol relies on.
 *
 *   skippr-testkit PLUGIN.so [-o KEY=VALUE]... [--read CMD]
 *                  [--big-mib N] [--instances N] [--stage-pieces N]
 *                  [--no-store] [-v]
 *
 * The testkit plays the engine: it allocates instance contexts, fills the
 * options table from -o (or the defaults), and drives object_open / write /
 * commit / abort / check exactly as the engine does, including a process
 * that dies mid-object; and, for a sink that keeps the engine's state
 * (SKIPPR_SINK_STORE), the conditional writes its lease relies on. What a sink stored is observed two ways:
 * - object_check(), when the sink has it;
 * - --read CMD, a shell command that prints the bytes stored under the key
 *   in $SKIPPR_KEY (e.g. `tar -xOf out.tar "$SKIPPR_KEY"`). Without it the
 *   byte-level checks are skipped, and the report says so.
 *
 * Each check prints "ok N - what" or "not ok N - what: why" on stderr (the
 * plugin may own stdout); the exit status is 0 when every check passed, 1
 * when one failed and 2 when the plugin could not be loaded or run.
 */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <skippr/plugin.h>

#include "base/crc32c.h"
#include "plugin/optstore.h"

#define LINE 100              /* every generated record is this long */
#define MAX_OPTS 128
#define MEMORY_BUDGET (16 << 20) /* host->memory_budget given to the sink */
#define MAX_RETRIES 8 /* as many tries as the engine gives a write */

/* ------------------------------------------------------------------------ */
/* Command line                                                              */
/* ------------------------------------------------------------------------ */

typedef struct kv {
    char *key, *value;
} kv;

static struct {
    const char *plugin_path;
    kv opts[MAX_OPTS];
    size_t nopts;
    const char *read_cmd;
    int64_t big_mib;
    int instances;
    int stage_pieces;
    int no_store;
    int verbose;
} g = {.big_mib = 256, .instances = 4, .stage_pieces = 3};

static const skippr_plugin *plugin;
static const skippr_sink_ops *sink;
static int checks, failures;
static atomic_long retries;

static void usage(void)
{
    fprintf(stderr,
            "usage: skippr-testkit PLUGIN.so [-o KEY=VALUE]... [--read CMD]\n"
            "                      [--big-mib N] [--instances N]\n"
            "                      [--stage-pieces N] [--no-store] [-v]\n"
            "  -o KEY=VALUE   a sink option, as under the sink in YAML\n"
            "  --read CMD     shell command printing the bytes stored under\n"
            "                 the key in $SKIPPR_KEY (byte-level checks)\n"
            "  --big-mib N    size of the large-object check (256)\n"
            "  --instances N  instances writing at once (4)\n"
            "  --stage-pieces N  staging pieces of one object put, read\n"
            "                 back and cleared (3; more than a listing page\n"
            "                 checks that stage_clear pages)\n"
            "  --no-store     skip the state store check (its calls retry\n"
            "                 inside the sink: not with max_attempts=1)\n"
            "  -v             show the plugin's log and --read's errors\n");
    exit(2);
}

/* ------------------------------------------------------------------------ */
/* Reporting                                                                 */
/* ------------------------------------------------------------------------ */

/* The failure of the check being run: its first message wins. Worker
 * threads of the instances check may fail at once, hence the lock. */
static char why[1024];
static pthread_mutex_t why_lock = PTHREAD_MUTEX_INITIALIZER;

static void fail(const char *fmt, ...) SKIPPR_PRINTF(1, 2);
static void fail(const char *fmt, ...)
{
    pthread_mutex_lock(&why_lock);
    if (!why[0]) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(why, sizeof why, fmt, ap);
        va_end(ap);
    }
    pthread_mutex_unlock(&why_lock);
}

static void report(const char *what)
{
    checks++;
    if (why[0]) {
        failures++;
        fprintf(stderr, "not ok %d - %s: %s\n", checks, what, why);
    } else {
        fprintf(stderr, "ok %d - %s\n", checks, what);
    }
    why[0] = '\0';
}

static void skip(const char *what, const char *reason)
{
    checks++;
    fprintf(stderr, "ok %d - %s # SKIP %s\n", checks, what, reason);
}

/* ------------------------------------------------------------------------ */
/* Instances: what the engine does around init() and destroy()               */
/* ------------------------------------------------------------------------ */

typedef struct instance {
    skippr_host host;
    void *ctx;
    atomic_int errors_logged;
    /* Strings and kv arrays written into ctx; the testkit's. */
    void *owned[MAX_OPTS];
    size_t nowned;
} instance;

static void host_log(const skippr_host *h, int level, const char *fmt, ...)
{
    instance *in = h->impl;
    if (level == SKIPPR_LOG_ERROR)
        atomic_fetch_add(&in->errors_logged, 1);
    if (!g.verbose)
        return;
    char line[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    static const char *const names[] = {"error", "warn", "info", "debug"};
    fprintf(stderr, "    %s: %s: %s\n", plugin->name,
            level >= 0 && level <= 3 ? names[level] : "?", line);
}

static void host_counter_add(const skippr_host *h, const char *name,
                             int64_t delta)
{
    (void)h;
    (void)name;
    (void)delta;
}

static int host_should_stop(const skippr_host *h)
{
    (void)h;
    return 0;
}

static const char *opt_value(const char *name)
{
    for (size_t i = g.nopts; i-- > 0;)
        if (strcmp(g.opts[i].key, name) == 0)
            return g.opts[i].value;
    return NULL;
}

static int keep(instance *in, void *p)
{
    if (!p || in->nowned == MAX_OPTS) {
        free(p);
        return -1;
    }
    in->owned[in->nowned++] = p;
    return 0;
}

static int keep_string(void *ud, const char *v, const char **slot)
{
    char *c = strdup(v);
    if (keep(ud, c))
        return SKIPPR_NOMEM;
    *slot = c;
    return SKIPPR_OK;
}

/* Fill ctx from -o values and defaults, each value stored by the engine's
 * own code (runtime/plugin/optstore.c); override, when not NULL, replaces
 * the value of one option. Returns 0, or -1 with *err. */
static int fill_options(instance *in, const char *override_name,
                        const char *override_value, char *err, size_t errlen)
{
    for (const skippr_option *o = sink->options; o && o->name; o++) {
        char *field = (char *)in->ctx + o->offset;
        if (o->type == SKIPPR_OPT_PREFIX) {
            size_t n = 0, plen = strlen(o->name);
            for (size_t i = 0; i < g.nopts; i++)
                n += strncmp(g.opts[i].key, o->name, plen) == 0;
            skippr_kv *arr = calloc(n + 1, sizeof *arr);
            if (keep(in, arr)) {
                snprintf(err, errlen, "out of memory");
                return -1;
            }
            n = 0;
            for (size_t i = 0; i < g.nopts; i++)
                if (strncmp(g.opts[i].key, o->name, plen) == 0)
                    arr[n++] = (skippr_kv){g.opts[i].key + plen,
                                           g.opts[i].value};
            memcpy(field, &arr, sizeof arr);
            continue;
        }
        const char *v = override_name && strcmp(o->name, override_name) == 0
                            ? override_value
                            : opt_value(o->name);
        if (!v)
            v = o->default_value;
        if (!v) {
            if (o->required & SKIPPR_OPT_REQUIRED) {
                snprintf(err, errlen, "option '%s' is required: pass "
                         "-o %s=VALUE", o->name, o->name);
                return -1;
            }
            continue;
        }
        char why[256];
        int rc = sk_option_store(o, in->ctx, v, keep_string, in, why,
                                 sizeof why);
        if (rc) {
            snprintf(err, errlen, "%s", rc == SKIPPR_NOMEM ? "out of memory"
                                                           : why);
            return -1;
        }
    }
    return 0;
}

static void instance_free(instance *in)
{
    if (!in)
        return;
    if (in->ctx && sink->destroy)
        sink->destroy(in->ctx);
    free(in->ctx);
    for (size_t i = 0; i < in->nowned; i++)
        free(in->owned[i]);
    free(in);
}

/* A new instance, init() called; *rc is init's status. NULL (with why set)
 * when the testkit itself could not build it. Caller owns: instance_free. */
static instance *instance_new(const char *override_name,
                              const char *override_value, int *rc)
{
    instance *made = NULL, *in = calloc(1, sizeof *in);
    char err[256];
    if (!in) {
        fail("out of memory");
        goto out;
    }
    if (!(in->ctx = calloc(1, sink->ctx_size ? sink->ctx_size : 1))) {
        fail("out of memory for a %zu-byte context", sink->ctx_size);
        goto out;
    }
    if (fill_options(in, override_name, override_value, err, sizeof err)) {
        fail("%s", err);
        goto out;
    }
    in->host = (skippr_host){
        .struct_size = sizeof(skippr_host),
        .log = host_log,
        .counter_add = host_counter_add,
        .should_stop = host_should_stop,
        .impl = in,
        .memory_budget = MEMORY_BUDGET,
        .flags = 0, /* commit() itself must make objects durable */
        .crc32c = sk_crc32c,
    };
    *rc = sink->init(in->ctx, &in->host);
    made = in;
    in = NULL; /* handed to the caller, who destroys it */
out:
    if (in) {
        /* init() never ran: free the context, not destroy() it */
        free(in->ctx);
        in->ctx = NULL;
        instance_free(in);
    }
    return made;
}

/* A new instance with the given options, ready to write: NULL, with the
 * check's failure set, when it could not be made or init() refused. */
static instance *instance_up(void)
{
    int rc;
    instance *in = instance_new(NULL, NULL, &rc);
    if (in && rc != SKIPPR_OK) {
        fail("init() with the given options returned %s",
             skippr_status_name(rc));
        instance_free(in);
        in = NULL;
    }
    return in;
}

/* ------------------------------------------------------------------------ */
/* Objects: deterministic bytes, computable at any offset                    */
/* ------------------------------------------------------------------------ */

typedef struct object {
    char key[256];
    char slice_id[64];
    char partition[192];
    uint64_t lines;
    uint32_t seed;
    uint64_t size;
    uint32_t crc;
} object;

/* Line i of an object: exactly LINE bytes, the last a newline. */
static void gen_line(const object *o, uint64_t i, char out[LINE])
{
    int n = snprintf(out, LINE, "{\"object\":\"%08" PRIx32 "\",\"line\":%"
                     PRIu64 ",\"pad\":\"", o->seed, i);
    memset(out + n, 'a' + (int)((o->seed + i) % 26), LINE - 3 - (size_t)n);
    out[LINE - 3] = '"';
    out[LINE - 2] = '}';
    out[LINE - 1] = '\n';
}

/* Bytes [off, off + len) of the object. */
static void gen_bytes(const object *o, uint64_t off, char *buf, size_t len)
{
    char line[LINE];
    while (len > 0) {
        uint64_t i = off / LINE, in = off % LINE;
        gen_line(o, i, line);
        size_t n = LINE - in < len ? LINE - in : len;
        memcpy(buf, line + in, n);
        buf += n;
        off += n;
        len -= n;
    }
}

static void object_make(object *o, const char *scenario, int n,
                        uint64_t lines)
{
    memset(o, 0, sizeof *o);
    o->seed = (uint32_t)(n * 2654435761u) ^ (uint32_t)strlen(scenario);
    snprintf(o->partition, sizeof o->partition,
             "testkit/p_scenario=%s/p_n=%d", scenario, n);
    snprintf(o->key, sizeof o->key, "%s/apply-testkit-%010d.jsonl",
             o->partition, n);
    snprintf(o->slice_id, sizeof o->slice_id, "testkit-%08" PRIx32, o->seed);
    o->lines = lines;
    o->size = lines * LINE;
    char buf[1 << 16];
    uint32_t crc = 0;
    for (uint64_t off = 0; off < o->size; off += sizeof buf) {
        size_t len = o->size - off < sizeof buf ? (size_t)(o->size - off)
                                                : sizeof buf;
        gen_bytes(o, off, buf, len);
        crc = sk_crc32c(crc, buf, len);
    }
    o->crc = crc;
}

static skippr_object_info object_info(const object *o)
{
    return (skippr_object_info){
        .key = o->key,
        .slice_id = o->slice_id,
        .size = o->size,
        .crc32c = o->crc,
        .content_type = "application/x-ndjson",
        .partition = o->partition,
        .namespace_name = "testkit",
        .records = o->lines,
    };
}

static int known_status(int rc)
{
    return rc <= 0 && strcmp(skippr_status_name(rc), "UNKNOWN") != 0;
}

/* Write bytes [0, upto) of o on an open handle: in chunks of varying size,
 * or one record per call for a SKIPPR_SINK_RECORDS sink. */
static int write_range(instance *in, void *h, const object *o, uint64_t upto)
{
    int records = SKIPPR_OPS_HAS(skippr_sink_ops, sink, flags) &&
                  (sink->flags & SKIPPR_SINK_RECORDS);
    static const size_t sizes[] = {1, 7, 100, 4096, 65536, 1 << 20};
    char *buf = malloc(1 << 20);
    if (!buf)
        return SKIPPR_NOMEM;
    int rc = SKIPPR_OK;
    uint64_t off = 0;
    for (size_t k = 0; off < upto && rc == SKIPPR_OK; k++) {
        size_t len = records ? LINE : sizes[k % 6];
        if (len > upto - off)
            len = (size_t)(upto - off);
        gen_bytes(o, off, buf, len);
        size_t wlen = records && buf[len - 1] == '\n' ? len - 1 : len;
        rc = sink->object_write(in->ctx, h, buf, wlen);
        off += len;
    }
    free(buf);
    return rc;
}

/* Before the attempt-th try of a call that said RETRY: count it, and back
 * off a little longer each time, as the engine does. */
static void retry_pause(int attempt)
{
    atomic_fetch_add(&retries, 1);
    nanosleep(&(struct timespec){0, 10000000L * attempt}, NULL);
}

/* Write the whole object and commit it, as the engine does: on RETRY,
 * abort and start again (a few times). Returns the last status. */
static int put_object(instance *in, const object *o)
{
    skippr_object_info info = object_info(o);
    int rc = SKIPPR_RETRY;
    for (int attempt = 0; attempt < MAX_RETRIES && rc == SKIPPR_RETRY;
         attempt++) {
        if (attempt)
            retry_pause(attempt);
        void *h = NULL;
        rc = sink->object_open(in->ctx, &info, &h);
        if (rc != SKIPPR_OK)
            continue;
        rc = write_range(in, h, o, o->size);
        if (rc == SKIPPR_OK)
            rc = sink->object_commit(in->ctx, h);
        else
            sink->object_abort(in->ctx, h);
    }
    if (!known_status(rc))
        fail("'%s' returned %d, which is not a skippr status", o->key, rc);
    return rc;
}

/* ------------------------------------------------------------------------ */
/* Observing what the sink stored                                            */
/* ------------------------------------------------------------------------ */

typedef enum seen { SEEN_EXACT, SEEN_NONE, SEEN_OTHER, SEEN_ERROR } seen;

/* Run --read for o's key and compare its output with o's bytes, streaming.
 * desc gets a description of a difference. */
static seen read_back(const object *o, char *desc, size_t desclen)
{
    int fd[2];
    if (pipe(fd)) {
        snprintf(desc, desclen, "pipe: %s", strerror(errno));
        return SEEN_ERROR;
    }
    pid_t pid = fork();
    if (pid < 0) {
        snprintf(desc, desclen, "fork: %s", strerror(errno));
        close(fd[0]);
        close(fd[1]);
        return SEEN_ERROR;
    }
    if (pid == 0) {
        dup2(fd[1], 1);
        close(fd[0]);
        close(fd[1]);
        if (!g.verbose) { /* "not found" is an expected answer */
            int null = open("/dev/null", O_WRONLY);
            if (null >= 0)
                dup2(null, 2);
        }
        setenv("SKIPPR_KEY", o->key, 1);
        execl("/bin/sh", "sh", "-c", g.read_cmd, (char *)NULL);
        _exit(127);
    }
    close(fd[1]);
    char got[1 << 16], want[1 << 16];
    uint64_t off = 0, first_diff = UINT64_MAX;
    ssize_t n;
    while ((n = read(fd[0], got, sizeof got)) > 0 ||
           (n < 0 && errno == EINTR)) {
        if (n < 0)
            continue;
        if (first_diff == UINT64_MAX && off < o->size) {
            size_t len = (uint64_t)n < o->size - off ? (size_t)n
                                                     : (size_t)(o->size - off);
            gen_bytes(o, off, want, len);
            for (size_t i = 0; i < len; i++)
                if (got[i] != want[i]) {
                    first_diff = off + i;
                    break;
                }
        }
        off += (uint64_t)n;
    }
    close(fd[0]);
    int status;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    int exit_ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;
    if (off == 0 && (!exit_ok || o->size > 0)) {
        snprintf(desc, desclen, "nothing stored under the key");
        return SEEN_NONE;
    }
    if (off == o->size && first_diff == UINT64_MAX && exit_ok)
        return SEEN_EXACT;
    if (off == 2 * o->size && first_diff == UINT64_MAX)
        snprintf(desc, desclen, "%" PRIu64 " bytes stored under the key, "
                 "twice the object: it is there twice", off);
    else if (first_diff != UINT64_MAX)
        snprintf(desc, desclen, "%" PRIu64 " bytes stored, expected %" PRIu64
                 "; they differ from byte %" PRIu64 "%s", off, o->size,
                 first_diff, off > o->size
                     ? " (more than the object: a write added to what an "
                       "earlier attempt left, instead of replacing it)"
                     : "");
    else
        snprintf(desc, desclen, "%" PRIu64 " bytes stored, expected %" PRIu64
                 "%s", off, o->size, exit_ok ? "" : " (the command failed)");
    return SEEN_OTHER;
}

/* object_check, asked again (as the engine does) while it says RETRY. */
static int check_object(instance *in, const skippr_object_info *info)
{
    int rc = SKIPPR_RETRY;
    for (int attempt = 0; attempt < MAX_RETRIES && rc == SKIPPR_RETRY;
         attempt++) {
        if (attempt)
            retry_pause(attempt);
        rc = sink->object_check(in->ctx, info);
    }
    return rc;
}

/* o must be stored exactly once, as far as the sink lets us see. */
static void expect_stored(instance *in, const object *o, const char *after)
{
    if (sink->object_check) {
        skippr_object_info info = object_info(o);
        int rc = check_object(in, &info);
        if (rc != SKIPPR_OK)
            fail("after %s, object_check('%s') returned %s, expected OK",
                 after, o->key, skippr_status_name(rc));
    }
    if (g.read_cmd) {
        char desc[256];
        if (read_back(o, desc, sizeof desc) != SEEN_EXACT)
            fail("after %s, '%s': %s", after, o->key, desc);
    }
}

static void expect_absent(instance *in, const object *o, const char *after)
{
    if (sink->object_check) {
        skippr_object_info info = object_info(o);
        int rc = check_object(in, &info);
        if (rc != SKIPPR_NOENT)
            fail("after %s, object_check('%s') returned %s, expected NOENT",
                 after, o->key, skippr_status_name(rc));
    }
    if (g.read_cmd) {
        char desc[256];
        seen s = read_back(o, desc, sizeof desc);
        if (s != SEEN_NONE)
            fail("after %s, '%s' should not be stored, but %s", after,
                 o->key, s == SEEN_EXACT ? "it is, whole" : desc);
    }
}

/* ------------------------------------------------------------------------ */
/* The checks                                                                */
/* ------------------------------------------------------------------------ */

static void check_descriptor(void)
{
    if (!sink->init || !sink->object_open || !sink->object_write ||
        !sink->object_commit || !sink->object_abort)
        fail("init, object_open, object_write, object_commit and "
             "object_abort are all required");
    if (sink->struct_size < offsetof(skippr_sink_ops, sync))
        fail("sink ops are %u bytes, smaller than ABI %u's",
             sink->struct_size, SKIPPR_ABI_VERSION);
    for (const skippr_option *o = sink->options; o && o->name; o++) {
        size_t size = o->type == SKIPPR_OPT_INT    ? sizeof(int64_t)
                      : o->type == SKIPPR_OPT_BOOL ? sizeof(int)
                                                   : sizeof(void *);
        if (o->type < SKIPPR_OPT_STRING || o->type > SKIPPR_OPT_PREFIX)
            fail("option '%s' has unknown type %d", o->name, (int)o->type);
        else if (o->offset + size > sink->ctx_size)
            fail("option '%s' is written at offset %zu, past the %zu-byte "
                 "context (ctx_size)", o->name, o->offset, sink->ctx_size);
        if (!o->doc || !*o->doc)
            fail("option '%s' has no doc sentence for the reference",
                 o->name);
        if ((o->required & SKIPPR_OPT_REQUIRED) && o->default_value)
            fail("option '%s' is required but has a default", o->name);
        if (o->type == SKIPPR_OPT_PREFIX &&
            o->name[strlen(o->name) - 1] != '.')
            fail("prefix option '%s' must end in '.'", o->name);
        for (const skippr_option *p = sink->options; p != o; p++)
            if (strcmp(p->name, o->name) == 0)
                fail("option '%s' is declared twice", o->name);
    }
    report("descriptor and options table");
}

static int check_options(void)
{
    int rc;
    instance *in = instance_new(NULL, NULL, &rc);
    if (in && rc != SKIPPR_OK)
        fail("init() with the given options returned %s",
             skippr_status_name(rc));
    instance_free(in);
    int usable = !why[0];
    /* A required text option left empty: init() may take it, but if it
     * refuses, it must say why (a clear error for the operator) and
     * destroy() must cope with the half-made instance. */
    for (const skippr_option *o = sink->options; o && o->name && usable;
         o++) {
        if (!(o->required & SKIPPR_OPT_REQUIRED) || o->type != SKIPPR_OPT_STRING)
            continue;
        in = instance_new(o->name, "", &rc);
        if (!in)
            break;
        if (!known_status(rc))
            fail("init() with an empty '%s' returned %d, not a skippr "
                 "status", o->name, rc);
        else if (rc != SKIPPR_OK && atomic_load(&in->errors_logged) == 0)
            fail("init() refused an empty '%s' (%s) without logging why",
                 o->name, skippr_status_name(rc));
        instance_free(in);
    }
    report("options: init with the given options; refusals are logged");
    return usable;
}

static void check_write_commit(void)
{
    instance *in = instance_up();
    if (!in)
        goto out;
    object o;
    object_make(&o, "write", 1, 1000);
    int rc = put_object(in, &o);
    if (rc != SKIPPR_OK) {
        fail("writing '%s' (%" PRIu64 " bytes) returned %s", o.key, o.size,
             skippr_status_name(rc));
        goto out;
    }
    expect_stored(in, &o, "a commit");
    if (sink->object_check && !why[0]) {
        skippr_object_info info = object_info(&o);
        info.crc32c ^= 1;
        rc = check_object(in, &info);
        if (rc != SKIPPR_CHANGED)
            fail("object_check with another CRC for the same key returned "
                 "%s, expected CHANGED", skippr_status_name(rc));
        object other;
        object_make(&other, "write", 2, 10);
        expect_absent(in, &other, "nothing was written to it");
    }
out:
    instance_free(in);
    report("open, write and commit an object");
}

/* In a child process: open o, write half of it, and die. */
static void crash_mid_object(const object *o)
{
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) {
        fail("fork: %s", strerror(errno));
        return;
    }
    if (pid == 0) {
        int rc;
        instance *in = instance_new(NULL, NULL, &rc);
        if (!in || rc)
            _exit(3);
        skippr_object_info info = object_info(o);
        void *h;
        if (sink->object_open(in->ctx, &info, &h))
            _exit(4);
        write_range(in, h, o, o->size / 2 / LINE * LINE + LINE / 2);
        _exit(0); /* no commit, no abort, no destroy: a crash */
    }
    int status;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
        fail("the process that was to crash mid-object failed first (%s "
             "%d: 3 is init(), 4 object_open())",
             WIFEXITED(status) ? "exit" : "signal",
             WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status));
}

static void check_rewrite(void)
{
    object o;
    object_make(&o, "rewrite", 1, 2000);
    crash_mid_object(&o);
    instance *in = why[0] ? NULL : instance_up();
    if (!in)
        goto out;
    int rc;
    if ((rc = put_object(in, &o)) != SKIPPR_OK)
        fail("writing '%s' again after a crash mid-object returned %s",
             o.key, skippr_status_name(rc));
    else
        expect_stored(in, &o, "a crash mid-object and a whole write");
    instance_free(in);
    in = NULL;
    if (why[0])
        goto out;
    /* The engine died after commit() but before it recorded the object:
     * the next run writes the same slice again, with a new instance. */
    if (!(in = instance_up()))
        goto out;
    if ((rc = put_object(in, &o)) != SKIPPR_OK)
        fail("committing '%s' a second time returned %s (must be OK: the "
             "same slice id means the same bytes)", o.key,
             skippr_status_name(rc));
    else
        expect_stored(in, &o, "the same slice committed twice");
out:
    instance_free(in);
    report("re-write the same slice after a crash (idempotent)");
}

static void check_abort_and_retry(void)
{
    instance *in = instance_up();
    object o;
    object_make(&o, "abort", 1, 500);
    int rc;
    if (in) {
        skippr_object_info info = object_info(&o);
        void *h;
        if ((rc = sink->object_open(in->ctx, &info, &h)) != SKIPPR_OK) {
            fail("object_open returned %s", skippr_status_name(rc));
        } else {
            if ((rc = write_range(in, h, &o, o.size / 2)) != SKIPPR_OK)
                fail("object_write returned %s", skippr_status_name(rc));
            sink->object_abort(in->ctx, h);
            if (!why[0])
                expect_absent(in, &o, "object_abort");
        }
    }
    report("abort a partly written object");
    /* After a RETRY the engine aborts the handle and writes the object
     * again from the start: the first attempt must leave no trace. */
    if (!in)
        fail("no instance to write with (see the check above)");
    else if ((rc = put_object(in, &o)) != SKIPPR_OK)
        fail("writing '%s' again after an abort returned %s", o.key,
             skippr_status_name(rc));
    else
        expect_stored(in, &o, "an abort and a whole write");
    report("retry: a whole write after an aborted one");
    instance_free(in);
}

static double vm_hwm_mib(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    double v = -1;
    while (f && fgets(line, sizeof line, f))
        if (strncmp(line, "VmHWM:", 6) == 0)
            v = strtod(line + 6, NULL) / 1024.0;
    if (f)
        fclose(f);
    return v;
}

static void check_big(void)
{
    instance *in = instance_up();
    if (!in)
        goto out;
    object o;
    object_make(&o, "big", 1, (uint64_t)g.big_mib * (1 << 20) / LINE);
    /* Reset the high-water mark, so it measures this object alone. */
    FILE *f = fopen("/proc/self/clear_refs", "w");
    if (f) {
        fputs("5", f);
        fclose(f);
    }
    double before = vm_hwm_mib();
    int rc = put_object(in, &o);
    if (rc != SKIPPR_OK) {
        fail("writing a %" PRId64 " MiB object returned %s", g.big_mib,
             skippr_status_name(rc));
        goto out;
    }
    double grew = vm_hwm_mib() - before;
    double bound = 2.0 * MEMORY_BUDGET / (1 << 20) + 8;
#if defined(__SANITIZE_ADDRESS__)
    /* AddressSanitizer keeps freed blocks in quarantine, so a sink that
     * frees its part buffers still looks as if it held them: the figure is
     * shown, the bound is not applied. */
    bound = 1e12;
    fprintf(stderr, "    (AddressSanitizer build: memory bound not "
            "applied)\n");
#endif
    if (before >= 0 && grew > bound)
        fail("memory grew by %.1f MiB while a %" PRId64 " MiB object was "
             "written (bound %.0f MiB, twice host->memory_budget + 8): a "
             "sink must stream objects, not hold them", grew, g.big_mib,
             bound);
    else
        fprintf(stderr, "    %" PRId64 " MiB object: memory grew by %.1f "
                "MiB\n", g.big_mib, grew);
    if (!why[0])
        expect_stored(in, &o, "a large object");
out:
    instance_free(in);
    report("a large object in bounded memory");
}

typedef struct worker {
    pthread_t t;
    int n;
    int rc;
    char why[512];
} worker;

#define OBJECTS_PER_INSTANCE 8

static void *worker_main(void *arg)
{
    worker *w = arg;
    int rc;
    instance *in = instance_new(NULL, NULL, &rc);
    w->rc = in ? rc : SKIPPR_NOMEM;
    for (int k = 0; k < OBJECTS_PER_INSTANCE && w->rc == SKIPPR_OK; k++) {
        object o;
        object_make(&o, "instances", w->n * 100 + k, 300 + 37 * k);
        w->rc = put_object(in, &o);
        if (w->rc)
            snprintf(w->why, sizeof w->why, "instance %d writing '%s' "
                     "returned %s", w->n, o.key, skippr_status_name(w->rc));
    }
    instance_free(in);
    return NULL;
}

/* Append bytes [from, to) of o to a growing object, in uneven chunks. */
static int grow_range(instance *in, void *h, const object *o, uint64_t from,
                      uint64_t to)
{
    char buf[7001];
    while (from < to) {
        size_t n = to - from < sizeof buf ? (size_t)(to - from) : sizeof buf;
        gen_bytes(o, from, buf, n);
        int rc = sink->grow_write(in->ctx, h, buf, n);
        if (rc != SKIPPR_OK)
            return rc;
        from += n;
    }
    return SKIPPR_OK;
}

/* Write bytes [from, to) of o to a growing object by parts: one write per
 * pb bytes (the last may be shorter), each followed by its note, appended
 * to notes (NULL: not asked, as for a sealed slice's last part). */
static int grow_parts(instance *in, void *h, const object *o, uint64_t pb,
                      uint64_t from, uint64_t to, char *notes, size_t cap,
                      size_t *nl)
{
    char *buf = malloc((size_t)pb);
    if (!buf)
        return SKIPPR_NOMEM;
    int rc = SKIPPR_OK;
    while (from < to && rc == SKIPPR_OK) {
        size_t n = to - from < pb ? (size_t)(to - from) : (size_t)pb;
        gen_bytes(o, from, buf, n);
        /* A part is written again in place after RETRY. */
        rc = SKIPPR_RETRY;
        for (int attempt = 0; attempt < MAX_RETRIES && rc == SKIPPR_RETRY;
             attempt++) {
            if (attempt)
                retry_pause(attempt);
            rc = sink->grow_write(in->ctx, h, buf, n);
        }
        from += n;
        size_t k = 0;
        if (rc == SKIPPR_OK && notes &&
            (rc = sink->grow_note(in->ctx, h, notes + *nl, cap - *nl, &k)) ==
                SKIPPR_OK) {
            if (k > cap - *nl)
                rc = SKIPPR_RANGE;
            else
                *nl += k;
        }
    }
    free(buf);
    return rc;
}

/* Piece k of the staging check: its offset, tag and bytes (a few
 * hundred, different for every piece). */
static size_t piece_make(const object *o, int k, uint64_t *off,
                         uint64_t *tag, char *buf)
{
    *off = (uint64_t)k * 1000;
    *tag = 0x5eed0000u + (uint64_t)k;
    size_t n = 100 + (size_t)(k % 7) * 50;
    gen_bytes(o, *off, buf, n);
    return n;
}

/* Retries a staging call that returned RETRY, as the engine does. */
#define STAGE_TRY(rc, call)                                                 \
    do {                                                                   \
        (rc) = SKIPPR_RETRY;                                               \
        for (int a_ = 0; a_ < MAX_RETRIES && (rc) == SKIPPR_RETRY; a_++) {  \
            if (a_)                                                        \
                retry_pause(a_);                                           \
            (rc) = (call);                                                 \
        }                                                                  \
    } while (0)

/* SKIPPR_SINK_STAGES: g.stage_pieces pieces of one object are put, the
 * first one twice under different tags (two pieces, not one replaced),
 * all read back byte-equal, then cleared; a piece read after the clear is
 * NOENT, and a second clear (nothing left) is OK. */
/* Every piece of o put (and piece 0 again, other bytes under tag + 1),
 * then read back as put. */
static void stages_put_get(instance *in, object *o,
                           const skippr_object_info *info)
{
    char want[512], got[512], other[512];
    uint64_t off, tag;
    int rc = SKIPPR_OK;
    for (int k = 0; k < g.stage_pieces && rc == SKIPPR_OK; k++) {
        size_t n = piece_make(o, k, &off, &tag, want);
        STAGE_TRY(rc, sink->stage_put(in->ctx, info, off, tag, want, n));
    }
    size_t n0 = piece_make(o, 0, &off, &tag, want);
    memset(other, 'z', n0);
    if (rc == SKIPPR_OK)
        STAGE_TRY(rc, sink->stage_put(in->ctx, info, off, tag + 1, other,
                                      n0));
    if (rc != SKIPPR_OK) {
        fail("stage_put returned %s", skippr_status_name(rc));
        return;
    }
    for (int k = 0; k < g.stage_pieces; k++) {
        size_t n = piece_make(o, k, &off, &tag, want);
        STAGE_TRY(rc, sink->stage_get(in->ctx, info, off, tag, got, n));
        if (rc != SKIPPR_OK || memcmp(got, want, n) != 0) {
            fail("stage_get of piece %d (offset %" PRIu64 ") returned %s%s",
                 k, off, skippr_status_name(rc),
                 rc == SKIPPR_OK ? " and other bytes than were put" : "");
            return;
        }
    }
    piece_make(o, 0, &off, &tag, want);
    STAGE_TRY(rc, sink->stage_get(in->ctx, info, off, tag + 1, got, n0));
    if (rc != SKIPPR_OK || memcmp(got, other, n0) != 0)
        fail("a second piece at the same offset with another tag did not "
             "read back as put (%s)", skippr_status_name(rc));
}

/* stage_clear removes o's pieces (a read says NOENT), and again is OK. */
static void stages_clear(instance *in, object *o,
                         const skippr_object_info *info)
{
    char want[512], got[512];
    uint64_t off, tag;
    int rc;
    STAGE_TRY(rc, sink->stage_clear(in->ctx, info));
    if (rc != SKIPPR_OK) {
        fail("stage_clear returned %s", skippr_status_name(rc));
        return;
    }
    for (int k = 0; k < g.stage_pieces; k += g.stage_pieces / 8 + 1) {
        size_t n = piece_make(o, k, &off, &tag, want);
        STAGE_TRY(rc, sink->stage_get(in->ctx, info, off, tag, got, n));
        if (rc != SKIPPR_NOENT) {
            fail("piece %d read after stage_clear returned %s, not NOENT",
                 k, skippr_status_name(rc));
            return;
        }
    }
    size_t n = piece_make(o, g.stage_pieces - 1, &off, &tag, want);
    STAGE_TRY(rc, sink->stage_get(in->ctx, info, off, tag, got, n));
    if (rc != SKIPPR_NOENT) {
        fail("the last piece read after stage_clear returned %s, not NOENT",
             skippr_status_name(rc));
        return;
    }
    STAGE_TRY(rc, sink->stage_clear(in->ctx, info));
    if (rc != SKIPPR_OK)
        fail("stage_clear with nothing left returned %s",
             skippr_status_name(rc));
}

static void check_stages(void)
{
    int stages = SKIPPR_OPS_HAS(skippr_sink_ops, sink, flags) &&
                 (sink->flags & SKIPPR_SINK_STAGES);
    if (!stages) {
        skip("staging pieces", "the sink does not declare "
             "SKIPPR_SINK_STAGES");
        return;
    }
    if (!SKIPPR_OPS_HAS(skippr_sink_ops, sink, stage_clear) ||
        !sink->stage_put || !sink->stage_get || !sink->stage_clear ||
        !(sink->flags & SKIPPR_SINK_PARTS)) {
        fail("SKIPPR_SINK_STAGES needs SKIPPR_SINK_PARTS, stage_put, "
             "stage_get and stage_clear");
        report("staging pieces");
        return;
    }
    instance *in = instance_up();
    if (in) {
        object o;
        object_make(&o, "stages", 1, 100);
        skippr_object_info info = object_info(&o);
        stages_put_get(in, &o, &info);
        stages_clear(in, &o, &info); /* whatever was put */
    }
    instance_free(in);
    report("staging pieces: put, read back, cleared");
}

/* fn(in, arg), tried as the engine finishes an object: after a RETRY,
 * object_check first (a Complete whose answer was lost may have landed),
 * else fn again from the start, up to MAX_RETRIES tries. */
static int finish_retried(instance *in, const skippr_object_info *oinfo,
                          int (*fn)(instance *in, void *arg), void *arg)
{
    int rc = SKIPPR_RETRY;
    for (int attempt = 0; attempt < MAX_RETRIES && rc == SKIPPR_RETRY;
         attempt++) {
        if (attempt) {
            retry_pause(attempt);
            if (sink->object_check &&
                sink->object_check(in->ctx, oinfo) == SKIPPR_OK)
                return SKIPPR_OK;
        }
        rc = fn(in, arg);
    }
    return rc;
}

typedef struct copy_try {
    const object *o;
    const skippr_object_info *info, *oinfo;
    uint64_t tag;
    size_t n;
} copy_try;

/* One try at o: started anew, its staged piece (tag, its first n bytes)
 * copied into its first part, the rest written, finished. */
static int copy_once(instance *in, void *arg)
{
    const copy_try *t = arg;
    const object *o = t->o;
    const skippr_object_info *info = t->info, *oinfo = t->oinfo;
    uint64_t tag = t->tag;
    size_t n = t->n;
    void *h = NULL;
    int rc = sink->grow_open(in->ctx, info, 0, NULL, 0, &h);
    if (rc)
        return rc;
    rc = sink->stage_copy(in->ctx, h, info, 0, tag, n);
    if (!rc)
        rc = grow_parts(in, h, o, n, n, o->size, NULL, 0, NULL);
    if (rc) {
        sink->grow_close(in->ctx, h);
        return rc;
    }
    return sink->grow_commit(in->ctx, h, oinfo);
}

/* stage_copy (optional, with SKIPPR_SINK_STAGES): an object whose first
 * SKIPPR_COPY_MIN_BYTES are a staging piece that the sink makes its
 * first part, then a short last part written; it must be stored whole,
 * and the piece cleared. */
static void check_stage_copy(void)
{
    if (!SKIPPR_OPS_HAS(skippr_sink_ops, sink, stage_copy) ||
        !sink->stage_copy || !(sink->flags & SKIPPR_SINK_STAGES)) {
        skip("copying staged pieces", "the sink has no stage_copy");
        return;
    }
    instance *in = instance_up();
    if (!in)
        goto out;
    object o;
    object_make(&o, "copies", 1, SKIPPR_COPY_MIN_BYTES / LINE + 40);
    skippr_object_info oinfo = object_info(&o), info = oinfo;
    info.size = 0;
    info.crc32c = 0;
    size_t n = (size_t)SKIPPR_COPY_MIN_BYTES;
    uint64_t tag = 0xc0b1;
    char *buf = malloc(n);
    int rc = buf ? SKIPPR_OK : SKIPPR_NOMEM;
    if (!rc) {
        gen_bytes(&o, 0, buf, n);
        STAGE_TRY(rc, sink->stage_put(in->ctx, &info, 0, tag, buf, n));
    }
    free(buf);
    if (rc) {
        fail("stage_put returned %s", skippr_status_name(rc));
        goto out;
    }
    rc = finish_retried(in, &oinfo, copy_once,
                        &(copy_try){&o, &info, &oinfo, tag, n});
    if (rc)
        fail("a part copied from a staged piece, then the last one "
             "written: %s", skippr_status_name(rc));
    else
        expect_stored(in, &o, "a part copied from a staged piece");
    STAGE_TRY(rc, sink->stage_clear(in->ctx, &info));
    if (rc)
        fail("stage_clear returned %s", skippr_status_name(rc));
out:
    instance_free(in);
    report("copying staged pieces: a piece made a part, stored whole");
}

typedef struct reopen_try {
    const object *o;
    const skippr_object_info *info, *oinfo;
    uint64_t pb;
    const char *notes;
    size_t kept;
    int reopen_rc; /* grow_open's failure, told apart from the rest's */
} reopen_try;

/* One try at finishing t->o after a "crash": reopened from its first
 * part's note, its second part and the rest written, committed. */
static int reopen_once(instance *in, void *arg)
{
    reopen_try *t = arg;
    void *h = NULL;
    int rc = sink->grow_open(in->ctx, t->info, t->pb, t->notes, t->kept, &h);
    if (rc != SKIPPR_OK) {
        t->reopen_rc = rc;
        return rc == SKIPPR_RETRY ? SKIPPR_FATAL : rc; /* no more tries */
    }
    rc = grow_parts(in, h, t->o, t->pb, t->pb, t->o->size, NULL, 0, NULL);
    if (rc == SKIPPR_OK)
        return sink->grow_commit(in->ctx, h, t->oinfo);
    sink->grow_close(in->ctx, h);
    return rc;
}

/* SKIPPR_SINK_PARTS: an object grown by parts, each noted. After a
 * "crash" that recorded only the first part's note, it is reopened from
 * that note, its second part is written again (replacing the first try's)
 * and it is finished; a discarded one leaves nothing. */
/* A growing object d of one part started, then discarded twice (the
 * second finds nothing): both OK, and d is gone. */
static void parts_discard(instance *in, object *d, uint64_t pb, char *notes,
                          size_t cap)
{
    skippr_object_info dinfo = object_info(d);
    dinfo.size = 0;
    dinfo.crc32c = 0;
    size_t nl = 0;
    void *h = NULL;
    int rc = sink->grow_open(in->ctx, &dinfo, 0, NULL, 0, &h);
    if (rc == SKIPPR_OK) {
        rc = grow_parts(in, h, d, pb, 0, pb, notes, cap, &nl);
        sink->grow_close(in->ctx, h);
    }
    for (int k = 0; k < 2 && rc == SKIPPR_OK; k++) {
        rc = SKIPPR_RETRY;
        for (int attempt = 0; attempt < MAX_RETRIES && rc == SKIPPR_RETRY;
             attempt++) {
            if (attempt)
                retry_pause(attempt);
            rc = sink->grow_discard(in->ctx, &dinfo);
        }
    }
    if (rc != SKIPPR_OK)
        fail("starting and discarding a growing object (twice) returned "
             "%s", skippr_status_name(rc));
    expect_absent(in, d, "grow_discard");
}

/* Object o grown by two parts, the commit recording the first only; then
 * reopened from that part's note and finished: exactly o is stored. 0
 * when it went as it should. */
static int parts_reopen(instance *in, object *o, uint64_t pb, char *notes,
                        size_t cap)
{
    skippr_object_info oinfo = object_info(o), info = oinfo;
    info.size = 0;
    info.crc32c = 0;
    size_t nl = 0, kept = 0;
    void *h = NULL;
    int rc = sink->grow_open(in->ctx, &info, 0, NULL, 0, &h);
    if (rc == SKIPPR_OK) {
        rc = grow_parts(in, h, o, pb, 0, pb, notes, cap, &nl);
        kept = nl; /* the commit recorded part 1 only */
        if (rc == SKIPPR_OK)
            rc = grow_parts(in, h, o, pb, pb, 2 * pb, notes, cap, &nl);
        sink->grow_close(in->ctx, h);
    }
    if (rc != SKIPPR_OK) {
        fail("growing an object by parts returned %s",
             skippr_status_name(rc));
        return -1;
    }
    reopen_try t = {o, &info, &oinfo, pb, notes, kept, SKIPPR_OK};
    rc = finish_retried(in, &oinfo, reopen_once, &t);
    if (t.reopen_rc != SKIPPR_OK) {
        fail("reopening it from its first part's note returned %s",
             skippr_status_name(t.reopen_rc));
        return -1;
    }
    if (rc != SKIPPR_OK) {
        fail("finishing it returned %s", skippr_status_name(rc));
        return -1;
    }
    expect_stored(in, o, "growing it by parts across a reopen");
    return 0;
}

static void check_grow_parts(void)
{
    if (!SKIPPR_OPS_HAS(skippr_sink_ops, sink, grow_note) ||
        !sink->grow_part_bytes || !sink->grow_note) {
        fail("SKIPPR_SINK_PARTS needs grow_part_bytes and grow_note");
        report("growing objects by parts");
        return;
    }
    instance *in = instance_up();
    uint64_t pb = in ? sink->grow_part_bytes(in->ctx) : 0;
    int sized = pb > 0 && pb <= (64u << 20);
    if (in && !sized)
        fail("grow_part_bytes returned %" PRIu64 " (1 byte to 64 MiB "
             "expected here)", pb);
    size_t cap = 1 << 16;
    char *notes = sized ? malloc(cap) : NULL;
    if (sized && !notes)
        fail("out of memory for the notes");
    if (notes) {
        object o, d;
        object_make(&o, "parts", 1, (2 * pb + pb / 3) / LINE + 1);
        object_make(&d, "parts-discard", 2, pb / LINE + 1);
        if (parts_reopen(in, &o, pb, notes, cap) == 0)
            parts_discard(in, &d, pb, notes, cap);
    }
    free(notes);
    instance_free(in);
    report("growing objects by parts: noted, reopened from notes, "
           "finished, discarded");
}

/* SKIPPR_SINK_GROWS: an object grown across "commits" and a crash. It is
 * started, grown, let go, reopened at a shorter length (what a commit
 * recorded; the rest must be cut off), grown to the end and finished; a
 * reopen past what it holds is NOENT; a discarded one leaves nothing. */
/* A growing object started, cut back by a reopen at fewer bytes (what a
 * crash leaves past the last commit), grown to its end and committed:
 * exactly its bytes are stored. 0 when it went as it should. */
static int grow_reopen_cut(instance *in, object *o)
{
    skippr_object_info oinfo = object_info(o); /* finished */
    skippr_object_info info = oinfo;
    info.size = 0;
    info.crc32c = 0;
    void *h = NULL;
    /* What a crashed run wrote past its last commit: here, bytes that
     * are not the object's and reach past its end, so a reopen that does
     * not cut them off leaves them in it. */
    uint64_t kept = o->size / 5;
    int rc = sink->grow_open(in->ctx, &info, 0, NULL, 0, &h);
    if (rc == SKIPPR_OK)
        rc = grow_range(in, h, o, 0, kept);
    static const char junk[4096] = "not the object's bytes";
    for (uint64_t n = kept; rc == SKIPPR_OK && n < o->size + 8192;
         n += sizeof junk)
        rc = sink->grow_write(in->ctx, h, junk, sizeof junk);
    if (rc == SKIPPR_OK)
        sink->grow_close(in->ctx, h);
    if (rc != SKIPPR_OK) {
        fail("starting a growing object returned %s",
             skippr_status_name(rc));
        return -1;
    }
    /* A crash after `kept` bytes were recorded: the rest is cut off. */
    if ((rc = sink->grow_open(in->ctx, &info, kept, NULL, 0, &h))) {
        fail("reopening it at %" PRIu64 " bytes returned %s", kept,
             skippr_status_name(rc));
        return -1;
    }
    rc = grow_range(in, h, o, kept, o->size);
    if (rc == SKIPPR_OK && sink->sync)
        rc = sink->sync(in->ctx);
    if (rc != SKIPPR_OK) {
        sink->grow_close(in->ctx, h);
        fail("growing it returned %s", skippr_status_name(rc));
        return -1;
    }
    if ((rc = sink->grow_commit(in->ctx, h, &oinfo)) != SKIPPR_OK) {
        fail("grow_commit returned %s", skippr_status_name(rc));
        return -1;
    }
    if (sink->sync && (rc = sink->sync(in->ctx)) != SKIPPR_OK) {
        fail("sync after grow_commit returned %s", skippr_status_name(rc));
        return -1;
    }
    expect_stored(in, o, "growing it across a reopen");
    return 0;
}

/* Reopening past what a growing object holds says NOENT, not invent;
 * grow_discard removes it, and again is OK. */
static void grow_past_and_discard(instance *in, object *d)
{
    skippr_object_info dinfo = object_info(d);
    dinfo.size = 0;
    dinfo.crc32c = 0;
    void *h = NULL;
    int rc = sink->grow_open(in->ctx, &dinfo, 0, NULL, 0, &h);
    if (rc != SKIPPR_OK) {
        fail("starting a second growing object returned %s",
             skippr_status_name(rc));
        return;
    }
    rc = grow_range(in, h, d, 0, d->size / 2);
    sink->grow_close(in->ctx, h);
    if (rc == SKIPPR_OK) {
        rc = sink->grow_open(in->ctx, &dinfo, d->size, NULL, 0, &h);
        if (rc == SKIPPR_OK) {
            sink->grow_close(in->ctx, h);
            fail("reopening a growing object at more bytes than it holds "
                 "returned OK, expected NOENT");
        } else if (rc != SKIPPR_NOENT)
            fail("reopening a growing object at more bytes than it holds "
                 "returned %s, expected NOENT", skippr_status_name(rc));
    }
    if ((rc = sink->grow_discard(in->ctx, &dinfo)) != SKIPPR_OK)
        fail("grow_discard returned %s", skippr_status_name(rc));
    else if ((rc = sink->grow_discard(in->ctx, &dinfo)) != SKIPPR_OK)
        fail("grow_discard of an object already gone returned %s, "
             "expected OK", skippr_status_name(rc));
    expect_absent(in, d, "grow_discard");
}

static void check_grow(void)
{
    int grows = SKIPPR_OPS_HAS(skippr_sink_ops, sink, flags) &&
                (sink->flags & SKIPPR_SINK_GROWS);
    if (!grows) {
        skip("growing objects", "the sink does not declare "
             "SKIPPR_SINK_GROWS");
        return;
    }
    if (!SKIPPR_OPS_HAS(skippr_sink_ops, sink, grow_discard) ||
        !sink->grow_open || !sink->grow_write || !sink->grow_commit ||
        !sink->grow_close || !sink->grow_discard) {
        fail("SKIPPR_SINK_GROWS needs grow_open, grow_write, grow_commit, "
             "grow_close and grow_discard");
        report("growing objects");
        return;
    }
    if (sink->flags & SKIPPR_SINK_PARTS) {
        check_grow_parts();
        return;
    }
    instance *in = instance_up();
    if (in) {
        object o, d;
        object_make(&o, "grow", 1, 3000);
        object_make(&d, "grow-discard", 2, 10);
        if (grow_reopen_cut(in, &o) == 0)
            grow_past_and_discard(in, &d);
    }
    instance_free(in);
    report("growing objects: start, reopen cut back, finish, discard");
}

static void check_instances(void)
{
    worker *ws = calloc((size_t)g.instances, sizeof *ws);
    if (!ws) {
        fail("out of memory");
        report("several instances at once");
        return;
    }
    int started = 0;
    for (int i = 0; i < g.instances; i++) {
        ws[i].n = i;
        if (pthread_create(&ws[i].t, NULL, worker_main, &ws[i]))
            break;
        started++;
    }
    for (int i = 0; i < started; i++)
        pthread_join(ws[i].t, NULL);
    for (int i = 0; i < started; i++)
        if (ws[i].rc)
            fail("%s", ws[i].why[0] ? ws[i].why : "init() failed");
    instance *in = why[0] ? NULL : instance_up();
    for (int i = 0; in && i < started && !why[0]; i++)
        for (int k = 0; k < OBJECTS_PER_INSTANCE; k++) {
            object o;
            object_make(&o, "instances", i * 100 + k, 300 + 37 * k);
            expect_stored(in, &o, "instances wrote at once");
        }
    instance_free(in);
    free(ws);
    char what[96];
    snprintf(what, sizeof what, "%d instances writing %d objects each at "
             "once", g.instances, OBJECTS_PER_INSTANCE);
    report(what);
}

/* ------------------------------------------------------------------------ */
/* The state store (SKIPPR_SINK_STORE)                                        */
/* ------------------------------------------------------------------------ */

typedef struct listed {
    char keys[4][160];
    size_t n;
} listed;

static int list_one(void *ud, const skippr_unit *u)
{
    listed *l = ud;
    if (l->n < 4)
        snprintf(l->keys[l->n], sizeof l->keys[0], "%s", u->id);
    l->n++;
    return 0;
}

/* store_put_file, when the sink has it: a file's bytes stored under key
 * and read back. 0, or -1 after fail(). */
static int check_store_file(void *x, const char *key)
{
    static const char bytes[] = "bytes of a file, read a part at a time";
    size_t len = sizeof bytes - 1, n = 0;
    uint64_t size = 0;
    char got[64];
    FILE *f = tmpfile();
    if (!f || fwrite(bytes, 1, len, f) != len || fflush(f) != 0) {
        fail("store_put_file: cannot make a temporary file");
        if (f)
            fclose(f);
        return -1;
    }
    int rc = sink->store_put_file(x, key, fileno(f), len, NULL, 0);
    fclose(f);
    if (!rc)
        rc = sink->store_get(x, key, 0, got, sizeof got, &n, &size, NULL, 0);
    if (rc || n != len || size != len || memcmp(got, bytes, len) != 0) {
        fail("store_put_file, then store_get: %s, %zu of %" PRIu64 " bytes",
             skippr_status_name(rc), n, size);
        return -1;
    }
    return 0;
}

/* What the engine's lease and fencing rely on (runtime/state/remote.c):
 * "*" creates only, an ETag condition holds only for the current one, a
 * condition that does not hold is CHANGED, reads are ranged, a listing is
 * in key order, a removal is idempotent. */
/* Conditional writes of key ka: "*" creates it only, an ETag replaces
 * only that version. e2 (128 bytes) gets the last write's ETag. 0 when
 * they behave. */
static int store_conditional(void *x, const char *ka, char *e2)
{
    char e1[128] = "";
    int rc;
    if ((rc = sink->store_put(x, ka, "first bytes", 11, "*", e1,
                              sizeof e1)))
        fail("store_put of a new key with \"*\" returned %s",
             skippr_status_name(rc));
    else if ((rc = sink->store_put(x, ka, "other", 5, "*", NULL, 0)) !=
             SKIPPR_CHANGED)
        fail("store_put of an existing key with \"*\" returned %s, not "
             "CHANGED", skippr_status_name(rc));
    else if ((rc = sink->store_put(x, ka, "other", 5, "no-such-etag", NULL,
                                   0)) != SKIPPR_CHANGED)
        fail("store_put with another ETag as condition returned %s, not "
             "CHANGED", skippr_status_name(rc));
    else if ((rc = sink->store_put(x, ka, "second bytes", 12, e1, e2, 128)))
        fail("store_put with the key's ETag as condition returned %s",
             skippr_status_name(rc));
    else if (strcmp(e1, e2) != 0 &&
             (rc = sink->store_put(x, ka, "x", 1, e1, NULL, 0)) !=
                 SKIPPR_CHANGED)
        fail("store_put with the ETag before the last write returned %s, "
             "not CHANGED", skippr_status_name(rc));
    else
        return 0;
    return -1;
}

/* Reads of ka ("second bytes", ETag e2): whole, with its ETag, and a
 * range. 0 when they behave. */
static int store_reads(void *x, const char *ka, const char *e2)
{
    char got[64], et[128];
    size_t n = 0;
    uint64_t size = 0;
    int rc;
    if ((rc = sink->store_get(x, ka, 0, got, sizeof got, &n, &size, et,
                              sizeof et)) ||
        n != 12 || size != 12 || memcmp(got, "second bytes", 12) ||
        (*e2 && strcmp(et, e2) != 0))
        fail("store_get after the conditional write: %s, %zu of %" PRIu64
             " bytes%s", skippr_status_name(rc), n, size,
             !rc && *e2 && strcmp(et, e2) ? ", another ETag" : "");
    else if ((rc = sink->store_get(x, ka, 7, got, 3, &n, &size, NULL, 0)) ||
             n != 3 || size != 12 || memcmp(got, "byt", 3) != 0)
        fail("store_get of 3 bytes at 7 returned %s, %zu bytes",
             skippr_status_name(rc), n);
    else
        return 0;
    return -1;
}

/* An unconditional write of kb, and the listing of pfx: ka then kb. 0
 * when they behave. */
static int store_listing(void *x, const char *pfx, const char *ka,
                         const char *kb)
{
    listed l = {0};
    int rc;
    if ((rc = sink->store_put(x, kb, "b", 1, NULL, NULL, 0)) ||
        (rc = sink->store_list(x, pfx, list_one, &l)) || l.n != 2 ||
        strcmp(l.keys[0], ka) != 0 || strcmp(l.keys[1], kb) != 0) {
        fail("an unconditional store_put and store_list of the prefix: %s, "
             "%zu keys listed (want %s then %s)", skippr_status_name(rc),
             l.n, ka, kb);
        return -1;
    }
    return 0;
}

/* store_delete of ka, then store_get says NOENT, and store_delete again
 * is OK. */
static void store_removal(void *x, const char *ka)
{
    char got[1];
    size_t n = 0;
    uint64_t size = 0;
    int rc;
    if ((rc = sink->store_delete(x, ka)) ||
        (rc = sink->store_get(x, ka, 0, got, 1, &n, &size, NULL, 0)) !=
            SKIPPR_NOENT ||
        (rc = sink->store_delete(x, ka)))
        fail("store_delete, then store_get (want NOENT), then store_delete "
             "again: %s", skippr_status_name(rc));
}

static void check_store(void)
{
    if (!SKIPPR_OPS_HAS(skippr_sink_ops, sink, flags) ||
        !(sink->flags & SKIPPR_SINK_STORE)) {
        skip("state store", "the sink does not declare SKIPPR_SINK_STORE");
        return;
    }
    if (g.no_store) {
        skip("state store", "--no-store");
        return;
    }
    if (!SKIPPR_OPS_HAS(skippr_sink_ops, sink, store_list) ||
        !sink->store_get || !sink->store_put || !sink->store_delete ||
        !sink->store_list) {
        fail("SKIPPR_SINK_STORE needs store_get, store_put, store_delete "
             "and store_list");
        report("state store");
        return;
    }
    instance *in = instance_up();
    if (!in) {
        report("state store");
        return;
    }
    char pfx[64], ka[96], kb[96], e2[128] = "";
    snprintf(pfx, sizeof pfx, "testkit-store-%ld-%ld/", (long)getpid(),
             (long)time(NULL));
    snprintf(ka, sizeof ka, "%sa", pfx);
    snprintf(kb, sizeof kb, "%sb", pfx);
    void *x = in->ctx;
    int by_file = SKIPPR_OPS_HAS(skippr_sink_ops, sink, store_put_file) &&
                  sink->store_put_file;
    if (store_conditional(x, ka, e2) == 0 && store_reads(x, ka, e2) == 0 &&
        store_listing(x, pfx, ka, kb) == 0 &&
        (!by_file || check_store_file(x, kb) == 0))
        store_removal(x, ka);
    sink->store_delete(x, ka);
    sink->store_delete(x, kb);
    instance_free(in);
    report(by_file ? "state store: conditional writes, ranged reads, "
                     "listing, removal, a file sent by store_put_file"
                   : "state store: conditional writes, ranged reads, "
                     "listing, removal");
}

/* ------------------------------------------------------------------------ */

static void parse_args(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-o") && i + 1 < argc) {
            char *eq = strchr(argv[++i], '=');
            if (!eq || eq == argv[i] || g.nopts == MAX_OPTS)
                usage();
            g.opts[g.nopts].key = strndup(argv[i], (size_t)(eq - argv[i]));
            g.opts[g.nopts].value = strdup(eq + 1);
            if (!g.opts[g.nopts].key || !g.opts[g.nopts].value) {
                fprintf(stderr, "skippr-testkit: out of memory\n");
                exit(2);
            }
            g.nopts++;
        } else if (!strcmp(a, "--read") && i + 1 < argc) {
            g.read_cmd = argv[++i];
        } else if (!strcmp(a, "--big-mib") && i + 1 < argc) {
            g.big_mib = strtoll(argv[++i], NULL, 10);
            if (g.big_mib < 1 || g.big_mib > 65536)
                usage();
        } else if (!strcmp(a, "--instances") && i + 1 < argc) {
            g.instances = atoi(argv[++i]);
            if (g.instances < 1 || g.instances > 64)
                usage();
        } else if (!strcmp(a, "--stage-pieces") && i + 1 < argc) {
            g.stage_pieces = atoi(argv[++i]);
            if (g.stage_pieces < 2 || g.stage_pieces > 100000)
                usage();
        } else if (!strcmp(a, "--no-store")) {
            g.no_store = 1;
        } else if (!strcmp(a, "-v")) {
            g.verbose = 1;
        } else if (a[0] != '-' && !g.plugin_path) {
            g.plugin_path = a;
        } else {
            usage();
        }
    }
    if (!g.plugin_path)
        usage();
}

int main(int argc, char **argv)
{
    parse_args(argc, argv);
    void *dl = dlopen(g.plugin_path, RTLD_NOW | RTLD_LOCAL);
    if (!dl) {
        fprintf(stderr, "skippr-testkit: cannot load %s: %s\n",
                g.plugin_path, dlerror());
        return 2;
    }
    skippr_plugin_entry_fn entry;
    void *sym = dlsym(dl, SKIPPR_PLUGIN_ENTRY_SYMBOL);
    memcpy(&entry, &sym, sizeof entry);
    if (!sym || !(plugin = entry())) {
        fprintf(stderr, "skippr-testkit: %s exports no %s (use "
                "SKIPPR_PLUGIN_DEFINE)\n", g.plugin_path,
                SKIPPR_PLUGIN_ENTRY_SYMBOL);
        return 2;
    }
    if (plugin->abi_version != SKIPPR_ABI_VERSION ||
        plugin->struct_size < offsetof(skippr_plugin, urls)) {
        fprintf(stderr, "skippr-testkit: %s is built for ABI %u (this "
                "testkit: %u); rebuild it against this SDK\n",
                g.plugin_path, plugin->abi_version, SKIPPR_ABI_VERSION);
        return 2;
    }
    if (!plugin->sink) {
        fprintf(stderr, "skippr-testkit: %s (%s) is not a sink\n",
                g.plugin_path, plugin->name ? plugin->name : "?");
        return 2;
    }
    sink = plugin->sink;
    fprintf(stderr, "# skippr-testkit: %s (%s %s), ABI %u%s\n",
            g.plugin_path, plugin->name, plugin->version ? plugin->version : "",
            plugin->abi_version,
            g.read_cmd ? "" : "; no --read: stored bytes are not compared");
    check_descriptor();
    if (why[0] || !check_options()) {
        fprintf(stderr, "# the plugin cannot be set up; later checks "
                "skipped\n");
    } else {
        check_write_commit();
        check_rewrite();
        check_abort_and_retry();
        check_big();
        check_grow();
        check_stages();
        check_stage_copy();
        check_instances();
        check_store();
        if (!g.read_cmd && !sink->object_check)
            skip("stored bytes", "neither --read nor object_check: what "
                 "the sink stored was never looked at");
    }
    fprintf(stderr, "# %d checks, %d failed; %ld calls retried after "
            "RETRY\n", checks, failures, atomic_load(&retries));
    for (size_t i = 0; i < g.nopts; i++) {
        free(g.opts[i].key);
        free(g.opts[i].value);
    }
    /* dl stays loaded: the plugin's static data may be in use by atexit
     * handlers of its libraries. */
    return failures ? 1 : 0;
}
