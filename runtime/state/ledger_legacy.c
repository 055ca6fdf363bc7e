/* The ledger file of versions before sorted runs ("SKLEDG01"): its
 * header read and its records streamed into a run, which ledger.c's
 * conversion at open makes the first run. */
#include "state/ledger_legacy.h"
#include "state/unitrec_impl.h"

#include <errno.h>
#include <string.h>

#include "base/crc32c.h"

#define LEGACY_MAGIC "SKLEDG01"
#define LEGACY_MAX_PAYLOAD (2u * 65536u + 64u)

static int legacy_bad(const char *path)
{
    sk_error("ledger %s: damaged; the file is not converted", path);
    return SKIPPR_CORRUPT;
}

int sk_legacy_open(const char *path, FILE **out, uint64_t *next_slice,
                   uint64_t *count)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return errno == ENOENT ? SKIPPR_NOENT : legacy_bad(path);
    uint8_t h[28];
    if (fread(h, 1, sizeof h, f) != sizeof h ||
        memcmp(h, LEGACY_MAGIC, 8) != 0 ||
        sk_crc32c(0, h, 24) != sk_get_u32(h + 24)) {
        fclose(f);
        return legacy_bad(path);
    }
    *next_slice = sk_get_u64(h + 8);
    *count = sk_get_u64(h + 16);
    *out = f;
    return SKIPPR_OK;
}

/* Stream the records of an "SKLEDG01" file (u32 length, payload, u32
 * CRC32C; payload u16 id length, id, u16 version length, version, i64
 * size, i64 offset, u32 flags) into w. */
int sk_legacy_copy(FILE *f, const char *path, uint64_t count,
                   sk_run_writer *w)
{
    uint8_t *p = sk_malloc(LEGACY_MAX_PAYLOAD + 4);
    if (!p)
        return SKIPPR_NOMEM;
    int rc = SKIPPR_OK;
    for (uint64_t i = 0; i < count && !rc; i++) {
        uint8_t lb[4];
        if (fread(lb, 1, 4, f) != 4) {
            rc = legacy_bad(path);
            break;
        }
        uint32_t n = sk_get_u32(lb);
        if (n < 24 || n > LEGACY_MAX_PAYLOAD ||
            fread(p, 1, (size_t)n + 4, f) != n + 4 ||
            sk_crc32c(0, p, n) != sk_get_u32(p + n)) {
            rc = legacy_bad(path);
            break;
        }
        size_t il = sk_get_u16(p);
        size_t vl = n >= 4 + il ? sk_get_u16(p + 2 + il) : SIZE_MAX;
        if (vl == SIZE_MAX || n != 4 + il + vl + 20) {
            rc = legacy_bad(path);
            break;
        }
        char *id = sk_strndup((const char *)p + 2, il);
        char *ver = sk_strndup((const char *)p + 4 + il, vl);
        const uint8_t *q = p + 4 + il + vl;
        sk_unit_rec r = {id, ver, (int64_t)sk_get_u64(q),
                         (int64_t)sk_get_u64(q + 8), sk_get_u32(q + 16), 0};
        rc = id && ver ? sk_run_writer_add(w, &r) : SKIPPR_NOMEM;
        sk_free(id);
        sk_free(ver);
    }
    sk_free(p);
    return rc;
}
