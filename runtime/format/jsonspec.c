/* The peek spec (jsonspec.h): the routing paths as a trie of member names,
 * which the scanner walks as it meets members, and the skim mode's
 * groups. Built once per router; read-only while records are scanned.
 */
#include "format/jsonspec_impl.h"

#include <stdlib.h>
#include <string.h>

#include "base/common.h"

static int spec_add_node(sk_peek_spec *s, int parent, const char *name,
                         size_t len)
{
    if (s->nnodes == s->cap) {
        size_t ncap = s->cap ? s->cap * 2 : 8;
        peek_node *n = sk_realloc(s->nodes, ncap * sizeof *n);
        if (!n)
            return -1;
        s->nodes = n;
        char **nm = sk_realloc(s->names, ncap * sizeof *nm);
        if (!nm)
            return -1;
        s->names = nm;
        s->cap = ncap;
    }
    char *copy = sk_strndup(name, len);
    if (!copy)
        return -1;
    int idx = (int)s->nnodes++;
    s->names[idx] = copy;
    s->nodes[idx] = (peek_node){.name = copy, .name_len = len, .slot = -1,
                                .first_child = -1, .next = -1};
    if (parent >= 0) {
        s->nodes[idx].next = s->nodes[parent].first_child;
        s->nodes[parent].first_child = idx;
        s->nodes[parent].child_lens |= len < 64 ? 1ULL << len : ~0ULL;
    }
    return idx;
}

sk_peek_spec *sk_peek_spec_new(const char *const *paths, size_t n)
{
    sk_peek_spec *made = NULL, *s = NULL;
    if (n > SK_PEEK_MAX_PATHS)
        goto fail;
    s = sk_calloc(1, sizeof *s);
    if (!s)
        goto fail;
    if (spec_add_node(s, -1, "", 0) != 0)
        goto fail;
    for (size_t i = 0; i < n; i++) {
        const char *p = paths[i];
        int node = 0;
        for (;;) {
            const char *dot = strchr(p, '.');
            size_t seg = dot ? (size_t)(dot - p) : strlen(p);
            if (seg == 0)
                goto fail;
            int c = spec_child(s, node, (const uint8_t *)p, seg);
            if (c < 0)
                c = spec_add_node(s, node, p, seg);
            if (c < 0)
                goto fail;
            node = c;
            if (!dot)
                break;
            p = dot + 1;
        }
        if (s->nodes[node].slot >= 0)
            continue; /* duplicate path: the first slot keeps it */
        s->nodes[node].slot = (int)i;
    }
    s->npaths = n;
    made = s;
    s = NULL; /* handed to the caller */
fail:
    sk_peek_spec_free(s);
    return made;
}

void sk_peek_spec_free(sk_peek_spec *s)
{
    if (!s)
        return;
    for (size_t i = 0; i < s->nnodes; i++)
        sk_free(s->names[i]);
    sk_free(s->names);
    sk_free(s->nodes);
    sk_free(s);
}

size_t sk_peek_spec_count(const sk_peek_spec *s) { return s ? s->npaths : 0; }

void sk_peek_spec_set_lines(sk_peek_spec *s, int lines)
{
    s->lines = lines;
}

int sk_peek_spec_set_skim(sk_peek_spec *s, const sk_peek_group *groups,
                          size_t n)
{
    memset(s->settles, 0, sizeof s->settles);
    memset(s->settle_kind, 0, sizeof s->settle_kind);
    s->need = 0;
    for (size_t g = 0; g < n; g++) {
        const sk_peek_group *gr = &groups[g];
        if (gr->settle == SK_SETTLE_NEVER || gr->first >= s->npaths) {
            s->need = -1; /* some group is known only at the record's end */
            continue;
        }
        if (s->need >= 0)
            s->need++;
        s->settles[gr->first]++;
        if (gr->settle > s->settle_kind[gr->first])
            s->settle_kind[gr->first] = (uint8_t)gr->settle;
    }
    s->skim = 1;
    return SKIPPR_OK;
}
