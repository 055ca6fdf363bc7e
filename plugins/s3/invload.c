/* S3 Inventory: reading the report (see inventory.c). The manifest, then
 * each gzip'd CSV file as a stream, one line at a time; rows of the source
 * bucket under s3_prefix that are the latest version and not a delete
 * marker become records, sorted in memory and spilled as sorted chunk
 * files past inv->chunk bytes. */
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <zlib.h>

#include "invrec.h"
#include "read.h"
#include "request.h"

/* Read all of s3://bucket/key through the source's reader (ranged GETs),
 * as another bucket: a copy of c naming it. fn gets the bytes as they
 * come; a nonzero return stops. */
static int read_object(s3_ctx *c, const char *bucket, const char *key,
                       int (*fn)(void *ud, const char *p, size_t n),
                       void *ud)
{
    s3_ctx other = *c;
    other.bucket = bucket;
    other.pf = NULL; /* not fetched ahead */
    /* Its size first: the reader's ranged GETs stop there. */
    resp r = {0};
    int rc = s3_request_retried(&other, "head", key, NULL, "HEAD", key, NULL,
                                0, NULL, 0, NULL, 0, &r);
    skippr_buf_free(&r.body);
    if (rc)
        return rc;
    skippr_unit u = {key, "", strtoll(r.content_length, NULL, 10), 0};
    void *st = NULL;
    rc = src_open(&other, &u, 0, &st);
    char *b = rc ? NULL : malloc(1 << 20);
    if (!rc && !b)
        rc = SKIPPR_NOMEM;
    for (;;) {
        size_t n = 0;
        if (rc || (rc = src_read(&other, st, b, 1 << 20, &n)) || n == 0)
            break;
        if ((rc = fn(ud, b, n)))
            break;
    }
    free(b);
    if (st)
        src_close(&other, st);
    return rc;
}

static int to_buf(void *ud, const char *p, size_t n)
{
    return skippr_buf_append(ud, p, n);
}

/* Decode %XX and '+' (the report URL-encodes keys). */
static size_t url_decode(const char *s, size_t n, char *out, size_t cap)
{
    size_t k = 0;
    for (size_t i = 0; i < n && k + 1 < cap; i++) {
        if (s[i] == '%' && i + 2 < n) {
            char hx[3] = {s[i + 1], s[i + 2], 0};
            char *end;
            long v = strtol(hx, &end, 16);
            if (*end == '\0') {
                out[k++] = (char)v;
                i += 2;
                continue;
            }
        }
        out[k++] = s[i] == '+' ? ' ' : s[i];
    }
    out[k] = '\0';
    return k;
}

/* One CSV row's quoted fields ("a","b",...; "" inside a field is a quote)
 * into f[0..n), in place. Returns the count. */
static int split_row(char *line, char **f, int max)
{
    int n = 0;
    char *p = line;
    while (*p && n < max) {
        if (*p != '"') { /* an unquoted field (Size is, in some reports) */
            f[n++] = p;
            char *comma = strchr(p, ',');
            if (!comma)
                break;
            *comma = '\0';
            p = comma + 1;
            continue;
        }
        char *w = ++p;
        f[n++] = w;
        while (*p) {
            if (*p == '"' && p[1] == '"') {
                *w++ = '"';
                p += 2;
            } else if (*p == '"') {
                p++;
                break;
            } else {
                *w++ = *p++;
            }
        }
        *w = '\0';
        if (*p == ',')
            p++;
    }
    return n;
}

typedef struct loader {
    s3_ctx *c;
    s3_inventory *inv;
    int col[6]; /* Bucket, Key, Size, LastModifiedDate, ETag, IsDeleteMarker */
    int latest; /* IsLatest column, or -1 */
    z_stream z;
    char line[INV_LINE_MAX];
    size_t ll;
    int nspill, rc;
    uint64_t rows, kept;
} loader;

static int64_t parse_time(const char *s)
{
    struct tm tm;
    memset(&tm, 0, sizeof tm);
    if (sscanf(s, "%d-%d-%dT%d:%d:%d", &tm.tm_year, &tm.tm_mon, &tm.tm_mday,
               &tm.tm_hour, &tm.tm_min, &tm.tm_sec) != 6)
        return 0;
    tm.tm_year -= 1900;
    tm.tm_mon -= 1;
    return (int64_t)timegm(&tm);
}

