#include "format/decompress.h"

#include <zlib.h>
#include <zstd.h>

#include "base/common.h"

struct sk_decomp {
    sk_comp kind;
    z_stream z;
    int z_ready;
    int member_done; /* gzip: last member ended; more input starts anew */
    ZSTD_DStream *zs;
    int zs_mid_frame; /* zstd: inside a frame */
};

sk_comp sk_comp_detect(const uint8_t *p, size_t n)
{
    if (n >= 2 && p[0] == 0x1f && p[1] == 0x8b)
        return SK_COMP_GZIP;
    if (n >= 4 && p[0] == 0x28 && p[1] == 0xb5 && p[2] == 0x2f &&
        p[3] == 0xfd)
        return SK_COMP_ZSTD;
    return SK_COMP_NONE;
}

const char *sk_comp_name(sk_comp c)
{
    return c == SK_COMP_GZIP ? "gzip" : c == SK_COMP_ZSTD ? "zstd" : "none";
}

sk_decomp *sk_decomp_new(sk_comp kind)
{
    sk_decomp *made = NULL, *d = sk_calloc(1, sizeof *d);
    if (!d)
        goto fail;
    d->kind = kind;
    if (kind == SK_COMP_GZIP) {
        if (inflateInit2(&d->z, 16 + MAX_WBITS) != Z_OK)
            goto fail;
        d->z_ready = 1;
    } else if (kind == SK_COMP_ZSTD) {
        d->zs = ZSTD_createDStream();
        if (!d->zs || ZSTD_isError(ZSTD_initDStream(d->zs)))
            goto fail;
    }
    made = d;
    d = NULL; /* handed to the caller */
fail:
    sk_decomp_free(d);
    return made;
}

void sk_decomp_free(sk_decomp *d)
{
    if (!d)
        return;
    if (d->z_ready)
        inflateEnd(&d->z);
    if (d->zs)
        ZSTD_freeDStream(d->zs);
    sk_free(d);
}

static int run_gzip(sk_decomp *d, const uint8_t *in, size_t in_len,
                    size_t *consumed, uint8_t *out, size_t out_cap,
                    size_t *produced, int at_eof, const char **why)
{
    size_t used = 0, made = 0;
    while (made < out_cap) {
        if (d->member_done) {
            if (used == in_len)
                break;
            /* Another member must start with the magic bytes. */
            if (in[used] != 0x1f) {
                *why = "garbage after gzip member";
                return SKIPPR_CORRUPT;
            }
            inflateReset(&d->z);
            d->member_done = 0;
        }
        d->z.next_in = (Bytef *)(in + used);
        d->z.avail_in = (uInt)SK_MIN(in_len - used, (size_t)UINT32_MAX);
        d->z.next_out = out + made;
        d->z.avail_out = (uInt)SK_MIN(out_cap - made, (size_t)UINT32_MAX);
        uInt before_in = d->z.avail_in, before_out = d->z.avail_out;
        int rc = inflate(&d->z, Z_NO_FLUSH);
        used += before_in - d->z.avail_in;
        made += before_out - d->z.avail_out;
        if (rc == Z_STREAM_END) {
            d->member_done = 1;
            continue;
        }
        if (rc == Z_BUF_ERROR || (rc == Z_OK && before_in == d->z.avail_in &&
                                  before_out == d->z.avail_out))
            break; /* needs more input or output room */
        if (rc != Z_OK) {
            *why = rc == Z_DATA_ERROR ? "corrupt gzip data" : "gzip error";
            return SKIPPR_CORRUPT;
        }
    }
    *consumed = used;
    *produced = made;
    if (at_eof && in_len == 0 && made == 0 && !d->member_done) {
        *why = "truncated gzip stream";
        return SKIPPR_CORRUPT;
    }
    return SKIPPR_OK;
}

static int run_zstd(sk_decomp *d, const uint8_t *in, size_t in_len,
                    size_t *consumed, uint8_t *out, size_t out_cap,
                    size_t *produced, int at_eof, const char **why)
{
    ZSTD_inBuffer ib = {in, in_len, 0};
    ZSTD_outBuffer ob = {out, out_cap, 0};
    while (ob.pos < ob.size) {
        size_t before_in = ib.pos, before_out = ob.pos;
        size_t rc = ZSTD_decompressStream(d->zs, &ob, &ib);
        if (ZSTD_isError(rc)) {
            *why = "corrupt zstd data";
            return SKIPPR_CORRUPT;
        }
        if (ib.pos == before_in && ob.pos == before_out)
            break; /* no progress: rc only hints at the next frame */
        d->zs_mid_frame = rc != 0;
    }
    *consumed = ib.pos;
    *produced = ob.pos;
    if (at_eof && in_len == 0 && ob.pos == 0 && d->zs_mid_frame) {
        *why = "truncated zstd stream";
        return SKIPPR_CORRUPT;
    }
    return SKIPPR_OK;
}

int sk_decomp_run(sk_decomp *d, const uint8_t *in, size_t in_len,
                  size_t *consumed, uint8_t *out, size_t out_cap,
                  size_t *produced, int at_eof, const char **why)
{
    *consumed = *produced = 0;
    switch (d->kind) {
    case SK_COMP_GZIP:
        return run_gzip(d, in, in_len, consumed, out, out_cap, produced,
                        at_eof, why);
    case SK_COMP_ZSTD:
        return run_zstd(d, in, in_len, consumed, out, out_cap, produced,
                        at_eof, why);
    default: {
        size_t n = SK_MIN(in_len, out_cap);
        memcpy(out, in, n);
        *consumed = *produced = n;
        return SKIPPR_OK;
    }
    }
}
