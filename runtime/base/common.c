#include "base/common.h"

#ifdef __GLIBC__
#include <malloc.h>
#endif
#include <jansson.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base/fault.h"

int sk_log_level = SKIPPR_LOG_INFO;
int sk_log_progress_active;
int sk_log_json;
static pthread_mutex_t log_mu = PTHREAD_MUTEX_INITIALIZER;

void *sk_malloc(size_t n)
{
    if (sk_fault_hit(SK_FAULT_ALLOC))
        return NULL;
    return malloc(n ? n : 1);
}

void *sk_calloc(size_t count, size_t size)
{
    if (sk_fault_hit(SK_FAULT_ALLOC))
        return NULL;
    return calloc(count ? count : 1, size ? size : 1);
}

void *sk_realloc(void *p, size_t n)
{
    if (sk_fault_hit(SK_FAULT_ALLOC))
        return NULL;
    return realloc(p, n ? n : 1);
}

void sk_free(void *p) { free(p); }

void *sk_malloc_aligned(size_t align, size_t n)
{
    void *p = NULL;
    if (sk_fault_hit(SK_FAULT_ALLOC) || posix_memalign(&p, align, n ? n : 1))
        return NULL;
    return p;
}

char *sk_strndup(const char *s, size_t n)
{
    char *d = sk_malloc(n + 1);
    if (!d)
        return NULL;
    memcpy(d, s, n);
    d[n] = '\0';
    return d;
}

char *sk_strdup(const char *s) { return sk_strndup(s, strlen(s)); }

char *sk_asprintf(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0)
        return NULL;
    char *s = sk_malloc((size_t)n + 1);
    if (!s)
        return NULL;
    va_start(ap, fmt);
    vsnprintf(s, (size_t)n + 1, fmt, ap);
    va_end(ap);
    return s;
}

static const char *level_name(int level)
{
    switch (level) {
    case SKIPPR_LOG_ERROR:
        return "error";
    case SKIPPR_LOG_WARN:
        return "warning";
    case SKIPPR_LOG_INFO:
        return "info";
    default:
        return "debug";
    }
}

/* One log line as a JSON object (jansson escapes the text; a line that
 * is not valid UTF-8 has its bytes replaced rather than dropped). */
/* figures[0..n) as fields of o. */
static void add_figures(json_t *o, const sk_figure *f, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        double v = f[i].value;
        int whole = v == (double)(int64_t)v && v > -9e15 && v < 9e15;
        json_object_set_new(o, f[i].name, whole ? json_integer((int64_t)v)
                                                : json_real(v));
    }
}

static void log_json(int level, const char *prefix, const char *line,
                     const sk_figure *figures, size_t nfigures)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    struct tm tm;
    gmtime_r(&ts.tv_sec, &tm);
    char when[48];
    size_t wl = strftime(when, sizeof when - 6, "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(when + wl, sizeof when - wl, ".%03dZ",
             (int)(ts.tv_nsec / 1000000) % 1000);
    json_t *o = json_object();
    json_t *msg = json_string(line);
    if (!msg) { /* not UTF-8: keep the bytes as Latin-1 code points */
        char esc[2048 * 2];
        size_t k = 0;
        for (const unsigned char *p = (const unsigned char *)line;
             *p && k + 2 < sizeof esc; p++) {
            if (*p < 0x80) {
                esc[k++] = (char)*p;
            } else {
                esc[k++] = (char)(0xC0 | (*p >> 6));
                esc[k++] = (char)(0x80 | (*p & 0x3F));
            }
        }
        esc[k] = '\0';
        msg = json_string(esc);
    }
    char *text = NULL;
    if (o && msg && json_object_set_new(o, "time", json_string(when)) == 0 &&
        json_object_set_new(o, "level", json_string(level_name(level))) ==
            0 &&
        (!prefix ||
         json_object_set_new(o, "source", json_string(prefix)) == 0) &&
        json_object_set_new(o, "msg", msg) == 0) {
        msg = NULL; /* o owns it */
        add_figures(o, figures, nfigures);
        text = json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER);
    }
    json_decref(msg);
    json_decref(o);
    pthread_mutex_lock(&log_mu);
    if (text)
        fprintf(stderr, "%s\n", text);
    else
        fprintf(stderr, "{\"level\":\"error\",\"msg\":\"a log line could "
                        "not be encoded\"}\n");
    pthread_mutex_unlock(&log_mu);
    free(text);
}

