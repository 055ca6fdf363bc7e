/* The shared AWS files (profile.c): INI values, and a profile as a
 * source of the chain. */
#ifndef SKIPPR_S3_PROFILE_H
#define SKIPPR_S3_PROFILE_H

#include <stddef.h>

#include "cred.h"

/* Value of key in [section] of an INI file (the shared AWS files), or
 * NULL. The caller frees it. */
char *s3_ini_get(const char *path, const char *section, const char *key);

/* The path of a shared AWS file: $env_name, else ~/.aws/base. */
void s3_aws_file(const char *env_name, const char *base, char *out,
                 size_t cap);

/* Set cr up from the profile; 1 when the profile gives credentials, 0
 * when it does not, -1 on an error already logged. */
int cr_from_profile(s3_creds *cr, const char *profile);

#endif
