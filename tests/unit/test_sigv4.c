/* SigV4: AWS's published S3 examples (access key AKIAIOSFODNN7EXAMPLE), the
 * signing-key derivation example, and URI encoding. A session-token case is
 * checked against botocore by tests/integration/test_s3_sigv4.py. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "sigv4.h"

#define AK "AKIAIOSFODNN7EXAMPLE"
#define SK "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
#define HOST "examplebucket.s3.amazonaws.com"
#define DATE "20130524T000000Z"

static const char *sig_of(const char *auth)
{
    const char *s = strstr(auth, "Signature=");
    return s ? s + 10 : "";
}

static void sign(const char *method, const char *path, const sigv4_kv *q,
                 size_t nq, const sigv4_kv *h, size_t nh, const char *payload,
                 char *out)
{
    sigv4_request r = {method, path, q, nq, h, nh, payload, DATE,
                       "us-east-1", "s3", AK, SK};
    assert_int_equal(sigv4_authorization(&r, out, 1024), 0);
}

static void test_get_object_with_range(void **state)
{
    (void)state;
    sigv4_kv h[] = {{"Host", HOST}, {"Range", "bytes=0-9"},
                    {"x-amz-content-sha256", SIGV4_EMPTY_SHA256},
                    {"x-amz-date", DATE}};
    char auth[1024];
    sign("GET", "/test.txt", NULL, 0, h, 4, SIGV4_EMPTY_SHA256, auth);
    assert_string_equal(
        auth, "AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20130524/"
              "us-east-1/s3/aws4_request,SignedHeaders=host;range;"
              "x-amz-content-sha256;x-amz-date,Signature=f0e8bdb87c964420e857"
              "bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41");
}

static void test_put_object(void **state)
{
    (void)state;
    char payload[65];
    sigv4_sha256_hex("Welcome to Amazon S3.", 21, payload);
    assert_string_equal(payload, "44ce7dd67c959e0d3524ffac1771dfbba87d2b6b4b4e"
                                 "99e42034a8b803f8b072");
    sigv4_kv h[] = {{"Host", HOST},
                    {"Date", "Fri, 24 May 2013 00:00:00 GMT"},
                    {"x-amz-date", DATE},
                    {"x-amz-storage-class", "REDUCED_REDUNDANCY"},
                    {"x-amz-content-sha256", payload}};
    char auth[1024];
    sign("PUT", "/test$file.text", NULL, 0, h, 5, payload, auth);
    assert_string_equal(sig_of(auth), "98ad721746da40c64f1a55b78f14c238d841ea"
                                      "1380cd77a1b5971af0ece108bd");
    assert_non_null(strstr(auth, "SignedHeaders=date;host;x-amz-content-"
                                 "sha256;x-amz-date;x-amz-storage-class,"));
}

static void test_get_bucket_lifecycle(void **state)
{
    (void)state;
    sigv4_kv q[] = {{"lifecycle", ""}};
    sigv4_kv h[] = {{"Host", HOST},
                    {"x-amz-content-sha256", SIGV4_EMPTY_SHA256},
                    {"x-amz-date", DATE}};
    char auth[1024];
    sign("GET", "/", q, 1, h, 3, SIGV4_EMPTY_SHA256, auth);
    assert_string_equal(sig_of(auth), "fea454ca298b7da1c68078a5d1bdbfbbe0d65c"
                                      "699e0f91ac7a200a0136783543");
}

static void test_list_objects(void **state)
{
    (void)state;
    sigv4_kv q[] = {{"prefix", "J"}, {"max-keys", "2"}}; /* unsorted */
    sigv4_kv h[] = {{"Host", HOST},
                    {"x-amz-content-sha256", SIGV4_EMPTY_SHA256},
                    {"x-amz-date", DATE}};
    char auth[1024];
    sign("GET", "/", q, 2, h, 3, SIGV4_EMPTY_SHA256, auth);
    assert_string_equal(sig_of(auth), "34b48302e7b5fa45bde8084f4b7868a86f0a53"
                                      "4bc59db6670ed5711ef69dc6f7");
}

static void test_signing_key_derivation(void **state)
{
    (void)state;
    uint8_t key[32];
    sigv4_signing_key("wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY", "20120215",
                      "us-east-1", "iam", key);
    static const uint8_t want[32] = {
        0xf4, 0x78, 0x0e, 0x2d, 0x9f, 0x65, 0xfa, 0x89, 0x5f, 0x9c, 0x67,
        0xb3, 0x2c, 0xe1, 0xba, 0xf0, 0xb0, 0xd8, 0xa4, 0x35, 0x05, 0xa0,
        0x00, 0xa1, 0xa9, 0xe0, 0x90, 0xd4, 0x14, 0xdb, 0x40, 0x4d};
    assert_memory_equal(key, want, 32);
}

static void test_uri_encode(void **state)
{
    (void)state;
    char out[128];
    assert_int_equal(sigv4_uri_encode("a b/c$d~e", 1, out, sizeof out), 13);
    assert_string_equal(out, "a%20b/c%24d~e");
    sigv4_uri_encode("p_detail.tenant_id=acme/x", 0, out, sizeof out);
    assert_string_equal(out, "p_detail.tenant_id%3Dacme%2Fx");
    sigv4_uri_encode("caf\xc3\xa9", 1, out, sizeof out);
    assert_string_equal(out, "caf%C3%A9");
    assert_int_equal(sigv4_uri_encode("abcdef", 1, out, 4), -1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_get_object_with_range),
        cmocka_unit_test(test_put_object),
        cmocka_unit_test(test_get_bucket_lifecycle),
        cmocka_unit_test(test_list_objects),
        cmocka_unit_test(test_signing_key_derivation),
        cmocka_unit_test(test_uri_encode),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