/* Sort the records held in memory and write them as a chunk file. */
static int spill(loader *L)
{
    s3_inventory *inv = L->inv;
    if (!inv->tmpdir[0]) {
        const char *t = getenv("TMPDIR");
        snprintf(inv->tmpdir, sizeof inv->tmpdir, "%s/skippr-inventory-XXXXXX",
                 t && *t ? t : "/tmp");
        if (!mkdtemp(inv->tmpdir)) {
            LOG(L->c, SKIPPR_LOG_ERROR, "inventory: cannot make a folder in "
                "%s for sorting: %s", t && *t ? t : "/tmp", strerror(errno));
            inv->tmpdir[0] = '\0';
            return SKIPPR_IO;
        }
    }
    qsort_r(inv->order, inv->nmem, sizeof *inv->order, cmp_off, inv->mem);
    char path[320];
    snprintf(path, sizeof path, "%s/chunk-%06d", inv->tmpdir, L->nspill++);
    FILE *f = fopen(path, "wb");
    int ok = f != NULL;
    for (size_t i = 0; ok && i < inv->nmem; i++) {
        const uint8_t *r = (const uint8_t *)inv->mem + inv->order[i];
        ok = fwrite(r, 1, rec_len(r), f) == rec_len(r);
    }
    if (f && fclose(f) != 0)
        ok = 0;
    if (!ok) {
        LOG(L->c, SKIPPR_LOG_ERROR, "inventory: writing %s: %s", path,
            strerror(errno));
        return SKIPPR_IO;
    }
    inv->mem_len = inv->nmem = 0;
    return SKIPPR_OK;
}

/* One row of a report file. */
static int take_row(loader *L, char *line)
{
    s3_ctx *c = L->c;
    char *f[INV_COLS];
    int n = split_row(line, f, INV_COLS);
    L->rows++;
    for (int i = 0; i < 5; i++)
        if (L->col[i] >= n)
            return SKIPPR_OK; /* a short row: not an object */
    if (strcmp(f[L->col[0]], c->bucket) != 0)
        return SKIPPR_OK;
    if ((L->col[5] >= 0 && L->col[5] < n && strcmp(f[L->col[5]], "true") == 0) ||
        (L->latest >= 0 && L->latest < n && strcmp(f[L->latest], "false") == 0))
        return SKIPPR_OK;
    char key[2048];
    const char *raw = f[L->col[1]];
    size_t kl = url_decode(raw, strlen(raw), key, sizeof key);
    const char *pre = c->prefix ? c->prefix : "";
    if (kl == 0 || strncmp(key, pre, strlen(pre)) != 0)
        return SKIPPR_OK;
    const char *etag = f[L->col[4]];
    size_t el = strlen(etag);
    if (el > 255)
        return SKIPPR_OK;
    int64_t size = strtoll(f[L->col[2]], NULL, 10);
    int64_t mod = parse_time(f[L->col[3]]);
    s3_inventory *inv = L->inv;
    size_t need = 2 + kl + 1 + el + 16;
    if (inv->mem_len + need > inv->chunk) {
        int rc = spill(L);
        if (rc)
            return rc;
    }
    if (!inv->mem && !(inv->mem = malloc(inv->chunk)))
        return SKIPPR_NOMEM;
    size_t cap = inv->nmem;
    if (skippr_array_grow(&inv->order, inv->nmem, &cap, sizeof *inv->order,
                          4096))
        return SKIPPR_NOMEM;
    uint8_t *r = (uint8_t *)inv->mem + inv->mem_len;
    r[0] = (uint8_t)kl;
    r[1] = (uint8_t)(kl >> 8);
    memcpy(r + 2, key, kl);
    r[2 + kl] = (uint8_t)el;
    memcpy(r + 3 + kl, etag, el);
    uint8_t *q = r + 3 + kl + el;
    for (int i = 0; i < 8; i++) {
        q[i] = (uint8_t)((uint64_t)size >> (8 * i));
        q[8 + i] = (uint8_t)((uint64_t)mod >> (8 * i));
    }
    inv->order[inv->nmem++] = inv->mem_len;
    inv->mem_len += need;
    L->kept++;
    return SKIPPR_OK;
}

