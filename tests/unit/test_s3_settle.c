/* The S3 sink's judgement of an object at its key (plugins/s3/settle.c),
 * against scripted HEAD answers: an object without skippr's metadata is
 * never taken for ours, and is looked at again before anything is
 * decided; ours is known by slice id and the whole object's checksum
 * (else its size). The stubs below stand in for the request layer. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "request.h"
#include "settle.h"

/* One scripted HEAD answer. */
typedef struct answer {
    long status;
    const char *slice, *crc, *checksum, *length, *etag;
} answer;

static const answer *script;
static size_t nscript, heads, waits;

int s3_request(s3_ctx *c, const char *method, const char *key,
               const sigv4_kv *query, size_t nq, const void *body,
               size_t blen, const sigv4_kv *hdrs, size_t nh, resp *r)
{
    (void)c, (void)key, (void)query, (void)nq, (void)body, (void)blen;
    assert_string_equal(method, "HEAD");
    /* The whole object's checksum is asked for. */
    assert_int_equal(nh, 1);
    assert_string_equal(hdrs[0].key, "x-amz-checksum-mode");
    memset(r, 0, sizeof *r);
    const answer *a = &script[heads < nscript ? heads : nscript - 1];
    heads++;
    r->status = a->status;
    snprintf(r->meta_slice, sizeof r->meta_slice, "%s", a->slice);
    snprintf(r->meta_crc, sizeof r->meta_crc, "%s", a->crc);
    snprintf(r->checksum, sizeof r->checksum, "%s", a->checksum);
    snprintf(r->content_length, sizeof r->content_length, "%s", a->length);
    snprintf(r->etag, sizeof r->etag, "%s", a->etag);
    return SKIPPR_OK;
}

int s3_verdict(s3_ctx *c, int rc, resp *r, const char *what, const char *key)
{
    (void)c, (void)what, (void)key;
    return rc ? rc : r->status == 200 ? SKIPPR_OK : SKIPPR_FATAL;
}

void s3_backoff(s3_ctx *c, int attempt)
{
    (void)c, (void)attempt;
    waits++;
}


static void host_log(const skippr_host *h, int level, const char *fmt, ...)
{
    (void)h, (void)level, (void)fmt;
}

static int host_no_stop(const skippr_host *h)
{
    (void)h;
    return 0;
}

static skippr_host host = {.struct_size = sizeof(skippr_host),
                           .log = host_log,
                           .should_stop = host_no_stop};

/* What a small object and a grown one of slice "s-1" would be. */
static const s3_expect small = {"s-1", "0000abcd", "AACrzQ==", 10};
static const s3_expect grown = {"s-1", "", "AACrzQ==", 10};

static s3_found judge(const answer *a, size_t n, const s3_expect *want,
                      int settled, char *etag)
{
    s3_ctx c;
    memset(&c, 0, sizeof c);
    c.host = &host;
    c.bucket = "b";
    script = a;
    nscript = n;
    heads = waits = 0;
    s3_found found = S3_FOUND_NONE;
    char tag[128] = "";
    int rc = settled ? s3_head_settled(&c, "k", want, &found, tag, sizeof tag)
                     : s3_head_found(&c, "k", want, &found, tag, sizeof tag);
    assert_int_equal(rc, SKIPPR_OK);
    if (etag)
        strcpy(etag, tag);
    return found;
}

static void test_no_object(void **state)
{
    (void)state;
    answer a[] = {{404, "", "", "", "", ""}};
    assert_int_equal(judge(a, 1, &small, 1, NULL), S3_FOUND_NONE);
    assert_int_equal(heads, 1);
}

static void test_bare_object_is_not_ours_and_is_looked_at_again(void **s)
{
    (void)s;
    /* Bytes first, metadata on the third look: ours after all. */
    answer late[] = {{200, "", "", "", "10", "e1"},
                     {200, "", "", "", "10", "e1"},
                     {200, "s-1", "0000abcd", "", "10", "e1"}};
    assert_int_equal(judge(late, 3, &small, 1, NULL), S3_FOUND_OURS);
    assert_int_equal(heads, 3);
    assert_int_equal(waits, 2);
    /* Never any metadata: bare, with the ETag to replace it by If-Match. */
    answer never[] = {{200, "", "", "", "10", "e2"}};
    char etag[128];
    assert_int_equal(judge(never, 1, &small, 1, etag), S3_FOUND_BARE);
    assert_string_equal(etag, "e2");
    assert_true(heads > 1);
    /* Not even with the right size and checksum. */
    answer right[] = {{200, "", "", "AACrzQ==", "10", "e3"}};
    assert_int_equal(judge(right, 1, &grown, 0, NULL), S3_FOUND_BARE);
}

static void test_ours_by_slice_and_crc(void **state)
{
    (void)state;
    answer ours[] = {{200, "s-1", "0000abcd", "", "10", "e"}};
    assert_int_equal(judge(ours, 1, &small, 0, NULL), S3_FOUND_OURS);
    answer other_bytes[] = {{200, "s-1", "0000abce", "", "10", "e"}};
    assert_int_equal(judge(other_bytes, 1, &small, 0, NULL), S3_FOUND_STALE);
    answer other_slice[] = {{200, "s-2", "0000abcd", "", "10", "e"}};
    assert_int_equal(judge(other_slice, 1, &small, 0, NULL),
                     S3_FOUND_FOREIGN);
}

static void test_grown_object_by_checksum_then_size(void **state)
{
    (void)state;
    /* No CRC in a grown object's metadata: S3's full-object checksum. */
    answer same[] = {{200, "s-1", "", "AACrzQ==", "999", "e"}};
    assert_int_equal(judge(same, 1, &grown, 0, NULL), S3_FOUND_OURS);
    answer other[] = {{200, "s-1", "", "AACrzg==", "10", "e"}};
    assert_int_equal(judge(other, 1, &grown, 0, NULL), S3_FOUND_STALE);
    /* A composite checksum is not the whole object's: the size decides. */
    answer composite[] = {{200, "s-1", "", "AACrzg==-2", "10", "e"}};
    assert_int_equal(judge(composite, 1, &grown, 0, NULL), S3_FOUND_OURS);
    answer shorter[] = {{200, "s-1", "", "", "9", "e"}};
    assert_int_equal(judge(shorter, 1, &grown, 0, NULL), S3_FOUND_STALE);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_no_object),
        cmocka_unit_test(test_bare_object_is_not_ours_and_is_looked_at_again),
        cmocka_unit_test(test_ours_by_slice_and_crc),
        cmocka_unit_test(test_grown_object_by_checksum_then_size),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
