/* A --source or --sink URL into a plugin and its options (urls.c), from
 * the URL forms the plugins themselves declare (skippr_url_form in
 * include/skippr/plugin.h). Two spellings are the command line's own: a
 * URL without "://" is a path ("file://" + it), and "-" or "stdout" is
 * "stdout://". */
#ifndef SK_CLI_URLS_H
#define SK_CLI_URLS_H

#include <stddef.h>

#include "config/config.h"
#include "plugin/loader.h"

#define SK_URL_MAX_OPTS 6

typedef struct sk_url_endpoint {
    const char *plugin; /* the plugin's name; borrowed from the registry */
    const char *keys[SK_URL_MAX_OPTS];    /* borrowed from the form */
    char *values[SK_URL_MAX_OPTS];        /* owned */
    size_t n;
} sk_url_endpoint;

/* url as the source (sink 0) or the sink into *e, by the forms of the
 * plugins in reg. SKIPPR_OK; SKIPPR_INVAL with err set (an unknown
 * scheme, one no plugin takes in that role, a URL missing a part its
 * form needs); SKIPPR_NOMEM. The caller frees *e with sk_url_free, also
 * after a failure. */
int sk_url_parse(const sk_registry *reg, const char *url, int sink,
                 sk_url_endpoint *e, sk_cfg_err *err);
void sk_url_free(sk_url_endpoint *e);

#endif
