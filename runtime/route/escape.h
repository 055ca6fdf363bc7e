/* Key segments, escaped Hive-style and bounded (../shared/DESIGN.md). */
#ifndef SK_ROUTE_ESCAPE_H
#define SK_ROUTE_ESCAPE_H

#include <stddef.h>
#include <stdint.h>

#include "base/common.h"

/* A segment's most bytes: no value can add a path level or grow a key
 * past S3's limit (route.h). */
#define SK_SEGMENT_MAX 200

/* Append value v escaped Hive-style: bytes 0x00-0x1F, 0x7F, invalid UTF-8
 * and the characters "#%'*\/:=?\{[]^ become %XX (uppercase hex). */
int sk_escape_append(skippr_buf *out, const uint8_t *v, size_t n);

/* Append one bounded path segment "{head}{value}" where head (already safe
 * text, e.g. "p_detail.tenant_id=") is copied and value escaped. If the
 * result would exceed SK_SEGMENT_MAX bytes the escaped value is cut at a
 * character boundary and "~" plus 16 hex digits of a hash of the whole raw
 * value are appended, so distinct values stay distinct. */
int sk_segment_append(skippr_buf *out, const char *head, const uint8_t *v,
                      size_t n);

#endif
