/* The peek spec (jsonspec.c): the routing paths as a trie of member
 * names, which the scanner (json.c) walks as it meets members, and the
 * skim mode's groups. Built once per router; read-only while records
 * are scanned, when json.c reads the trie through spec_child(). */
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

/* The peek spec: a trie of path segments. */
typedef struct peek_node {
    const char *name;
    size_t name_len;
    int slot;        /* path index ending here, or -1 */
    int first_child; /* node index, or -1 */
    int next;        /* sibling node index, or -1 */
    uint64_t child_lens; /* bit L set: some child's name is L bytes (L<64) */
} peek_node;

struct sk_peek_spec {
    size_t npaths;
    size_t nnodes;
    size_t cap;
    peek_node *nodes; /* node 0 is the root */
    char **names;     /* owned copies of segment names, one per node */
    /* skim mode (sk_peek_spec_set_skim) */
    int skim;
    int need;                                 /* groups to settle */
    uint8_t settles[SK_PEEK_MAX_PATHS];       /* groups path i settles */
    uint8_t settle_kind[SK_PEEK_MAX_PATHS];
    int lines; /* skim: a settled record ends with its line */
};

/* a and b hold n bytes each; 1 if they are equal. Member names are short,
 * so this compares by overlapping 8- or 4-byte loads, never reading past
 * n, instead of calling memcmp. */
static inline int short_equal(const uint8_t *a, const uint8_t *b, size_t n)
{
    if (n >= 8) {
        uint64_t x, y;
        size_t i = 0;
        for (; i + 8 < n; i += 8) {
            memcpy(&x, a + i, 8);
            memcpy(&y, b + i, 8);
            if (x != y)
                return 0;
        }
        memcpy(&x, a + n - 8, 8);
        memcpy(&y, b + n - 8, 8);
        return x == y;
    }
    if (n >= 4) {
        uint32_t x0, y0, x1, y1;
        memcpy(&x0, a, 4);
        memcpy(&y0, b, 4);
        memcpy(&x1, a + n - 4, 4);
        memcpy(&y1, b + n - 4, 4);
        return x0 == y0 && x1 == y1;
    }
    for (size_t i = 0; i < n; i++)
        if (a[i] != b[i])
            return 0;
    return 1;
}

static inline int spec_child(const sk_peek_spec *s, int node,
                             const uint8_t *name, size_t len)
{
    /* Most member names in a record are not wanted: reject them by length
     * before walking the children. */
    if (len < 64 && !(s->nodes[node].child_lens >> len & 1))
        return -1;
    for (int c = s->nodes[node].first_child; c >= 0; c = s->nodes[c].next) {
        if (s->nodes[c].name_len == len &&
            short_equal((const uint8_t *)s->nodes[c].name, name, len))
            return c;
    }
    return -1;
}

#endif
