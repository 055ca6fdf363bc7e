/* Private to format/'s JSON files: the peek spec's trie, which jsonspec.c
 * builds and json.c walks (spec_child). Not included by json.h. */
#ifndef SK_JSONSPEC_IMPL_H
#define SK_JSONSPEC_IMPL_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "format/jsonspec.h"

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
