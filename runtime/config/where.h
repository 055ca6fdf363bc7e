/* Where something in a config is, in the user's words (where.c). */
#ifndef SK_WHERE_H
#define SK_WHERE_H

#include <stddef.h>

#include "base/common.h" /* SKIPPR_PRINTF */
#include "config/ynode.h"

/* The name of the document cli/ makes from a pipeline's flags. */
#define SK_FLAGS_DOC "(flags)"

/* Non-zero when doc was made from flags, not read from a file. */
int sk_config_from_flags(const sk_yaml_doc *doc);

/* Where node at (NULL: the whole document) is, into out (cap bytes):
 * "file:line:col", or the flag that set it ("--sink", "--batch-time-
 * fields", "--sink-opt part_size"; "the flags" when none does). */
void sk_config_where(const sk_yaml_doc *doc, const sk_ynode *at, char *out,
                     size_t cap);

/* The name to call an endpoint `ref` ("data_sinks.X") by: ref itself, or
 * for a pipeline by flags "--source" or "--sink". Not owned: ref or a
 * literal. */
const char *sk_config_ref_name(const sk_yaml_doc *doc, const char *ref);

/* Format "file:line:col: message" into err. Returns SKIPPR_INVAL. */
int sk_cfg_fail(sk_cfg_err *err, const sk_yaml_doc *doc, const sk_ynode *at,
                const char *fmt, ...) SKIPPR_PRINTF(4, 5);

#endif
