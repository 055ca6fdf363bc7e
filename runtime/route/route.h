/* Routing: from a record's peeked fields to its partition key.
 *
 * The key is the path under the sink prefix, without the object name:
 *
 *   {namespace}/{pfx}{field}={value}/{pfx}year=YYYY/{pfx}month=MM/...
 *
 * - namespace: first present scalar of namespace_fields, else "_default".
 * - partition: first present scalar of batch_partition_fields, named by the
 *   field path that supplied it; else {pfx}{first path}=__HIVE_DEFAULT_
 *   PARTITION__. Left out when no partition fields are configured.
 * - time: first value of batch_time_fields that parses (timeparse.h), cut to
 *   the configured unit; else every time segment is the Hive default.
 * "Present scalar": a non-empty string, a number (its lexeme), true or false.
 *
 * Every segment is escaped Hive-style (sk_escape_segment) and bounded to
 * SK_SEGMENT_MAX bytes, so no value can add a path level or climb out of the
 * sink prefix.
 */
#ifndef SK_ROUTE_H
#define SK_ROUTE_H

#include <stddef.h>
#include <stdint.h>

#include "base/common.h"
#include "format/json.h"
#include "route/escape.h"
#include "route/timeparse.h"

#define SK_HIVE_DEFAULT "__HIVE_DEFAULT_PARTITION__"

typedef enum sk_time_unit {
    SK_TIME_UNIT_NONE = 0,
    SK_TIME_UNIT_YEAR,
    SK_TIME_UNIT_MONTH,
    SK_TIME_UNIT_DAY,
    SK_TIME_UNIT_HOUR
} sk_time_unit;

/* Returns the unit for "year|month|day|hour", or -1. */
int sk_time_unit_parse(const char *s);

typedef struct sk_route_config {
    const char *namespace_fields; /* comma list; NULL means "event_type" */
    const char *partition_fields; /* comma list; NULL or "" means none */
    const char *time_fields;      /* comma list; NULL or "" means none */
    sk_time_unit time_unit;       /* NONE: no time segments */
    const char *prefix;           /* e.g. "p_"; NULL means "" */
    int skim; /* peek only as far as routing needs (json.h, skim mode) */
    int lines; /* records are one per line (source format: jsonl) */
    /* The partition column's folder name (before '='); NULL: the last
     * dotted segment of the first partition path ("tenant_id"). */
    const char *partition_name;
    /* Name each partition path's folder after the whole path instead
     * ("p_detail.tenant_id=", "p_truck.tenant_id="): the layout of states
     * written before the column had one name. */
    int partition_per_path;
} sk_route_config;

typedef enum sk_field_kind {
    SK_FIELD_ABSENT = 0,
    SK_FIELD_STRING, /* decoded text */
    SK_FIELD_NUMBER, /* lexeme */
    SK_FIELD_BOOL    /* "true" / "false" */
} sk_field_kind;

typedef struct sk_field {
    sk_field_kind kind;
    const uint8_t *p;
    size_t n;
} sk_field;

typedef struct sk_router sk_router;

/* Build a router. On failure returns NULL and, if err is not NULL, sets *err
 * to a static message. Caller owns the result: sk_router_free(). */
sk_router *sk_router_new(const sk_route_config *cfg, const char **err);
void sk_router_free(sk_router *r);

/* The partition folder heads this router writes, distinct, joined by ','
 * ("p_tenant_id="; "" without partition fields): what a state's layout
 * depends on beyond the transform's text. The caller frees it (sk_free);
 * NULL when out of memory. */
char *sk_router_part_heads(const sk_router *r);

/* The distinct paths the router needs, in slot order; pass them to the
 * format's peeker. The array belongs to the router. */
const char *const *sk_router_paths(const sk_router *r, size_t *n);
/* The JSON peek spec for those paths; belongs to the router. */
const sk_peek_spec *sk_router_json_spec(const sk_router *r);

/* Append the partition key of a record whose fields (indexed by slot) are
 * given. Returns SKIPPR_OK or SKIPPR_RANGE/NOMEM from the buffer. */
int sk_route_key(const sk_router *r, const sk_field *fields, skippr_buf *key);

/* The time unit of the router's keys, and the head of unit u's segment
 * ("/{prefix}year=" for u 0, month 1, day 2, hour 3). */
sk_time_unit sk_router_time_unit(const sk_router *r);
const char *sk_router_time_head(const sk_router *r, int u);

/* eventtime.c. The time bucket [*start, *end) named by a partition key's
 * time segments: 1, or 0 when it names none (no time unit, or the
 * default partition). */
int sk_route_key_bucket(const sk_router *r, const char *key, size_t len,
                        int64_t *start, int64_t *end);
/* The arrival time a unit's key names: the start of the hour (day, month)
 * of a Firehose YYYY/MM/DD/HH/ prefix or Hive year=/month=/day=/hour=
 * folders, or with pattern (NULL or "": none) where it matches last in
 * the key: %Y, %m, %d, %H are 4, 2, 2, 2 digits, %% a percent sign, any
 * other character itself. 1 and *t, or 0 when the key names none. */
int sk_route_unit_arrival(const char *pattern, const char *id, int64_t *t);
/* Non-zero when pattern is one sk_route_unit_arrival takes: it has %Y,
 * and no % but %Y, %m, %d, %H and %%. */
int sk_route_arrival_pattern_check(const char *pattern);

/* Convenience for JSON: converts peeked values (decoding strings into
 * scratch, which is reset first) and appends the key. */
int sk_route_json(const sk_router *r, const uint8_t *buf,
                  const sk_json_value *vals, skippr_buf *scratch, skippr_buf *key);

/* Only the conversion: peeked values to fields, strings decoded into
 * scratch (reset first). The fields point into buf or scratch. */
int sk_route_json_fields(const sk_router *r, const uint8_t *buf,
                         const sk_json_value *vals, skippr_buf *scratch,
                         sk_field *f);

/* A worker's memo of the keys it has built. Records with the same routing
 * inputs (namespace value, chosen partition field and value, time cut to
 * the unit) get the same id without building the key again; ids are dense
 * from 0 in order of first appearance, until sk_memo_reset(). Used by one
 * thread at a time. */
typedef struct sk_memo_key {
    uint64_t sig_hash, key_hash;
    size_t sig_off, sig_len;
    size_t key_off, key_len; /* in keys */
} sk_memo_key;

#define SK_MEMO_DAYS 16
typedef struct sk_memo_day {
    int64_t day; /* days since 1970 */
    sk_civil civil;
    int known;
} sk_memo_day;

typedef struct sk_memo {
    sk_memo_key *keys_at; /* by id */
    size_t n, keys_cap;
    uint32_t *tab; /* open addressing: id + 1, 0 empty */
    size_t tab_cap;
    skippr_buf sigs, keys;
    sk_memo_day days[SK_MEMO_DAYS]; /* civil dates already computed */
} sk_memo;

void sk_memo_init(sk_memo *m, size_t max_bytes);
void sk_memo_reset(sk_memo *m);
void sk_memo_free(sk_memo *m);
/* Route one record: *id names its key (m->keys_at[*id]). */
int sk_route_memo(const sk_router *r, sk_memo *m, const uint8_t *buf,
                  const sk_json_value *vals, skippr_buf *scratch, uint32_t *id);
/* The same from fields already decoded (one per path; CSV cells). */
int sk_route_memo_fields(const sk_router *r, sk_memo *m, const sk_field *f,
                         uint32_t *id);

#endif
