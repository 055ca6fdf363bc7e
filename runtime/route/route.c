#include "route/route.h"

#include <stdio.h>
#include <string.h>

#include "route/timeparse.h"

#define MAX_FIELDS 8 /* per list */

struct sk_router {
    char *paths[SK_PEEK_MAX_PATHS];
    size_t npaths;
    int ns_slot[MAX_FIELDS];
    size_t n_ns;
    int part_slot[MAX_FIELDS];
    char *part_head[MAX_FIELDS]; /* "{pfx}{escaped name}=" */
    size_t n_part;
    int per_path; /* each path names its own folder (the old layout) */
    int time_slot[MAX_FIELDS];
    size_t n_time;
    sk_time_unit unit;
    char *prefix;
    char *time_head[4]; /* "/{pfx}year=", "/{pfx}month=", ... */
    size_t time_head_len[4];
    sk_peek_spec *spec;
};

int sk_time_unit_parse(const char *s)
{
    static const char *const names[] = {"year", "month", "day", "hour"};
    for (int i = 0; i < 4; i++)
        if (strcmp(s, names[i]) == 0)
            return SK_TIME_UNIT_YEAR + i;
    return -1;
}

static void router_clear(sk_router *r)
{
    for (size_t i = 0; i < r->npaths; i++)
        sk_free(r->paths[i]);
    for (size_t i = 0; i < r->n_part; i++)
        sk_free(r->part_head[i]);
    for (int i = 0; i < 4; i++)
        sk_free(r->time_head[i]);
    sk_free(r->prefix);
    sk_peek_spec_free(r->spec);
}

void sk_router_free(sk_router *r)
{
    if (!r)
        return;
    router_clear(r);
    sk_free(r);
}

/* Slot of path (adding it), or -1 when there are too many paths. */
static int slot_of(sk_router *r, const char *p, size_t n)
{
    for (size_t i = 0; i < r->npaths; i++)
        if (strlen(r->paths[i]) == n && memcmp(r->paths[i], p, n) == 0)
            return (int)i;
    if (r->npaths == SK_PEEK_MAX_PATHS)
        return -1;
    char *c = sk_strndup(p, n);
    if (!c)
        return -1;
    r->paths[r->npaths] = c;
    return (int)r->npaths++;
}

/* Parse a comma list into slots. Returns 0, or -1 with *err set. */
static int parse_list(sk_router *r, const char *list, int *slots, size_t *n,
                      const char **err)
{
    *n = 0;
    if (!list)
        return 0;
    const char *p = list;
    while (*p) {
        while (*p == ' ' || *p == ',')
            p++;
        if (!*p)
            break;
        const char *e = p;
        while (*e && *e != ',')
            e++;
        const char *t = e;
        while (t > p && t[-1] == ' ')
            t--;
        size_t len = (size_t)(t - p);
        int empty_seg = 0;
        for (const char *q = p; q + 1 < t; q++)
            empty_seg |= q[0] == '.' && q[1] == '.';
        if (len == 0 || len > 100 || memchr(p, '/', len) || empty_seg ||
            p[0] == '.' || t[-1] == '.') {
            *err = "field paths must be 1-100 bytes of dotted names";
            return -1;
        }
        if (*n == MAX_FIELDS) {
            *err = "at most 8 fields per list";
            return -1;
        }
        int s = slot_of(r, p, len);
        if (s < 0) {
            *err = "at most 16 distinct routing fields";
            return -1;
        }
        slots[(*n)++] = s;
        p = e;
    }
    return 0;
}

/* The column's name from a path: its last dotted segment, without an
 * XML attribute's '@' ("detail.tenant_id" -> "tenant_id"). */
static void column_of(const char *path, const char **p, size_t *n)
{
    const char *dot = strrchr(path, '.');
    *p = dot ? dot + 1 : path;
    if (**p == '@' && (*p)[1])
        (*p)++;
    *n = strlen(*p);
}

/* "{pfx}{escaped name}=" for each partition path: one name for the column
 * (given, else the first path's last segment), or with per_path each
 * path's own. Returns 0, or -1 with *err set. */
