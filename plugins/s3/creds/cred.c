/* One set of credentials and the small helpers every source shares:
 * copying and wiping secrets, ISO 8601 expiries, the source's label. */
#include "cred.h"
#include "provider.h"

#include <ctype.h>
#include <openssl/crypto.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

char *cr_env_dup(const char *name)
{
    const char *v = getenv(name);
    return v && *v ? strdup(v) : NULL;
}

void s3_cred_wipe(s3_cred *c)
{
    OPENSSL_cleanse(c, sizeof *c);
}

void cr_wipe_free(char *s)
{
    if (s) {
        OPENSSL_cleanse(s, strlen(s));
        free(s);
    }
}

/* Copy the three parts into *out; -1 (nothing copied) if one is too long. */
int cr_cred_set(s3_cred *out, const char *ak, const char *sk,
                    const char *token, time_t expires)
{
    if (!ak || !sk || strlen(ak) >= sizeof out->access_key ||
        strlen(sk) >= sizeof out->secret_key ||
        (token && strlen(token) >= sizeof out->token))
        return -1;
    snprintf(out->access_key, sizeof out->access_key, "%s", ak);
    snprintf(out->secret_key, sizeof out->secret_key, "%s", sk);
    snprintf(out->token, sizeof out->token, "%s", token ? token : "");
    out->expires = expires;
    return 0;
}

time_t s3_parse_iso8601(const char *s)
{
    struct tm tm = {0};
    const char *p = s ? strptime(s, "%Y-%m-%dT%H:%M:%S", &tm) : NULL;
    if (!p)
        return 0;
    if (*p == '.')
        for (p++; isdigit((unsigned char)*p); p++)
            ;
    time_t t = timegm(&tm);
    if (*p == '+' || *p == '-') {
        int hh = 0, mm = 0;
        if (sscanf(p + 1, "%2d:%2d", &hh, &mm) != 2)
            return 0;
        long off = (hh * 60L + mm) * 60L;
        t -= *p == '+' ? off : -off;
    } else if (*p != 'Z' && *p != '\0') {
        return 0;
    }
    return t;
}

/* Describe where the credentials come from (cut to fit: it is only a
 * label for logs). */
__attribute__((format(printf, 2, 3))) void
cr_set_source(s3_creds *cr, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(cr->source, sizeof cr->source, fmt, ap);
    va_end(ap);
}

char *cr_session_name(void)
{
    char *v = cr_env_dup("AWS_ROLE_SESSION_NAME");
    if (v)
        return v;
    char buf[64];
    snprintf(buf, sizeof buf, "skippr-%lld", (long long)time(NULL));
    return strdup(buf);
}
