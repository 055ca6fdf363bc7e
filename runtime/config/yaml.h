/* Reading YAML (yaml.c): libyaml's events into the tree of ynode.h, with
 * ${VAR} and ${VAR:-default} replaced from the environment ("$${" is a
 * literal "${"); one document, no aliases, bounded depth and scalars. */
#ifndef SK_CONFIG_YAML_H
#define SK_CONFIG_YAML_H

#include <stddef.h>

#include "config/ynode.h"

/* Load and interpolate a YAML file. Returns SKIPPR_OK, or a negative status
 * with err filled in. On success caller owns *doc: sk_yaml_free(). */
int sk_yaml_load(const char *path, sk_yaml_doc **doc, sk_cfg_err *err);
/* The same from data[0..len), named `name` in errors. */
int sk_yaml_load_mem(const char *name, const void *data, size_t len,
                     sk_yaml_doc **doc, sk_cfg_err *err);
void sk_yaml_free(sk_yaml_doc *doc);
/* Map lookup; NULL when absent or when map is not a map. */
const sk_ynode *sk_ymap_get(const sk_ynode *map, const char *key);

#endif
