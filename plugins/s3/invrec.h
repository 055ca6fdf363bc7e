/* S3 Inventory's private parts, shared by inventory.c (the listing) and
 * invload.c (reading the report): the sort's state and its records. */
#ifndef SK_S3_INVREC_H
#define SK_S3_INVREC_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "ctx.h"

/* As inventory.h names it (C11 allows the typedef twice). */
typedef struct s3_inventory s3_inventory;

#define INV_CHUNK (64u << 20)   /* record bytes sorted in memory at once */
#define INV_MANIFEST_MAX (64u << 20)
#define INV_LINE_MAX (64u << 10)
#define INV_COLS 16

/* A record: u16 key length, key, u8 ETag length, ETag, i64 size, i64
 * Last-Modified; in memory and in chunk files alike. */
typedef struct inv_cursor {
    FILE *f;
    uint8_t rec[2 + 65535 + 1 + 255 + 16];
    int valid;
} inv_cursor;

struct s3_inventory {
    size_t chunk; /* record bytes sorted in memory at once */
    uint8_t out[sizeof(((inv_cursor *)0)->rec)]; /* next_rec's copy */
    char *mem;             /* the last chunk, sorted, if it never spilled */
    size_t mem_len;
    size_t *order;         /* offsets of mem's records, sorted */
    size_t nmem, imem;
    char tmpdir[256];      /* spilled chunks, "" if none */
    inv_cursor *cur;
    size_t ncur;
    char last[2048];       /* the last key given, for a resume */
    int started, have_last;
};

/* Records in memory and in chunk files. */

static inline size_t rec_len(const uint8_t *r)
{
    size_t kl = (size_t)r[0] | (size_t)r[1] << 8;
    return 2 + kl + 1 + r[2 + kl] + 16;
}

static inline int rec_cmp_key(const uint8_t *a, const uint8_t *b)
{
    size_t al = (size_t)a[0] | (size_t)a[1] << 8;
    size_t bl = (size_t)b[0] | (size_t)b[1] << 8;
    int c = memcmp(a + 2, b + 2, al < bl ? al : bl);
    return c ? c : (al > bl) - (al < bl);
}

static inline int cmp_off(const void *x, const void *y, void *base)
{
    return rec_cmp_key((const uint8_t *)base + *(const size_t *)x,
                       (const uint8_t *)base + *(const size_t *)y);
}

/* Reads the report of c's inventory_manifest into inv: its records sorted
 * in memory, or in chunk files in inv->tmpdir whose cursors inv->cur are
 * open (invload.c). */
int s3_inv_load(s3_ctx *c, s3_inventory *inv);

#endif
