/* Event-time sealing's clock: see clock.h. */
#include "pipeline/clock.h"

#include <inttypes.h>

#include "base/common.h"

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
};

pl_clock *pl_clock_new(int on)
{
    pl_clock *c = sk_calloc(1, sizeof *c);
    if (c)
        *c = (pl_clock){.on = on, .arrival_min = INT64_MAX,
                        .arrival_max = INT64_MIN, .wm_prev = INT64_MIN,
                        .next_due = INT64_MIN};
    return c;
}

void pl_clock_free(pl_clock *c)
{
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

void pl_clock_place(pl_clock *c, sk_slice *s, const sk_router *r,
                    int64_t lateness)
{
    int64_t from, to;
    s->seal_at = c->on && sk_route_key_bucket(r, s->key, s->key_len, &from,
                                              &to)
                     ? to + lateness
                     : INT64_MAX;
    /* Modification times that are not arrival times (an archive copied or
     * restored since it landed) would seal every slice after every unit:
     * they are not trusted once a partition's bucket (with the lateness)
     * ended before the first unit arrived, or once a record comes for a
     * bucket the watermark passed. */
    const char *why = NULL;
    if (c->modified && s->seal_at <= c->arrival_min)
        why = "ended before the first unit arrived";
    if (s->seal_at <= c->wm_prev) {
        s->late = 1;
        c->late_slices++;
        if (c->modified)
            why = "was passed by the watermark before this record came";
    }
    if (why && c->on) {
        sk_info("event-time sealing is off for the rest of this run: "
                "units' modification times are not their arrival times "
                "(the time bucket of %.*s %s)", (int)s->key_len, s->key,
                why);
        c->on = 0;
    }
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

void pl_clock_late_sealed(pl_clock *c, uint64_t n)
{
    c->late_records += n;
}

uint64_t pl_clock_late_records(const pl_clock *c)
{
    return c->late_records;
}

uint64_t pl_clock_late_slices(const pl_clock *c)
{
    return c->late_slices;
}