/* One log line, with figures (json only). */
static void vlog_figures(int level, const char *prefix, const sk_figure *f,
                         size_t nf, const char *fmt, va_list ap)
{
    if (level > sk_log_level)
        return;
    char line[2048];
    int n = vsnprintf(line, sizeof line, fmt, ap);
    if (n < 0)
        return;
    if (sk_log_json) {
        log_json(level, prefix, line, f, nf);
        return;
    }
    pthread_mutex_lock(&log_mu);
    /* A progress line may be on the terminal; start on a clean line. */
    if (sk_log_progress_active)
        fputs("\r\033[K", stderr);
    fprintf(stderr, "skipprd: %s: %s%s%s\n", level_name(level),
            prefix ? prefix : "", prefix ? ": " : "", line);
    pthread_mutex_unlock(&log_mu);
}

void sk_vlog(int level, const char *prefix, const char *fmt, va_list ap)
{
    vlog_figures(level, prefix, NULL, 0, fmt, ap);
}

void sk_log_figures(int level, const sk_figure *f, size_t n,
                    const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vlog_figures(level, NULL, f, n, fmt, ap);
    va_end(ap);
}

void sk_log(int level, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    sk_vlog(level, NULL, fmt, ap);
    va_end(ap);
}

int sk_array_grow(void *arrp, size_t len, size_t *cap, size_t elem,
                  size_t first)
{
    if (len < *cap)
        return SKIPPR_OK;
    size_t nc = *cap ? *cap * 2 : first;
    if (nc > SIZE_MAX / elem)
        return SKIPPR_NOMEM;
    void **arr = arrp;
    void *n = sk_realloc(*arr, nc * elem);
    if (!n)
        return SKIPPR_NOMEM;
    *arr = n;
    *cap = nc;
    return SKIPPR_OK;
}

void sk_buf_init(sk_buf *b, size_t max)
{
    b->data = NULL;
    b->len = 0;
    b->cap = 0;
    b->max = max;
}

int sk_buf_reserve(sk_buf *b, size_t extra)
{
    if (extra > b->max || b->len > b->max - extra)
        return SKIPPR_RANGE;
    size_t need = b->len + extra;
    if (need <= b->cap)
        return SKIPPR_OK;
    size_t ncap = b->cap ? b->cap : 256;
    while (ncap < need)
        ncap = ncap > SIZE_MAX / 2 ? need : ncap * 2;
    if (ncap > b->max)
        ncap = b->max;
    uint8_t *p = sk_realloc(b->data, ncap);
    if (!p)
        return SKIPPR_NOMEM;
    b->data = p;
    b->cap = ncap;
    return SKIPPR_OK;
}

int sk_buf_reserve_exact(sk_buf *b, size_t cap)
{
    if (cap > b->max)
        return SKIPPR_RANGE;
    if (cap <= b->cap)
        return SKIPPR_OK;
    uint8_t *p = sk_realloc(b->data, cap);
    if (!p)
        return SKIPPR_NOMEM;
    b->data = p;
    b->cap = cap;
    return SKIPPR_OK;
}

int sk_buf_append(sk_buf *b, const void *p, size_t n)
{
    int rc = sk_buf_reserve(b, n);
    if (rc)
        return rc;
    if (n)
        memcpy(b->data + b->len, p, n);
    b->len += n;
    return SKIPPR_OK;
}

int sk_buf_putc(sk_buf *b, uint8_t c) { return sk_buf_append(b, &c, 1); }

int sk_buf_printf(sk_buf *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0)
        return SKIPPR_INVAL;
    int rc = sk_buf_reserve(b, (size_t)n + 1);
    if (rc)
        return rc;
    va_start(ap, fmt);
    vsnprintf((char *)b->data + b->len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    b->len += (size_t)n;
    return SKIPPR_OK;
}

void sk_buf_free(sk_buf *b)
{
    sk_free(b->data);
    b->data = NULL;
    b->len = b->cap = 0;
}

uint64_t sk_hash64(const void *p, size_t n)
{
    const uint8_t *s = p;
    uint64_t h = 1469598103934665603ULL;
    for (size_t i = 0; i < n; i++) {
        h ^= s[i];
        h *= 1099511628211ULL;
    }
    return h;
}