/* gzip'd bytes of a report file: inflated, cut into lines. */
static int take_gz(void *ud, const char *p, size_t n)
{
    loader *L = ud;
    char out[65536];
    L->z.next_in = (Bytef *)p;
    L->z.avail_in = (uInt)n;
    while (L->z.avail_in > 0) {
        L->z.next_out = (Bytef *)out;
        L->z.avail_out = sizeof out;
        int zr = inflate(&L->z, Z_NO_FLUSH);
        if (zr == Z_STREAM_END && L->z.avail_in > 0)
            zr = inflateReset(&L->z); /* concatenated gzip members */
        if (zr != Z_OK && zr != Z_STREAM_END) {
            LOG(L->c, SKIPPR_LOG_ERROR, "inventory: a report file is not "
                "valid gzip (%s)", L->z.msg ? L->z.msg : "inflate failed");
            return SKIPPR_FATAL;
        }
        size_t got = sizeof out - L->z.avail_out;
        for (size_t i = 0; i < got; i++) {
            if (out[i] == '\n') {
                L->line[L->ll] = '\0';
                if (L->ll && L->line[L->ll - 1] == '\r')
                    L->line[L->ll - 1] = '\0';
                int rc = L->ll ? take_row(L, L->line) : SKIPPR_OK;
                L->ll = 0;
                if (rc)
                    return rc;
            } else if (L->ll + 1 < sizeof L->line) {
                L->line[L->ll++] = out[i];
            }
        }
        if (zr == Z_STREAM_END && L->z.avail_in == 0)
            break;
    }
    return SKIPPR_OK;
}

/* Column indexes from fileSchema ("Bucket, Key, Size, ..."). */
static int schema_cols(loader *L, const char *schema)
{
    static const char *want[6] = {"Bucket", "Key", "Size",
                                  "LastModifiedDate", "ETag",
                                  "IsDeleteMarker"};
    for (int i = 0; i < 6; i++)
        L->col[i] = -1;
    L->latest = -1;
    int idx = 0;
    const char *p = schema;
    while (*p) {
        while (*p == ' ' || *p == ',')
            p++;
        const char *s = p;
        while (*p && *p != ',')
            p++;
        const char *e = p;
        while (e > s && e[-1] == ' ')
            e--;
        for (int i = 0; i < 6; i++)
            if ((size_t)(e - s) == strlen(want[i]) &&
                strncmp(s, want[i], (size_t)(e - s)) == 0)
                L->col[i] = idx;
        if ((size_t)(e - s) == 8 && strncmp(s, "IsLatest", 8) == 0)
            L->latest = idx;
        if (e > s)
            idx++;
    }
    for (int i = 0; i < 5; i++)
        if (L->col[i] < 0 || L->col[i] >= INV_COLS) {
            LOG(L->c, SKIPPR_LOG_ERROR, "inventory: fileSchema has no %s "
                "column: configure the report with %s", want[i],
                "Size, LastModifiedDate and ETag");
            return SKIPPR_FATAL;
        }
    return SKIPPR_OK;
}

/* Split "s3://bucket/key" into bucket and key (in buf). */
static int split_url(const char *url, char *buf, size_t cap,
                     const char **bucket, const char **key)
{
    if (strncmp(url, "s3://", 5) != 0 || strlen(url + 5) >= cap)
        return -1;
    strcpy(buf, url + 5);
    char *slash = strchr(buf, '/');
    if (!slash || slash == buf || !slash[1])
        return -1;
    *slash = '\0';
    *bucket = buf;
    *key = slash + 1;
    return 0;
}

/* Read the manifest and every report file; records sorted in memory or in
 * chunk files. */
/* The manifest at s3://mb/mk: *j (the caller json_decrefs it) and its
 * schema and files, checked (CSV only). */
