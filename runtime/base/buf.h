/* The engine's byte buffer is the SDK's (include/skippr/buf.h), allocating
 * through sk_realloc and sk_free so that tests can make it fail on the Nth
 * allocation (fault.h). Engine code includes this header, never
 * <skippr/buf.h> itself. */
#ifndef SK_BUF_H
#define SK_BUF_H

#include "base/alloc.h"

#ifdef SKIPPR_BUF_H
#error "<skippr/buf.h> was included before base/buf.h: on malloc, not sk_realloc"
#endif
#define SKIPPR_BUF_REALLOC sk_realloc
#define SKIPPR_BUF_FREE sk_free
#include <skippr/buf.h>

#endif
