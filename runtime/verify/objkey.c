/* What an object in the sink is, by its key: see objkey.h. */
#include "verify/objkey.h"

#include <string.h>

/* key after dir and a '/' (dir "" or NULL: key itself); NULL when key is
 * not under dir. */
static const char *under(const char *dir, const char *key)
{
    size_t n = dir ? strlen(dir) : 0;
    while (n && dir[n - 1] == '/')
        n--;
    if (!n)
        return key;
    if (strncmp(key, dir, n) != 0 || key[n] != '/')
        return NULL;
    return key + n + 1;
}

/* Whether rel's first folder is name. */
static int first_folder(const char *rel, const char *name)
{
    size_t n = strlen(name);
    return strncmp(rel, name, n) == 0 && rel[n] == '/';
}

sk_obj_kind sk_obj_classify(const char *prefix, const char *staging,
                            const char *key, const char **part,
                            size_t *plen)
{
    *part = NULL;
    *plen = 0;
    if (staging && *staging && under(staging, key))
        return SK_OBJ_OWN;
    const char *rel = under(prefix, key);
    if (!rel)
        return SK_OBJ_OUTSIDE;
    if (first_folder(rel, "_skippr"))
        return SK_OBJ_OWN;
    if (first_folder(rel, "_errors"))
        return SK_OBJ_DEAD;
    const char *slash = strrchr(rel, '/');
    if (!slash || slash == rel)
        return SK_OBJ_LOOSE; /* no partition folder */
    const char *name = slash + 1;
    if (name[0] == '.' && strstr(name, ".tmp-"))
        return SK_OBJ_PARTIAL;
    *part = rel;
    *plen = (size_t)(slash - rel);
    return SK_OBJ_DATA;
}
