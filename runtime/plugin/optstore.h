/* One option's value, as a config or a flag writes it, into a plugin
 * context (optstore.c). The engine's filler (fill.c) and the SDK's
 * testkit both store through it, so a plugin's options mean the same in
 * either. It uses only the C library and base/optval. */
#ifndef SK_PLUGIN_OPTSTORE_H
#define SK_PLUGIN_OPTSTORE_H

#include <stddef.h>

#include <skippr/plugin.h>

/* Copy v and keep the copy as long as the context lives; *slot gets it.
 * SKIPPR_OK or SKIPPR_NOMEM. */
typedef int (*sk_option_keep)(void *ud, const char *v, const char **slot);

/* Store value into option o's field of ctx: a STRING or SECRET through
 * keep, an INT (a whole number or a size such as 16MiB), a BOOL. Returns
 * SKIPPR_OK; SKIPPR_NOMEM; or SKIPPR_INVAL with why[cap] saying what the
 * option wants (the caller names the option's owner). A PREFIX option is
 * filled from keys, not a value: SKIPPR_INVAL. */
int sk_option_store(const skippr_option *o, void *ctx, const char *value,
                    sk_option_keep keep, void *ud, char *why, size_t cap);

#endif
