/* Paths in a config, made absolute against the config file's folder
 * (path.c). */
#ifndef SK_CONFIG_PATH_H
#define SK_CONFIG_PATH_H

#include <stddef.h>

#include "config/ynode.h"

/* v as an absolute path into out (cap bytes): a relative one read against
 * the config file's folder (doc->dir), or the working directory for a
 * document from memory (flags) or doc NULL. Leading "./" are dropped.
 * SKIPPR_OK, SKIPPR_RANGE when it does not fit, or the getcwd failure. */
int sk_config_abs_path(const sk_yaml_doc *doc, const char *v, char *out,
                       size_t cap);

#endif