static int read_manifest(s3_ctx *c, const char *mb, const char *mk,
                         json_t **j, const char **schema, json_t **files)
{
    skippr_buf m = {.max = INV_MANIFEST_MAX};
    int rc = read_object(c, mb, mk, to_buf, &m);
    if (rc) {
        skippr_buf_free(&m);
        return rc;
    }
    json_error_t jerr;
    *j = json_loadb(skippr_buf_cstr(&m), m.len, 0, &jerr);
    skippr_buf_free(&m);
    const char *fmt =
        *j ? json_string_value(json_object_get(*j, "fileFormat")) : NULL;
    *schema = *j ? json_string_value(json_object_get(*j, "fileSchema")) : NULL;
    *files = *j ? json_object_get(*j, "files") : NULL;
    if (!*j || !fmt || !*schema || !json_is_array(*files)) {
        LOG(c, SKIPPR_LOG_ERROR, "inventory manifest s3://%s/%s: %s", mb, mk,
            *j ? "no fileFormat, fileSchema or files" : jerr.text);
        return SKIPPR_FATAL;
    }
    if (strcmp(fmt, "CSV") != 0) {
        LOG(c, SKIPPR_LOG_ERROR, "inventory manifest s3://%s/%s: fileFormat "
            "%s is not read; skippr reads CSV reports (Parquet and ORC need "
            "a reader it does not bring): configure the inventory as CSV",
            mb, mk, fmt);
        return SKIPPR_FATAL;
    }
    const char *src = json_string_value(json_object_get(*j, "sourceBucket"));
    if (src && strcmp(src, c->bucket) != 0)
        LOG(c, SKIPPR_LOG_WARN, "inventory manifest s3://%s/%s is of bucket "
            "%s, not %s: only its rows of %s are used", mb, mk, src,
            c->bucket, c->bucket);
    return SKIPPR_OK;
}

/* Every report file the manifest lists (in bucket mb), a row at a time. */
static int read_files(loader *L, const char *mb, json_t *files)
{
    int rc = SKIPPR_OK;
    size_t nf = json_array_size(files);
    for (size_t i = 0; !rc && i < nf; i++) {
        const char *fk =
            json_string_value(json_object_get(json_array_get(files, i), "key"));
        if (!fk) {
            LOG(L->c, SKIPPR_LOG_ERROR, "inventory manifest: files[%zu] has "
                "no key", i);
            return SKIPPR_FATAL;
        }
        memset(&L->z, 0, sizeof L->z);
        if (inflateInit2(&L->z, 15 + 32) != Z_OK)
            return SKIPPR_NOMEM;
        L->ll = 0;
        rc = read_object(L->c, mb, fk, take_gz, L);
        if (!rc && L->ll) { /* a last line without its newline */
            L->line[L->ll] = '\0';
            rc = take_row(L, L->line);
        }
        inflateEnd(&L->z);
    }
    return rc;
}

/* The nspill sorted chunk files, each behind a cursor of inv->cur. */
static int open_chunks(s3_inventory *inv, int nspill)
{
    inv->cur = calloc((size_t)nspill, sizeof *inv->cur);
    if (!inv->cur)
        return SKIPPR_NOMEM;
    inv->ncur = (size_t)nspill;
    for (int i = 0; i < nspill; i++) {
        char path[320];
        snprintf(path, sizeof path, "%s/chunk-%06d", inv->tmpdir, i);
        if (!(inv->cur[i].f = fopen(path, "rb")))
            return SKIPPR_IO;
    }
    return SKIPPR_OK;
}

int s3_inv_load(s3_ctx *c, s3_inventory *inv)
{
    char ubuf[2048];
    const char *mb, *mk, *schema;
    if (split_url(c->inventory_manifest, ubuf, sizeof ubuf, &mb, &mk)) {
        LOG(c, SKIPPR_LOG_ERROR, "inventory_manifest '%s': give "
            "s3://BUCKET/KEY of the report's manifest.json",
            c->inventory_manifest);
        return SKIPPR_INVAL;
    }
    json_t *j = NULL, *files;
    int rc = read_manifest(c, mb, mk, &j, &schema, &files);
    loader *L = rc ? NULL : calloc(1, sizeof *L);
    if (!rc && !L)
        rc = SKIPPR_NOMEM;
    if (!rc) {
        L->c = c;
        L->inv = inv;
        if (!(rc = schema_cols(L, schema)))
            rc = read_files(L, mb, files);
    }
    if (!rc && inv->tmpdir[0] && inv->nmem)
        rc = spill(L); /* the rest joins the sorted chunks on disk */
    if (!rc && !inv->tmpdir[0] && inv->nmem)
        qsort_r(inv->order, inv->nmem, sizeof *inv->order, cmp_off, inv->mem);
    if (!rc)
        LOG(c, SKIPPR_LOG_INFO, "inventory s3://%s/%s: %zu files, %llu rows, "
            "%llu objects of s3://%s/%s%s", mb, mk, json_array_size(files),
            (unsigned long long)L->rows, (unsigned long long)L->kept,
            c->bucket, c->prefix ? c->prefix : "",
            L->nspill ? " (sorted on disk)" : "");
    int nspill = L ? L->nspill : 0;
    free(L);
    json_decref(j);
    return !rc && nspill ? open_chunks(inv, nspill) : rc;
}