static int make_part_heads(sk_router *r, const char *given, const char **err)
{
    if (given && (!*given || strlen(given) > 64 || strchr(given, '/'))) {
        *err = "batch_partition_name must be 1-64 bytes, without '/'";
        return -1;
    }
    for (size_t i = 0; i < r->n_part; i++) {
        const char *path = r->paths[r->part_slot[r->per_path ? i : 0]], *p;
        size_t n;
        if (r->per_path)
            p = path, n = strlen(path);
        else if (given)
            p = given, n = strlen(given);
        else
            column_of(path, &p, &n);
        skippr_buf h;
        skippr_buf_init(&h, 512);
        if (skippr_buf_append(&h, r->prefix, strlen(r->prefix)) ||
            sk_escape_append(&h, (const uint8_t *)p, n) ||
            skippr_buf_append(&h, "=", 2)) {
            skippr_buf_free(&h);
            *err = "out of memory";
            return -1;
        }
        r->part_head[i] = (char *)h.data;
    }
    return 0;
}

sk_router *sk_router_new(const sk_route_config *cfg, const char **err)
{
    const char *dummy;
    if (!err)
        err = &dummy;
    *err = "out of memory";
    sk_router *made = NULL, *r = sk_calloc(1, sizeof *r);
    if (!r)
        goto fail;
    r->prefix = sk_strdup(cfg->prefix ? cfg->prefix : "");
    if (!r->prefix)
        goto fail;
    if (strchr(r->prefix, '/') || strlen(r->prefix) > 32) {
        *err = "time_partition_prefix must be at most 32 bytes, without '/'";
        goto fail;
    }
    const char *ns = cfg->namespace_fields ? cfg->namespace_fields
                                           : "event_type";
    if (parse_list(r, ns, r->ns_slot, &r->n_ns, err) ||
        parse_list(r, cfg->partition_fields, r->part_slot, &r->n_part, err) ||
        parse_list(r, cfg->time_fields, r->time_slot, &r->n_time, err))
        goto fail;
    r->per_path = cfg->partition_per_path;
    if (r->n_part && make_part_heads(r, cfg->partition_name, err))
        goto fail;
    r->unit = cfg->time_unit;
    static const char *const names[] = {"year", "month", "day", "hour"};
    for (int i = 0; i < 4; i++)
        if (!(r->time_head[i] = sk_asprintf("/%s%s=", r->prefix, names[i])))
            goto fail;
        else
            r->time_head_len[i] = strlen(r->time_head[i]);
    if (r->unit != SK_TIME_UNIT_NONE && r->n_time == 0) {
        *err = "batch_time_unit needs batch_time_fields";
        goto fail;
    }
    r->spec = sk_peek_spec_new((const char *const *)r->paths, r->npaths);
    if (!r->spec)
        goto fail;
    if (cfg->skim) {
        /* The first present value of a list wins, so a list is settled by
         * its first field; a time list only by reading the whole record,
         * because a present time may not parse. */
        sk_peek_group g[3];
        size_t ng = 0;
        if (r->n_ns)
            g[ng++] = (sk_peek_group){(size_t)r->ns_slot[0],
                                      r->n_ns == 1 ? SK_SETTLE_ANY
                                                   : SK_SETTLE_SCALAR};
        if (r->n_part)
            g[ng++] = (sk_peek_group){(size_t)r->part_slot[0],
                                      r->n_part == 1 ? SK_SETTLE_ANY
                                                     : SK_SETTLE_SCALAR};
        if (r->unit != SK_TIME_UNIT_NONE && r->n_time)
            g[ng++] = (sk_peek_group){(size_t)r->time_slot[0],
                                      r->n_time == 1 ? SK_SETTLE_ANY
                                                     : SK_SETTLE_NEVER};
        sk_peek_spec_set_skim(r->spec, g, ng);
        sk_peek_spec_set_lines(r->spec, cfg->lines);
    }
    *err = NULL;
    made = r;
    r = NULL; /* handed to the caller */
fail:
    sk_router_free(r);
    return made;
}

char *sk_router_part_heads(const sk_router *r)
{
    skippr_buf b;
    skippr_buf_init(&b, 4096);
    int rc = SKIPPR_OK;
    for (size_t i = 0; !rc && i < r->n_part; i++) {
        int seen = 0;
        for (size_t j = 0; j < i; j++)
            seen |= strcmp(r->part_head[j], r->part_head[i]) == 0;
        if (!seen)
            rc = skippr_buf_printf(&b, "%s%s", b.len ? "," : "",
                               r->part_head[i]);
    }
    if (!rc)
        rc = skippr_buf_append(&b, "", 1);
    if (rc) {
        skippr_buf_free(&b);
        return NULL;
    }
    return (char *)b.data;
}

