/* A verify's records spilled in sorted runs and merged back: see
 * recruns.h. */
#include "verify/recruns.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/common.h"
#include "base/endian.h"
#include "base/fsio.h"

#define REC_BYTES 32
#define RUN_BUF 512 /* records a run's read buffer holds: 16 KiB */

struct sk_recruns {
    int fd;                        /* one file, the runs one after another */
    off_t end;
    off_t at[SK_RECRUNS_MAX];      /* where each starts */
    uint64_t n[SK_RECRUNS_MAX];    /* its records */
    size_t count;
};

int sk_rec_order(const void *pa, const void *pb)
{
    const sk_rec *x = pa, *y = pb;
    if (x->hi != y->hi)
        return x->hi < y->hi ? -1 : 1;
    if (x->lo != y->lo)
        return x->lo < y->lo ? -1 : 1;
    if (x->part != y->part)
        return x->part < y->part ? -1 : 1;
    if (x->where != y->where)
        return x->where < y->where ? -1 : 1;
    return (x->offset > y->offset) - (x->offset < y->offset);
}

sk_recruns *sk_recruns_new(void)
{
    sk_recruns *r = sk_calloc(1, sizeof *r);
    if (r)
        r->fd = -1;
    return r;
}

void sk_recruns_free(sk_recruns *r)
{
    if (!r)
        return;
    if (r->fd >= 0)
        close(r->fd);
    sk_free(r);
}

size_t sk_recruns_count(const sk_recruns *r)
{
    return r->count;
}

/* A new file in $TMPDIR (else /tmp), already unlinked: *fd. */
static int new_file(int *fd)
{
    const char *dir = getenv("TMPDIR");
    char *path = sk_asprintf("%s/skippr-verify-XXXXXX",
                             dir && *dir ? dir : "/tmp");
    if (!path)
        return SKIPPR_NOMEM;
    *fd = mkostemp(path, O_CLOEXEC);
    int rc = SKIPPR_OK;
    if (*fd < 0) {
        sk_error("verify: spilling records to %s: %s", path,
                 strerror(errno));
        rc = sk_io_status_from_errno(errno);
    } else {
        unlink(path);
    }
    sk_free(path);
    return rc;
}

static void encode(uint8_t *p, const sk_rec *x)
{
    sk_put_u64(p, x->hi);
    sk_put_u64(p + 8, x->lo);
    sk_put_u32(p + 16, x->part);
    sk_put_u32(p + 20, x->where);
    sk_put_u64(p + 24, x->offset);
}

static sk_rec decode(const uint8_t *p)
{
    return (sk_rec){.hi = sk_get_u64(p), .lo = sk_get_u64(p + 8),
                    .part = sk_get_u32(p + 16), .where = sk_get_u32(p + 20),
                    .offset = sk_get_u64(p + 24)};
}

int sk_recruns_spill(sk_recruns *r, sk_rec *v, size_t n)
{
    if (r->count == SK_RECRUNS_MAX)
        return SKIPPR_RANGE;
    qsort(v, n, sizeof *v, sk_rec_order);
    int rc = r->fd < 0 ? new_file(&r->fd) : SKIPPR_OK;
    uint8_t buf[RUN_BUF * REC_BYTES];
    off_t at = r->end;
    for (size_t i = 0; !rc && i < n; i += RUN_BUF) {
        size_t k = n - i < RUN_BUF ? n - i : RUN_BUF;
        for (size_t j = 0; j < k; j++)
            encode(buf + j * REC_BYTES, &v[i + j]);
        rc = sk_io_pwrite_all(r->fd, buf, k * REC_BYTES, at,
                              "verify's spilled records");
        at += (off_t)(k * REC_BYTES);
    }
    if (rc)
        return rc;
    r->at[r->count] = r->end;
    r->n[r->count++] = n;
    r->end = at;
    return SKIPPR_OK;
}

/* One input of a merge: a run read through a buffer, or the records in
 * memory (fd -1). cur is its next record. */
