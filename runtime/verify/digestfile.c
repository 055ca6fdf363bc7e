/* Both sides' digests by partition as bytes: see digestfile.h. */
#include "verify/digestfile.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "base/common.h"
#include "base/crc32c.h"
#include "base/endian.h"

#define MAGIC_LEN 8

/* The partitions file being made: its bytes, its entries. */
typedef struct writer {
    skippr_buf *out;
    uint64_t n;
} writer;

/* Append a partition's entry to the file's bytes (sk_partitions_fn). */
static int put_entry(const char *key, size_t klen, const sk_digest *a,
                     const sk_digest *b, void *ud)
{
    writer *w = ud;
    skippr_buf *out = w->out;
    uint8_t head[5];
    if (klen > UINT32_MAX)
        return SKIPPR_INVAL;
    sk_put_u32(head, (uint32_t)klen);
    head[4] = (uint8_t)((a ? 1 : 0) | (b ? 2 : 0));
    int rc = skippr_buf_append(out, head, sizeof head);
    if (!rc)
        rc = skippr_buf_append(out, key, klen);
    const sk_digest *d[2] = {a, b};
    for (int s = 0; !rc && s < 2; s++) {
        if (!d[s])
            continue;
        uint8_t v[32];
        sk_put_u64(v, d[s]->records);
        sk_put_u64(v + 8, d[s]->bytes);
        sk_put_u64(v + 16, d[s]->lo);
        sk_put_u64(v + 24, d[s]->hi);
        rc = skippr_buf_append(out, v, sizeof v);
    }
    w->n++;
    return rc ? SKIPPR_NOMEM : SKIPPR_OK;
}

/* Pair a and b, either of which may be NULL (an empty set). */
static int pair(const sk_partitions *a, const sk_partitions *b,
                sk_partitions_fn fn, void *ud)
{
    sk_partitions *none = a && b ? NULL : sk_partitions_new();
    if (!(a && b) && !none)
        return SKIPPR_NOMEM;
    int rc = sk_partitions_pair(a ? a : none, b ? b : none, fn, ud);
    sk_partitions_free(none);
    return rc;
}

int sk_digestfile_encode(const char *magic, const uint64_t *head,
                         size_t nhead, const sk_partitions *src,
                         const sk_partitions *dst, skippr_buf *out)
{
    skippr_buf_init(out, SK_DIGESTFILE_MAX);
    uint8_t v[8];
    if (skippr_buf_append(out, magic, MAGIC_LEN))
        return SKIPPR_NOMEM;
    for (size_t i = 0; i <= nhead; i++) {
        sk_put_u64(v, i < nhead ? head[i] : 0); /* entries: below */
        if (skippr_buf_append(out, v, sizeof v))
            return SKIPPR_NOMEM;
    }
    writer w = {.out = out};
    int rc = pair(src, dst, put_entry, &w);
    if (rc)
        return rc;
    sk_put_u64(out->data + MAGIC_LEN + 8 * nhead, w.n);
    uint8_t crc[4];
    sk_put_u32(crc, sk_crc32c(0, out->data + MAGIC_LEN,
                              out->len - MAGIC_LEN));
    return skippr_buf_append(out, crc, sizeof crc) ? SKIPPR_NOMEM : SKIPPR_OK;
}

/* One side's digest at p (32 bytes) into the partition key of set. */
static int take(sk_partitions *set, const char *key, size_t klen,
                const uint8_t *p)
{
    sk_digest *d = sk_partitions_at(set, key, klen);
    if (!d)
        return SKIPPR_NOMEM;
    sk_digest o = {.records = sk_get_u64(p), .bytes = sk_get_u64(p + 8),
                   .lo = sk_get_u64(p + 16), .hi = sk_get_u64(p + 24)};
    sk_digest_merge(d, &o);
    return SKIPPR_OK;
}

int sk_digestfile_decode(const char *magic, const uint8_t *p, size_t n,
                         uint64_t *head, size_t nhead, sk_partitions *src,
                         sk_partitions *dst)
{
    size_t fixed = MAGIC_LEN + 8 * (nhead + 1);
    if (n < fixed + 4 || memcmp(p, magic, MAGIC_LEN) ||
        sk_get_u32(p + n - 4) != sk_crc32c(0, p + MAGIC_LEN,
                                            n - 4 - MAGIC_LEN))
        return SKIPPR_CORRUPT;
    for (size_t i = 0; i < nhead; i++)
        head[i] = sk_get_u64(p + MAGIC_LEN + 8 * i);
    uint64_t entries = sk_get_u64(p + fixed - 8);
    size_t at = fixed, end = n - 4;
    sk_partitions *side[2] = {src, dst};
    int rc = SKIPPR_OK;
    for (uint64_t i = 0; !rc && i < entries; i++) {
        if (end - at < 5)
            return SKIPPR_CORRUPT;
        size_t klen = sk_get_u32(p + at);
        uint8_t sides = p[at + 4];
        at += 5;
        if (end - at < klen)
            return SKIPPR_CORRUPT;
        const char *key = (const char *)p + at;
        at += klen;
        for (int s = 0; !rc && s < 2; s++) {
            if (!(sides & (1u << s)))
                continue;
            if (end - at < 32)
                return SKIPPR_CORRUPT;
            rc = take(side[s], key, klen, p + at);
            at += 32;
        }
    }
    return rc ? rc : at == end ? SKIPPR_OK : SKIPPR_CORRUPT;
}


int sk_digestfile_read(const char *path, skippr_buf *out)
{
    skippr_buf_init(out, SK_DIGESTFILE_MAX);
    FILE *f = fopen(path, "rb");
    if (!f)
        return errno == ENOENT ? SKIPPR_NOENT : SKIPPR_IO;
    uint8_t chunk[65536];
    size_t got;
    int rc = SKIPPR_OK;
    while (!rc && (got = fread(chunk, 1, sizeof chunk, f)) > 0)
        rc = skippr_buf_append(out, chunk, got) ? SKIPPR_NOMEM : SKIPPR_OK;
    if (!rc && ferror(f))
        rc = SKIPPR_IO;
    fclose(f);
    return rc;
}
