/* Synth: a bench-only source that makes its units up as it lists them, so
 * that the ledger and the listing can be measured at ten million units
 * without ten million files (bench/units.py). Not installed.
 *
 * Unit i (0 <= i < units) is "YYYY/MM/DD/HH/stream-1-...-<hex>", a
 * Firehose-like key, 1,000 an hour, listed in key order; its version is
 * an ETag-like 32 hex digits made from i, and its two records are
 * generated on open. Options: units (how many), first (the first i).
 */
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <skippr/plugin.h>

typedef struct synth {
    const skippr_host *host;
    int64_t units, first;
} synth;

typedef struct stream {
    char body[256];
    size_t len, pos;
} stream;

static const skippr_option options[] = {
    {"units", SKIPPR_OPT_INT, "1000", 0, offsetof(synth, units),
     "How many units to list."},
    {"first", SKIPPR_OPT_INT, "0", 0, offsetof(synth, first),
     "The number of the first unit."},
    {NULL, 0, NULL, 0, 0, NULL}};

static uint64_t mix(uint64_t x)
{
    x += 0x9E3779B97F4A7C15ULL;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL;
    return x ^ (x >> 31);
}

/* Unit i's key: the hour folder, then a name that sorts by i within it. */
static void key_of(int64_t i, char *out, size_t n)
{
    int64_t h = i / 1000, day = h / 24;
    int mon = (int)(day / 28 % 12) + 1, dom = (int)(day % 28) + 1;
    int year = 2020 + (int)(day / (28 * 12));
    snprintf(out, n, "%04d/%02d/%02d/%02d/stream-1-%04d-%02d-%02d-%02d-%03d-"
             "%016" PRIx64, year, mon, dom, (int)(h % 24), year, mon, dom,
             (int)(h % 24), (int)(i % 1000), mix(3 * (uint64_t)i));
}

static int init(void *ctx, const skippr_host *host)
{
    synth *s = ctx;
    s->host = host;
    if (s->units < 0 || s->first < 0)
        return SKIPPR_INVAL;
    return SKIPPR_OK;
}

static void destroy(void *ctx) { (void)ctx; }

/* Keys sort by i, so start_after is found by bisection. */
static int list(void *ctx, const char *start_after, skippr_unit_cb cb,
                void *cb_data)
{
    synth *s = ctx;
    char key[128], ver[40];
    int64_t lo = s->first, hi = s->first + s->units;
    if (start_after) {
        while (lo < hi) {
            int64_t mid = lo + (hi - lo) / 2;
            key_of(mid, key, sizeof key);
            if (strcmp(key, start_after) <= 0)
                lo = mid + 1;
            else
                hi = mid;
        }
        hi = s->first + s->units;
    }
    for (int64_t i = lo; i < hi; i++) {
        key_of(i, key, sizeof key);
        snprintf(ver, sizeof ver, "%016" PRIx64 "%016" PRIx64,
                 mix(3 * (uint64_t)i + 1), mix(3 * (uint64_t)i + 2));
        skippr_unit u = {key, ver, -1, 0};
        if (cb(cb_data, &u))
            break;
    }
    return SKIPPR_OK;
}

static int src_open(void *ctx, const skippr_unit *unit, int64_t offset,
                    void **out)
{
    (void)ctx;
    stream *st = calloc(1, sizeof *st);
    if (!st)
        return SKIPPR_NOMEM;
    /* The day and hour come from the key ("YYYY/MM/DD/HH/..."). */
    const char *k = unit->id;
    uint64_t h = mix(strlen(k) > 40 ? strtoull(k + strlen(k) - 16, NULL, 16)
                                    : 0);
    int n = snprintf(st->body, sizeof st->body,
                     "{\"event_type\":\"e%d\",\"timestamp\":\"%.4s-%.2s-%.2sT"
                     "%.2s:00:00Z\",\"detail\":{\"tenant_id\":\"t%d\"}}\n"
                     "{\"event_type\":\"e%d\",\"timestamp\":\"%.4s-%.2s-%.2sT"
                     "%.2s:00:00Z\",\"detail\":{\"tenant_id\":\"t%d\"}}\n",
                     (int)(h % 5), k, k + 5, k + 8, k + 11, (int)(h % 7),
                     (int)(h / 5 % 5), k, k + 5, k + 8, k + 11,
                     (int)(h / 7 % 7));
    st->len = n > 0 && (size_t)n < sizeof st->body ? (size_t)n : 0;
    st->pos = offset > 0 && (size_t)offset < st->len ? (size_t)offset
              : offset > 0                          ? st->len
                                                    : 0;
    *out = st;
    return SKIPPR_OK;
}

static int src_read(void *ctx, void *h, void *buf, size_t cap, size_t *n)
{
    (void)ctx;
    stream *st = h;
    size_t k = st->len - st->pos < cap ? st->len - st->pos : cap;
    memcpy(buf, st->body + st->pos, k);
    st->pos += k;
    *n = k;
    return SKIPPR_OK;
}

static void src_close(void *ctx, void *h)
{
    (void)ctx;
    free(h);
}

static const skippr_source_ops source = {
    .struct_size = sizeof(skippr_source_ops),
    .ctx_size = sizeof(synth),
    .options = options,
    .init = init,
    .destroy = destroy,
    .list = list,
    .open = src_open,
    .read = src_read,
    .close = src_close,
};

static const skippr_plugin plugin = {
    .abi_version = SKIPPR_ABI_VERSION,
    .struct_size = sizeof(skippr_plugin),
    .name = "Synth",
    .description = "Bench only: units made up as they are listed.",
    .version = "1",
    .source = &source,
    .sink = NULL,
};

SKIPPR_PLUGIN_DEFINE(plugin)