const char *const *sk_router_paths(const sk_router *r, size_t *n)
{
    *n = r->npaths;
    return (const char *const *)r->paths;
}

const sk_peek_spec *sk_router_json_spec(const sk_router *r) { return r->spec; }

static const sk_field *first_present(const sk_field *f, const int *slots,
                                     size_t n, size_t *which)
{
    for (size_t i = 0; i < n; i++) {
        const sk_field *v = &f[slots[i]];
        if (v->kind != SK_FIELD_ABSENT && !(v->kind == SK_FIELD_STRING &&
                                            v->n == 0)) {
            *which = i;
            return v;
        }
    }
    return NULL;
}

/* The first time field that parses; 0 if none does. */
static int pick_time(const sk_router *r, const sk_field *f, int64_t *t)
{
    for (size_t i = 0; i < r->n_time; i++) {
        const sk_field *v = &f[r->time_slot[i]];
        if (v->kind == SK_FIELD_STRING &&
            sk_time_parse((const char *)v->p, v->n, t) == 0)
            return 1;
        if (v->kind == SK_FIELD_NUMBER &&
            sk_time_parse_epoch((const char *)v->p, v->n, t) == 0)
            return 1;
    }
    return 0;
}

int sk_route_key(const sk_router *r, const sk_field *f, skippr_buf *key)
{
    int rc;
    size_t which = 0;
    const sk_field *ns = first_present(f, r->ns_slot, r->n_ns, &which);
    size_t start = key->len;
    if (!ns) {
        rc = skippr_buf_append(key, "_default", 8);
    } else {
        rc = sk_segment_append(key, "", ns->p, ns->n);
        /* "." and ".." would be path navigation. */
        size_t seg = key->len - start;
        if (!rc && seg <= 2 && memcmp(key->data + start, "..", seg) == 0) {
            key->len = start;
            rc = skippr_buf_append(key, seg == 1 ? "%2E" : "%2E%2E", seg * 3);
        }
    }
    if (rc)
        return rc;

    if (r->n_part) {
        const sk_field *pv = first_present(f, r->part_slot, r->n_part, &which);
        rc = skippr_buf_putc(key, '/');
        if (!rc && pv)
            rc = sk_segment_append(key, r->part_head[which], pv->p, pv->n);
        else if (!rc)
            rc = sk_segment_append(key, r->part_head[0],
                                   (const uint8_t *)SK_HIVE_DEFAULT,
                                   sizeof SK_HIVE_DEFAULT - 1);
        if (rc)
            return rc;
    }

    if (r->unit == SK_TIME_UNIT_NONE)
        return SKIPPR_OK;
    int64_t t = 0;
    int ok = pick_time(r, f, &t);
    sk_civil c = {0};
    if (ok) {
        sk_time_to_civil(t, &c);
        ok = c.year >= 0 && c.year <= 9999;
    }
    const int vals[] = {c.year, c.month, c.day, c.hour};
    for (int u = 0; u < (int)r->unit; u++) {
        const char *h = r->time_head[u];
        size_t hl = r->time_head_len[u];
        if ((rc = skippr_buf_reserve(key, hl + sizeof SK_HIVE_DEFAULT)))
            return rc;
        memcpy(key->data + key->len, h, hl);
        key->len += hl;
        if (!ok) {
            memcpy(key->data + key->len, SK_HIVE_DEFAULT,
                   sizeof SK_HIVE_DEFAULT - 1);
            key->len += sizeof SK_HIVE_DEFAULT - 1;
            continue;
        }
        /* Digits by hand: printf dominated the routing cost. */
        int v = vals[u], width = u == 0 ? 4 : 2;
        for (int d = width - 1; d >= 0; d--) {
            key->data[key->len + (size_t)d] = (uint8_t)('0' + v % 10);
            v /= 10;
        }
        key->len += (size_t)width;
    }
    return SKIPPR_OK;
}

sk_time_unit sk_router_time_unit(const sk_router *r)
{
    return r->unit;
}

const char *sk_router_time_head(const sk_router *r, int u)
{
    return r->time_head[u];
}

