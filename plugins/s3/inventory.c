/* S3 Inventory as the listing (inventory_manifest: s3://BUCKET/KEY of a
 * manifest.json). For a billion keys LIST is a million requests; an
 * inventory report lists them in a few files.
 *
 * A pass reads the manifest (fileFormat must be CSV: Parquet and ORC are
 * refused, since no reader for them is among skippr's libraries), then
 * each gzip'd CSV file as a stream (ranged GETs, zlib, one line at a
 * time: keys are URL-encoded, so a row never spans lines). Rows of the
 * source bucket under s3_prefix that are the latest version and not a
 * delete marker become records (key, ETag, size, Last-Modified). The
 * files are in no order, so the records are sorted: in memory up to
 * INV_CHUNK bytes, then as sorted chunk files in TMPDIR merged as they
 * are listed; memory stays bounded whatever the inventory's size. Each
 * unit's version is the inventory's ETag, so every GET sends If-Match
 * with it and an object changed since the report is an error, not a mix.
 *
 * Test hook: SKIPPR_TEST_INVENTORY_CHUNK=N sorts N bytes of records in
 * memory instead of 64 MiB, so that a small report is sorted on disk.
 *
 * Thread: the pipeline thread (the engine calls list()).
 */
#include "inventory.h"
#include "invrec.h"
#include "request.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---- records ------------------------------------------------------------ */

/* The unit a record names (pointers into r and the scratch strings). */
static void rec_unit(const uint8_t *r, char *key, size_t kcap, char *etag,
                     skippr_unit *u)
{
    size_t kl = (size_t)r[0] | (size_t)r[1] << 8;
    size_t n = kl < kcap - 1 ? kl : kcap - 1;
    memcpy(key, r + 2, n);
    key[n] = '\0';
    size_t el = r[2 + kl];
    memcpy(etag, r + 3 + kl, el);
    etag[el] = '\0';
    const uint8_t *q = r + 3 + kl + el;
    uint64_t size = 0, mod = 0;
    for (int i = 7; i >= 0; i--) {
        size = size << 8 | q[i];
        mod = mod << 8 | q[8 + i];
    }
    *u = (skippr_unit){key, etag, (int64_t)size, (int64_t)mod};
}

/* ---- listing ----------------------------------------------------------- */

static int cursor_next(inv_cursor *k)
{
    k->valid = 0;
    if (!k->f || fread(k->rec, 1, 2, k->f) != 2)
        return SKIPPR_OK;
    size_t kl = (size_t)k->rec[0] | (size_t)k->rec[1] << 8;
    if (fread(k->rec + 2, 1, kl + 1, k->f) != kl + 1)
        return SKIPPR_IO;
    size_t el = k->rec[2 + kl];
    if (fread(k->rec + 3 + kl, 1, el + 16, k->f) != el + 16)
        return SKIPPR_IO;
    k->valid = 1;
    return SKIPPR_OK;
}

/* The next record in key order, or NULL at the end. */
static const uint8_t *next_rec(s3_inventory *inv, int *rc)
{
    if (!inv->cur) {
        if (inv->imem == inv->nmem)
            return NULL;
        return (const uint8_t *)inv->mem + inv->order[inv->imem++];
    }
    size_t best = inv->ncur;
    for (size_t i = 0; i < inv->ncur; i++)
        if (inv->cur[i].valid &&
            (best == inv->ncur ||
             rec_cmp_key(inv->cur[i].rec, inv->cur[best].rec) < 0))
            best = i;
    if (best == inv->ncur)
        return NULL;
    /* Hand out a copy: the cursor moves on before the caller is done. */
    memcpy(inv->out, inv->cur[best].rec, rec_len(inv->cur[best].rec));
    *rc = cursor_next(&inv->cur[best]);
    return inv->out;
}

void s3_inv_free(s3_ctx *c)
{
    s3_inventory *inv = c->inv;
    if (!inv)
        return;
    for (size_t i = 0; i < inv->ncur; i++)
        if (inv->cur[i].f)
            fclose(inv->cur[i].f);
    free(inv->cur);
    if (inv->tmpdir[0]) {
        for (int i = 0;; i++) {
            char path[320];
            snprintf(path, sizeof path, "%s/chunk-%06d", inv->tmpdir, i);
            if (unlink(path) != 0)
                break;
        }
        rmdir(inv->tmpdir);
    }
    free(inv->mem);
    free(inv->order);
    free(inv);
    c->inv = NULL;
}

int s3_inv_list(s3_ctx *c, const char *start_after, skippr_unit_cb cb,
                void *cb_data)
{
    s3_inventory *inv = c->inv;
    /* A pass (no start_after), or a start behind where this one is: read
     * the report again. Otherwise go on, skipping forward. */
    if (!inv || !start_after ||
        (inv->have_last && strcmp(start_after, inv->last) < 0)) {
        s3_inv_free(c);
        if (!(inv = c->inv = calloc(1, sizeof *inv)))
            return SKIPPR_NOMEM;
        const char *t = getenv("SKIPPR_TEST_INVENTORY_CHUNK");
        long tc = t ? strtol(t, NULL, 10) : 0;
        inv->chunk = tc >= 70000 && tc < (long)INV_CHUNK ? (size_t)tc
                                                         : INV_CHUNK;
        int rc = s3_inv_load(c, inv);
        if (rc) {
            s3_inv_free(c);
            return rc;
        }
        for (size_t i = 0; i < inv->ncur && !rc; i++)
            rc = cursor_next(&inv->cur[i]);
        if (rc)
            return rc;
    }
    char key[2048], etag[256];
    int rc = SKIPPR_OK;
    const uint8_t *r;
    while ((r = next_rec(inv, &rc)) && !rc) {
        skippr_unit u;
        rec_unit(r, key, sizeof key, etag, &u);
        if (start_after && strcmp(key, start_after) <= 0)
            continue;
        if (inv->have_last && strcmp(key, inv->last) <= 0) {
            /* The engine relies on listing order (the ledger merge). */
            LOG(c, SKIPPR_LOG_ERROR, "inventory: %s listed after %s (a key "
                "twice in the report, or the sort failed)", key, inv->last);
            return SKIPPR_FATAL;
        }
        snprintf(inv->last, sizeof inv->last, "%s", key);
        inv->have_last = 1;
        if (cb(cb_data, &u))
            break;
    }
    return rc;
}
