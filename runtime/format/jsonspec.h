/* The peek spec (jsonspec.c): the routing paths as a trie of member
 * names, which the scanner (json.c) walks as it meets members, and the
 * skim mode's groups. Built once per router; read-only while records
 * are scanned (json.c walks the trie of jsonspec_impl.h). */
#ifndef SK_JSONSPEC_H
#define SK_JSONSPEC_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define SK_PEEK_MAX_PATHS 16

typedef struct sk_peek_spec sk_peek_spec;

/* Compile dotted paths into a lookup trie; path i fills values[i]. At most
 * SK_PEEK_MAX_PATHS paths. Returns NULL on allocation failure or bad input
 * (an empty path or segment). Caller owns the result: sk_peek_spec_free(). */
sk_peek_spec *sk_peek_spec_new(const char *const *paths, size_t n);
void sk_peek_spec_free(sk_peek_spec *spec);
size_t sk_peek_spec_count(const sk_peek_spec *spec);

/* Skim mode (a source's `validate: false`): peek only as far as routing
 * needs. Paths form groups in which the first present value wins; a
 * group is settled once its first path is found (with a usable scalar:
 * a non-empty string, a number, true or false, when settle is
 * SK_SETTLE_SCALAR; with any value for SK_SETTLE_ANY). When every group is
 * settled, the rest of the record is skipped by a structural scan that only
 * tracks strings and brackets; containers that no path enters are skipped
 * the same way. Skipped bytes are neither validated nor decoded, so an
 * invalid record is dead-lettered only if the error lies in what was
 * scanned; and with a duplicated member name the first one counts. */
typedef enum sk_settle {
    SK_SETTLE_NEVER = 0, /* the group is known only at the record's end */
    SK_SETTLE_ANY = 1,
    SK_SETTLE_SCALAR = 2
} sk_settle;

typedef struct sk_peek_group {
    size_t first; /* the group's first path (index into the spec's paths) */
    sk_settle settle;
} sk_peek_group;

int sk_peek_spec_set_skim(sk_peek_spec *spec, const sk_peek_group *groups,
                          size_t n);

/* With skim mode on newline-delimited input (a source's `format: jsonl`):
 * once every group is settled, the record is taken to end with its line
 * (memchr to the newline) instead of at its closing bracket. A line must
 * hold exactly one record; one that does not end with '}' is an error. */
void sk_peek_spec_set_lines(sk_peek_spec *spec, int lines);

#endif