int sk_route_json_fields(const sk_router *r, const uint8_t *buf,
                         const sk_json_value *vals, skippr_buf *scratch,
                         sk_field *f)
{
    size_t need = 0;
    for (size_t i = 0; i < r->npaths; i++)
        if (vals[i].type == SK_JSON_STRING && vals[i].has_escapes)
            need += vals[i].len;
    skippr_buf_reset(scratch);
    int rc = skippr_buf_reserve(scratch, need);
    if (rc)
        return rc;
    for (size_t i = 0; i < r->npaths; i++) {
        const sk_json_value *v = &vals[i];
        f[i].kind = SK_FIELD_ABSENT;
        switch (v->type) {
        case SK_JSON_STRING:
            f[i].kind = SK_FIELD_STRING;
            if (v->has_escapes) {
                uint8_t *d = scratch->data + scratch->len;
                f[i].n = sk_json_unescape(buf + v->off, v->len, d);
                f[i].p = d;
                scratch->len += f[i].n;
            } else {
                f[i].p = buf + v->off;
                f[i].n = v->len;
            }
            break;
        case SK_JSON_NUMBER:
            f[i].kind = SK_FIELD_NUMBER;
            f[i].p = buf + v->off;
            f[i].n = v->len;
            break;
        case SK_JSON_TRUE:
        case SK_JSON_FALSE:
            f[i].kind = SK_FIELD_BOOL;
            f[i].p = buf + v->off;
            f[i].n = v->len;
            break;
        default:
            break;
        }
    }
    return SKIPPR_OK;
}

int sk_route_json(const sk_router *r, const uint8_t *buf,
                  const sk_json_value *vals, skippr_buf *scratch, skippr_buf *key)
{
    sk_field f[SK_PEEK_MAX_PATHS];
    int rc = sk_route_json_fields(r, buf, vals, scratch, f);
    return rc ? rc : sk_route_key(r, f, key);
}

/* ---- memo --------------------------------------------------------------- */

/* The signature holds every input of sk_route_key: the chosen namespace
 * value, which partition field was chosen and its value, and the time cut
 * to the unit. Equal signatures give equal keys, and building one costs a
 * time parse and a few copies instead of escaping and formatting. */
static int route_sig(const sk_router *r, const sk_field *f, sk_memo *m,
                     skippr_buf *sig)
{
    size_t which = 0, pwhich = 0;
    const sk_field *ns = first_present(f, r->ns_slot, r->n_ns, &which);
    const sk_field *pv = r->n_part ? first_present(f, r->part_slot,
                                                  r->n_part, &pwhich)
                                   : NULL;
    /* One reservation, then plain copies: 4 + ns + 5 + partition + 6. */
    size_t need = 15 + (ns ? ns->n : 0) + (pv ? pv->n : 0);
    int rc = skippr_buf_reserve(sig, need);
    if (rc)
        return rc;
    uint8_t *o = sig->data + sig->len;
    sk_put_u32(o, ns ? (uint32_t)ns->n : UINT32_MAX);
    o += 4;
    if (ns) {
        memcpy(o, ns->p, ns->n);
        o += ns->n;
    }
    if (r->n_part) {
        /* which path matched changes the key only with per_path */
        o[0] = !pv ? 0xFF : r->per_path ? (uint8_t)pwhich : 0;
        sk_put_u32(o + 1, pv ? (uint32_t)pv->n : 0);
        o += 5;
        if (pv) {
            memcpy(o, pv->p, pv->n);
            o += pv->n;
        }
    }
    sig->len = (size_t)(o - sig->data);
    if (r->unit == SK_TIME_UNIT_NONE)
        return SKIPPR_OK;
    int64_t t = 0;
    int ok = pick_time(r, f, &t);
    uint8_t tb[8] = {0};
    if (ok && (t < -(INT64_C(1) << 55) || t > (INT64_C(1) << 55)))
        ok = 0; /* far outside years 0-9999 */
    if (ok) {
        /* One civil conversion per distinct day (a small direct-mapped
         * cache: archives mix a few days). */
        int64_t day = t >= 0 ? t / 86400 : -((-t + 86399) / 86400);
        sk_memo_day *d = &m->days[(uint64_t)day % SK_MEMO_DAYS];
        if (!d->known || day != d->day) {
            sk_time_to_civil(day * 86400, &d->civil);
            d->day = day;
            d->known = 1;
        }
        const sk_civil *c = &d->civil;
        ok = c->year >= 0 && c->year <= 9999;
        tb[0] = (uint8_t)ok;
        tb[1] = (uint8_t)(c->year >> 8);
        tb[2] = (uint8_t)c->year;
        if (r->unit >= SK_TIME_UNIT_MONTH)
            tb[3] = (uint8_t)c->month;
        if (r->unit >= SK_TIME_UNIT_DAY)
            tb[4] = (uint8_t)c->day;
        if (r->unit >= SK_TIME_UNIT_HOUR)
            tb[5] = (uint8_t)((t - day * 86400) / 3600);
        if (!ok)
            memset(tb, 0, sizeof tb);
    }
    memcpy(sig->data + sig->len, tb, 6);
    sig->len += 6;
    return SKIPPR_OK;
}

