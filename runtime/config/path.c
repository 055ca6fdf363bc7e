/* Paths in a config, made absolute against the config file's folder
 * (path.h). */
#include "config/path.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "base/common.h"
#include "base/fsio.h"

int sk_config_abs_path(const sk_yaml_doc *doc, const char *v, char *out,
                       size_t cap)
{
    char cwd[4096];
    const char *base = doc ? doc->dir : NULL;
    if (v[0] != '/' && !base) {
        if (!getcwd(cwd, sizeof cwd))
            return sk_io_status_from_errno(errno);
        base = cwd;
    }
    while (v[0] == '.' && v[1] == '/')
        v += 2 + strspn(v + 2, "/");
    int n = v[0] == '/' ? snprintf(out, cap, "%s", v)
            : strcmp(v, ".") == 0 || !*v
                ? snprintf(out, cap, "%s", base)
                : snprintf(out, cap, "%s/%s",
                           strcmp(base, "/") == 0 ? "" : base, v);
    return n < 0 || (size_t)n >= cap ? SKIPPR_RANGE : SKIPPR_OK;
}