#if defined(__SIZEOF_INT128__)
/* The 128-bit product of a and b, its halves folded by XOR. */
static inline uint64_t fold_mul(uint64_t a, uint64_t b)
{
    unsigned __int128 r = (unsigned __int128)a * b;
    return (uint64_t)r ^ (uint64_t)(r >> 64);
}

/* Sixteen bytes per multiply: table keys are short (partition signatures,
 * unit ids), so a step costs one multiply instead of three. */
uint64_t sk_hash_fast(const void *p, size_t n)
{
    const uint64_t k0 = 0x9E3779B97F4A7C15ULL, k1 = 0xd6e8feb86659fd93ULL;
    const uint8_t *s = p;
    uint64_t h = k0 ^ ((uint64_t)n * k1);
    size_t left = n;
    while (left > 16) {
        uint64_t a, b;
        memcpy(&a, s, 8);
        memcpy(&b, s + 8, 8);
        h = fold_mul(a ^ h, b ^ k1);
        s += 16;
        left -= 16;
    }
    uint64_t a = 0, b = 0;
    if (left > 8) {
        memcpy(&a, s, 8);
        memcpy(&b, s + 8, left - 8);
    } else {
        memcpy(&a, s, left);
    }
    h = fold_mul(a ^ h, b ^ k1);
    return fold_mul(h ^ k0, k1 ^ (uint64_t)n);
}
#else
static inline uint64_t mix64(uint64_t x)
{
    x ^= x >> 32;
    x *= 0xd6e8feb86659fd93ULL;
    x ^= x >> 32;
    x *= 0xd6e8feb86659fd93ULL;
    x ^= x >> 32;
    return x;
}

uint64_t sk_hash_fast(const void *p, size_t n)
{
    const uint8_t *s = p;
    uint64_t h = 0x9E3779B97F4A7C15ULL ^ n;
    while (n >= 8) {
        uint64_t v;
        memcpy(&v, s, 8);
        h = (h ^ mix64(v)) * 0x9E3779B97F4A7C15ULL;
        s += 8;
        n -= 8;
    }
    uint64_t tail = 0;
    memcpy(&tail, s, n);
    return mix64(h ^ tail ^ ((uint64_t)n << 56));
}
#endif

void sk_release_free_memory(void)
{
#ifdef __GLIBC__
    malloc_trim(0);
#endif
}

int sk_release_slack_memory(void)
{
    sk_memstats m;
    sk_memory_stats(&m);
    if (m.heap_used == 0 || m.rss <= m.heap_used ||
        m.rss - m.heap_used <= SK_MAX((uint64_t)SK_SLACK_MIN, m.heap_used / 2))
        return 0;
    sk_release_free_memory();
    return 1;
}

void sk_malloc_tune(void)
{
#ifdef __GLIBC__
    /* Setting it also stops glibc's dynamic adjustment of it. */
    mallopt(M_MMAP_THRESHOLD, (int)SK_MMAP_MIN);
    mallopt(M_TRIM_THRESHOLD, (int)SK_MMAP_MIN);
#endif
}

void sk_memory_stats(sk_memstats *out)
{
    memset(out, 0, sizeof *out);
#if defined(__GLIBC__) && (__GLIBC__ > 2 || __GLIBC_MINOR__ >= 33)
    struct mallinfo2 mi = mallinfo2();
    out->heap_used = (uint64_t)mi.uordblks + mi.hblkhd;
    out->heap_held = (uint64_t)mi.arena + mi.hblkhd;
#endif
    FILE *f = fopen("/proc/self/statm", "r");
    if (!f)
        return;
    unsigned long long size = 0, resident = 0;
    long page = sysconf(_SC_PAGESIZE);
    if (fscanf(f, "%llu %llu", &size, &resident) == 2 && page > 0)
        out->rss = (uint64_t)resident * (uint64_t)page;
    fclose(f);
}

uint64_t sk_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

void sk_list_add(char *list, size_t cap, const char *name)
{
    size_t n = strnlen(list, cap);
    if (n + 1 >= cap)
        return;
    snprintf(list + n, cap - n, "%s%s", n ? ", " : "", name);
}
