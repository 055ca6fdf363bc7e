/* Event-time sealing's clock: see clock.h. */
#include "pipeline/clock.h"

#include <inttypes.h>
#include <string.h>

#include "base/common.h"
#include "base/endian.h"
#include "base/hash.h"
#include "base/map.h"

/* An open slice's time, once placed; the map's key is id, the slice id's
 * eight bytes. */
typedef struct slice_time {
    uint8_t id[8];
    int64_t seal_at; /* INT64_MAX: never by event time */
    int late;        /* opened after its bucket had been passed */
} slice_time;

struct pl_clock {
    int on;
    int modified;         /* some arrival came from a unit's modification
                           * time, not its key */
    int64_t arrival_min;  /* the earliest arrival listed */
    int64_t arrival_max;  /* the latest arrival listed */
    int64_t wm_prev;      /* the watermark at the last flush */
    int64_t next_due;     /* the earliest seal_at of slices open at the
                           * last flush */
    uint64_t late_slices, late_records;
    sk_map slices; /* slice_time of the open slices placed */
};

pl_clock *pl_clock_new(int on)
{
    pl_clock *c = sk_calloc(1, sizeof *c);
    if (c)
        *c = (pl_clock){.on = on, .arrival_min = INT64_MAX,
                        .arrival_max = INT64_MIN, .wm_prev = INT64_MIN,
                        .next_due = INT64_MIN};
    if (c)
        sk_map_init(&c->slices);
    return c;
}

void pl_clock_free(pl_clock *c)
{
    if (!c)
        return;
    size_t it = 0;
    slice_time *t;
    while ((t = sk_map_next(&c->slices, &it)))
        sk_free(t);
    sk_map_free(&c->slices);
    sk_free(c);
}

int pl_clock_on(const pl_clock *c)
{
    return c->on;
}

/* Sealing by event time needs every unit's arrival, in about listing
 * order: one may come up to allowed_lateness_seconds before an
 * earlier-listed one (Firehose writes an hour's objects in parallel). */
int pl_clock_arrival(pl_clock *c, const sk_pipeline_cfg *cfg, const char *id,
                     int64_t modified, int64_t *a)
{
    if (!c->on)
        return 0;
    const char *why = NULL;
    const char *pat = cfg->arrival_key_pattern;
    if (pat && *pat) {
        if (!sk_route_unit_arrival(pat, id, a))
            why = "does not match arrival_key_pattern";
    } else if (!sk_route_unit_arrival(NULL, id, a)) {
        *a = modified;
        c->modified = 1;
        if (*a <= 0)
            why = "names no arrival time (a Firehose YYYY/MM/DD/HH/ prefix "
                  "or Hive year=/month=/day= folders) and the source gives "
                  "no modification time";
    }
    if (!why && c->arrival_max != INT64_MIN &&
        *a < c->arrival_max - cfg->allowed_lateness_seconds)
        why = "is listed after one that arrived more than "
              "allowed_lateness_seconds later";
    if (why) {
        sk_info("event-time sealing is off for this run: unit %s %s", id,
                why);
        c->on = 0;
        return 0;
    }
    c->arrival_max = SK_MAX(c->arrival_max, *a);
    c->arrival_min = SK_MIN(c->arrival_min, *a);
    return 1;
}

int64_t pl_clock_latest(const pl_clock *c)
{
    return c->arrival_max;
}

int pl_clock_known(const pl_clock *c)
{
    return c->on && c->arrival_min != INT64_MAX;
}

/* A new slice s's time into t: when its bucket (by router r) and the
 * lateness make it due, and whether it opened after the watermark passed
 * that time. */
static void place(pl_clock *c, const sk_slice *s, const sk_router *r,
                  int64_t lateness, slice_time *t)
{
    int64_t from, to;
    t->seal_at = c->on && sk_route_key_bucket(r, sk_slice_key(s),
                                              sk_slice_key_len(s), &from, &to)
                     ? to + lateness
                     : INT64_MAX;
    /* Modification times that are not arrival times (an archive copied or
     * restored since it landed) would seal every slice after every unit:
     * they are not trusted once a partition's bucket (with the lateness)
     * ended before the first unit arrived, or once a record comes for a
     * bucket the watermark passed. */
    const char *why = NULL;
    if (c->modified && t->seal_at <= c->arrival_min)
        why = "ended before the first unit arrived";
    if (t->seal_at <= c->wm_prev) {
        t->late = 1;
        c->late_slices++;
        if (c->modified)
            why = "was passed by the watermark before this record came";
    }
    if (why && c->on) {
        sk_info("event-time sealing is off for the rest of this run: "
                "units' modification times are not their arrival times "
                "(the time bucket of %.*s %s)",
                (int)sk_slice_key_len(s), sk_slice_key(s), why);
        c->on = 0;
    }
}

/* The map key of slice id into k; its hash. */
static uint64_t slice_key(uint64_t id, uint8_t k[8])
{
    sk_put_u64(k, id);
    return sk_hash_fast(k, 8);
}

int pl_clock_seal_at(pl_clock *c, const sk_slice *s, const sk_router *r,
                     int64_t lateness, int64_t *at)
{
    uint8_t k[8];
    uint64_t h = slice_key(sk_slice_id(s), k);
    slice_time *t = sk_map_get(&c->slices, (const char *)k, 8, h);
    if (!t) {
        if (!(t = sk_calloc(1, sizeof *t)))
            return SKIPPR_NOMEM;
        memcpy(t->id, k, 8);
        if (sk_map_put(&c->slices, (const char *)t->id, 8, h, t)) {
            sk_free(t);
            return SKIPPR_NOMEM;
        }
        place(c, s, r, lateness, t);
    }
    *at = t->seal_at;
    return SKIPPR_OK;
}

void pl_clock_closed(pl_clock *c, const sk_slice *s, int sealed)
{
    uint8_t k[8];
    uint64_t h = slice_key(sk_slice_id(s), k);
    slice_time *t = sk_map_del(&c->slices, (const char *)k, 8, h);
    if (t && t->late && sealed)
        c->late_records += sk_slice_records(s);
    sk_free(t);
}

void pl_clock_flush_begin(pl_clock *c)
{
    c->next_due = INT64_MAX;
}

void pl_clock_pending(pl_clock *c, int64_t seal_at)
{
    if (seal_at < c->next_due)
        c->next_due = seal_at;
}

void pl_clock_flush_end(pl_clock *c, int64_t wm)
{
    if (wm > c->wm_prev)
        c->wm_prev = wm;
}

int64_t pl_clock_next_due(const pl_clock *c)
{
    return c->next_due;
}

uint64_t pl_clock_late_records(const pl_clock *c)
{
    return c->late_records;
}

uint64_t pl_clock_late_slices(const pl_clock *c)
{
    return c->late_slices;
}
