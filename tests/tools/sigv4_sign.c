/* Print the SigV4 Authorization header skippr's S3 plugin would send, for
 * differential tests against botocore.
 *
 *   sigv4_sign METHOD PATH QUERY HEADERS PAYLOAD_HASH AMZ_DATE REGION AK SK
 *
 * QUERY is "k=v&k2=v2" with raw (unencoded) values, or "". HEADERS is
 * "name:value\n..." (every header to sign). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sigv4.h"

static size_t split(char *s, char sep, char kvsep, sigv4_kv *out, size_t cap)
{
    size_t n = 0;
    char *save = NULL;
    char seps[2] = {sep, 0};
    for (char *t = strtok_r(s, seps, &save); t && n < cap;
         t = strtok_r(NULL, seps, &save)) {
        char *eq = strchr(t, kvsep);
        if (eq)
            *eq = '\0';
        out[n].key = t;
        out[n].value = eq ? eq + 1 : "";
        n++;
    }
    return n;
}

int main(int argc, char **argv)
{
    if (argc != 10) {
        fprintf(stderr, "usage: sigv4_sign METHOD PATH QUERY HEADERS "
                        "PAYLOAD_HASH AMZ_DATE REGION AK SK\n");
        return 2;
    }
    sigv4_kv q[32], h[32];
    size_t nq = split(argv[3], '&', '=', q, 32);
    size_t nh = split(argv[4], '\n', ':', h, 32);
    sigv4_request r = {argv[1], argv[2], q, nq, h, nh, argv[5], argv[6],
                       argv[7], "s3", argv[8], argv[9]};
    char out[2048];
    if (sigv4_authorization(&r, out, sizeof out) != 0)
        return 1;
    puts(out);
    return 0;
}