typedef struct input {
    int fd;
    uint64_t left;    /* records of the run not yet in buf */
    off_t at;         /* where they start */
    sk_rec buf[RUN_BUF];
    const sk_rec *mem; /* or the records in memory */
    size_t pos, len;
    sk_rec cur;
} input;

struct sk_recmerge {
    input *in;
    size_t nin;
    size_t *heap; /* inputs that have a record, by it */
    size_t nheap;
    sk_rec out;
};

/* Input x's next record into x->cur: 1, or 0 at its end (*rc on
 * failure). */
static int advance(input *x, int *rc)
{
    if (x->pos == x->len && x->fd >= 0 && x->left) {
        uint8_t raw[RUN_BUF * REC_BYTES];
        size_t k = x->left < RUN_BUF ? (size_t)x->left : RUN_BUF, got;
        *rc = sk_io_pread_all(x->fd, raw, k * REC_BYTES, x->at, &got,
                              "verify's spilled records");
        if (!*rc && got != k * REC_BYTES)
            *rc = SKIPPR_CORRUPT;
        if (*rc)
            return 0;
        for (size_t j = 0; j < k; j++)
            x->buf[j] = decode(raw + j * REC_BYTES);
        x->at += (off_t)(k * REC_BYTES);
        x->left -= k;
        x->pos = 0;
        x->len = k;
    }
    if (x->pos == x->len)
        return 0;
    x->cur = x->fd >= 0 ? x->buf[x->pos] : x->mem[x->pos];
    x->pos++;
    return 1;
}

static int less(const sk_recmerge *m, size_t a, size_t b)
{
    return sk_rec_order(&m->in[m->heap[a]].cur, &m->in[m->heap[b]].cur) < 0;
}

/* Restore the heap's order down from slot i. */
static void sift_down(sk_recmerge *m, size_t i)
{
    for (;;) {
        size_t l = 2 * i + 1, r = l + 1, min = i;
        if (l < m->nheap && less(m, l, min))
            min = l;
        if (r < m->nheap && less(m, r, min))
            min = r;
        if (min == i)
            return;
        size_t t = m->heap[i];
        m->heap[i] = m->heap[min];
        m->heap[min] = t;
        i = min;
    }
}

int sk_recmerge_open(sk_recruns *r, sk_rec *mem, size_t n,
                     sk_recmerge **out)
{
    *out = NULL;
    if (n)
        qsort(mem, n, sizeof *mem, sk_rec_order);
    sk_recmerge *m = sk_calloc(1, sizeof *m);
    size_t nin = r->count + 1;
    if (!m || !(m->in = sk_calloc(nin, sizeof *m->in)) ||
        !(m->heap = sk_calloc(nin, sizeof *m->heap))) {
        sk_recmerge_free(m);
        return SKIPPR_NOMEM;
    }
    for (size_t i = 0; i < r->count; i++)
        m->in[i] = (input){.fd = r->fd, .left = r->n[i], .at = r->at[i]};
    m->in[r->count] = (input){.fd = -1, .mem = mem, .len = n};
    m->nin = nin;
    int rc = SKIPPR_OK;
    for (size_t i = 0; i < nin && !rc; i++)
        if (advance(&m->in[i], &rc))
            m->heap[m->nheap++] = i;
    for (size_t i = m->nheap / 2; !rc && i-- > 0;)
        sift_down(m, i);
    if (rc) {
        sk_recmerge_free(m);
        return rc;
    }
    *out = m;
    return SKIPPR_OK;
}

const sk_rec *sk_recmerge_next(sk_recmerge *m, int *rc)
{
    *rc = SKIPPR_OK;
    if (!m->nheap)
        return NULL;
    input *x = &m->in[m->heap[0]];
    m->out = x->cur;
    if (!advance(x, rc)) {
        if (*rc)
            return NULL;
        m->heap[0] = m->heap[--m->nheap];
    }
    sift_down(m, 0);
    return &m->out;
}

void sk_recmerge_free(sk_recmerge *m)
{
    if (!m)
        return;
    sk_free(m->in);
    sk_free(m->heap);
    sk_free(m);
}
