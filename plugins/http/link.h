/* HTTP Link headers (link.c): the rel="next" target, for HTTPPull's
 * follow_next.
 */
#ifndef SKIPPR_HTTP_LINK_H
#define SKIPPR_HTTP_LINK_H

#include <stddef.h>

/* The rel="next" target of a Link header's value p[0..n) (RFC 8288: one
 * or more `<target>; params`, comma-separated; rel may hold several
 * space-separated types, quoted or not), as sent (a relative one is the
 * caller's to resolve). 1 with it in out (cap bytes, NUL-ended); 0 when
 * there is none (out untouched); -1 when it does not fit in cap. */
int http_link_next(const char *p, size_t n, char *out, size_t cap);

#endif
