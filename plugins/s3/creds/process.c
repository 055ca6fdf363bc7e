/* A profile's credential_process: run by the shell, JSON on stdout. */
#include "provider.h"

#include <jansson.h>
#include <openssl/crypto.h>
#include <stdlib.h>
#include <sys/wait.h>

int cr_fetch_process(s3_creds *cr, s3_cred *out, const char **why)
{
    /* The command line is the user's, run by the shell as the SDKs do;
     * its stdout is read (bounded), its stderr goes to ours. */
    FILE *p = popen(cr->process, "r");
    if (!p) {
        *why = "cannot start credential_process";
        return -1;
    }
    char *text = malloc(MAX_ANSWER + 1);
    size_t n = 0;
    if (text) {
        size_t k;
        while (n < MAX_ANSWER &&
               (k = fread(text + n, 1, MAX_ANSWER - n, p)) > 0)
            n += k;
        text[n] = '\0';
    }
    int st = pclose(p);
    if (!text) {
        *why = "out of memory";
        return -1;
    }
    int rc = -1;
    if (st == -1 || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
        *why = "credential_process failed (its own message is above)";
    else if (n >= MAX_ANSWER)
        *why = "credential_process printed more than 64 KiB";
    else {
        json_t *j = json_loads(text, 0, NULL);
        json_int_t v = json_integer_value(json_object_get(j, "Version"));
        json_decref(j);
        if (v != 1)
            *why = "credential_process must print JSON with \"Version\": 1";
        else
            rc = cr_parse_json_creds(text, "SessionToken", out, why);
    }
    OPENSSL_cleanse(text, n);
    free(text);
    return rc;
}
