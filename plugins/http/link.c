/* HTTP Link headers (RFC 8288): the rel="next" target that HTTPPull's
 * follow_next walks. See link.h.
 */
#include "link.h"

#include <ctype.h>
#include <string.h>
#include <strings.h>

/* Does a Link parameter list (after the <target>) say rel="next"? rel may
 * hold several space-separated relation types, quoted or not. */
static int rel_next(const char *p, size_t n)
{
    for (size_t i = 0; i + 4 <= n; i++) {
        if (strncasecmp(p + i, "rel", 3) != 0 ||
            (i && !(p[i - 1] == ';' || isspace((unsigned char)p[i - 1]))))
            continue;
        size_t k = i + 3;
        while (k < n && isspace((unsigned char)p[k]))
            k++;
        if (k >= n || p[k] != '=')
            continue;
        k++;
        while (k < n && isspace((unsigned char)p[k]))
            k++;
        int quoted = k < n && p[k] == '"';
        k += quoted;
        while (k < n && p[k] != ';' && (quoted ? p[k] != '"' : 1)) {
            while (k < n && isspace((unsigned char)p[k]))
                k++;
            size_t w = k;
            while (w < n && !isspace((unsigned char)p[w]) && p[w] != '"' &&
                   p[w] != ';')
                w++;
            if (w - k == 4 && strncasecmp(p + k, "next", 4) == 0)
                return 1;
            if (!quoted)
                break;
            k = w;
        }
    }
    return 0;
}

int http_link_next(const char *p, size_t n, char *out, size_t cap)
{
    size_t i = 0;
    while (i < n) {
        const char *lt = memchr(p + i, '<', n - i);
        if (!lt)
            return 0;
        const char *gt = memchr(lt, '>', (size_t)(p + n - lt));
        if (!gt)
            return 0;
        size_t pstart = (size_t)(gt - p) + 1, pend = pstart;
        int inq = 0;
        while (pend < n && (inq || p[pend] != ',')) {
            inq ^= p[pend] == '"';
            pend++;
        }
        if (rel_next(p + pstart, pend - pstart)) {
            size_t tl = (size_t)(gt - lt) - 1;
            if (tl >= cap)
                return -1;
            memcpy(out, lt + 1, tl);
            out[tl] = '\0';
            return 1;
        }
        i = pend + 1;
    }
    return 0;
}