void sk_memo_init(sk_memo *m, size_t max_bytes)
{
    memset(m, 0, sizeof *m);
    skippr_buf_init(&m->sigs, max_bytes);
    skippr_buf_init(&m->keys, max_bytes);
}

void sk_memo_reset(sk_memo *m)
{
    if (m->n)
        memset(m->tab, 0, m->tab_cap * sizeof *m->tab);
    m->n = 0;
    skippr_buf_reset(&m->sigs);
    skippr_buf_reset(&m->keys);
}

void sk_memo_free(sk_memo *m)
{
    sk_free(m->keys_at);
    sk_free(m->tab);
    skippr_buf_free(&m->sigs);
    skippr_buf_free(&m->keys);
    memset(m, 0, sizeof *m);
}

static int memo_grow(sk_memo *m)
{
    size_t cap = m->tab_cap ? m->tab_cap * 2 : 256;
    uint32_t *t = sk_calloc(cap, sizeof *t);
    if (!t)
        return SKIPPR_NOMEM;
    for (size_t i = 0; i < m->n; i++) {
        size_t h = (size_t)m->keys_at[i].sig_hash & (cap - 1);
        while (t[h])
            h = (h + 1) & (cap - 1);
        t[h] = (uint32_t)i + 1;
    }
    sk_free(m->tab);
    m->tab = t;
    m->tab_cap = cap;
    return SKIPPR_OK;
}

int sk_route_memo(const sk_router *r, sk_memo *m, const uint8_t *buf,
                  const sk_json_value *vals, skippr_buf *scratch, uint32_t *id)
{
    sk_field f[SK_PEEK_MAX_PATHS];
    int rc = sk_route_json_fields(r, buf, vals, scratch, f);
    return rc ? rc : sk_route_memo_fields(r, m, f, id);
}

int sk_route_memo_fields(const sk_router *r, sk_memo *m, const sk_field *f,
                         uint32_t *id)
{
    size_t s0 = m->sigs.len;
    int rc = route_sig(r, f, m, &m->sigs);
    if (rc)
        return rc;
    const uint8_t *sig = m->sigs.data + s0;
    size_t slen = m->sigs.len - s0;
    uint64_t sh = sk_hash_fast(sig, slen);
    /* At most a quarter full: most lookups hit on the first probe, which
     * keeps the probe loop's branch predictable. */
    if ((m->n + 1) * 4 > m->tab_cap && (rc = memo_grow(m)))
        return rc;
    size_t h = (size_t)sh & (m->tab_cap - 1);
    while (m->tab[h]) {
        const sk_memo_key *k = &m->keys_at[m->tab[h] - 1];
        if (k->sig_hash == sh && k->sig_len == slen &&
            memcmp(m->sigs.data + k->sig_off, sig, slen) == 0) {
            m->sigs.len = s0;
            *id = m->tab[h] - 1;
            return SKIPPR_OK;
        }
        h = (h + 1) & (m->tab_cap - 1);
    }
    if (m->n >= UINT32_MAX - 1 ||
        skippr_array_grow(&m->keys_at, m->n, &m->keys_cap, sizeof *m->keys_at,
                          64))
        return SKIPPR_NOMEM;
    size_t k0 = m->keys.len;
    if ((rc = sk_route_key(r, f, &m->keys)))
        return rc;
    sk_memo_key *k = &m->keys_at[m->n];
    k->sig_hash = sh;
    k->sig_off = s0;
    k->sig_len = slen;
    k->key_off = k0;
    k->key_len = m->keys.len - k0;
    k->key_hash = sk_hash_fast(m->keys.data + k0, k->key_len);
    m->tab[h] = (uint32_t)m->n + 1;
    *id = (uint32_t)m->n++;
    return SKIPPR_OK;
}
