#!/usr/bin/env python3
"""The house rules a reader can rely on, checked (run by scripts/test.sh):

1. No function over MAX_FUNC lines, in runtime/, plugins/ and sdk/c/.
2. No file in runtime/ over MAX_FILE lines.
3. Layers only call downward: a file in runtime/<layer>/ includes headers
   of its own layer or of a layer with a lower rank (RANKS below, the same
   order as docs/ARCHITECTURE.md); never of a layer beside it or above.
4. Plugins use only the public ABI: nothing under plugins/ includes a
   header from runtime/.

Prints each breach and exits 1 if there is any. SKIPPR_LAYOUT_ROOT checks
another tree (tests/unit/test_check_layout.py does). A function is a line at
column 0 that closes a parenthesis, then "{" alone at column 0, up to the
next "}" at column 0, which is the style of this tree (docs/STYLE.md)."""
import os
import re
import sys

MAX_FUNC = 120
MAX_FILE = 800
# rank: a layer may include from layers of a strictly lower rank, and from
# itself. Layers of equal rank are siblings and do not know each other.
RANKS = {
    "base": 0,
    "sched": 1, "format": 1, "state": 1,
    "route": 2,
    "config": 3,
    "plugin": 4,
    "pipeline": 5,
    "cli": 6,
}
ROOT = os.environ.get("SKIPPR_LAYOUT_ROOT") or os.path.dirname(
    os.path.dirname(os.path.abspath(__file__)))
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')


def sources(top):
    for d, _, names in os.walk(os.path.join(ROOT, top)):
        for n in sorted(names):
            if n.endswith((".c", ".h")):
                yield os.path.join(d, n)


def functions(lines):
    """(name, first line, length) of each function body in lines."""
    start = None
    for i, line in enumerate(lines):
        if line.rstrip() == "{" and i > 0 and ")" in lines[i - 1] and start is None:
            j = i - 1
            while j > 0 and lines[j - 1].strip() and not lines[j - 1].startswith(
                    ("}", "#", "/", " *", "*")) and not lines[j - 1].rstrip().endswith(";"):
                j -= 1
            m = re.search(r"(\w+)\s*\(", "".join(lines[j:i]))
            start = (m.group(1) if m else "?", j)
        elif start is not None and line.startswith("}"):
            yield start[0], start[1] + 1, i - start[1] + 1
            start = None


def main():
    bad = []
    for top in ("runtime", "plugins", "sdk/c"):
        for path in sources(top):
            rel = os.path.relpath(path, ROOT)
            with open(path, encoding="utf-8") as f:
                lines = f.read().split("\n")
            for name, at, n in functions(lines):
                if n > MAX_FUNC:
                    bad.append("%s:%d: %s() is %d lines (at most %d)"
                               % (rel, at, name, n, MAX_FUNC))
            parts = rel.split(os.sep)
            if top == "runtime" and len(lines) - 1 > MAX_FILE:
                bad.append("%s: %d lines (at most %d)"
                           % (rel, len(lines) - 1, MAX_FILE))
            for k, line in enumerate(lines):
                m = INCLUDE.match(line)
                if not m:
                    continue
                inc = m.group(1)
                layer = inc.split("/")[0] if "/" in inc else None
                if top == "plugins":
                    if layer in RANKS or inc.startswith("runtime/"):
                        bad.append("%s:%d: a plugin includes %s: plugins use "
                                   "only include/skippr/" % (rel, k + 1, inc))
                    continue
                if top != "runtime" or layer is None:
                    continue
                own = parts[1] if len(parts) > 2 else None
                if own not in RANKS:
                    bad.append("%s: not in a layer folder" % rel)
                    break
                if layer not in RANKS:
                    continue
                if layer != own and RANKS[layer] >= RANKS[own]:
                    bad.append("%s:%d: %s (rank %d) includes %s (rank %d): "
                               "layers only call downward"
                               % (rel, k + 1, own, RANKS[own], inc,
                                  RANKS[layer]))
    for b in bad:
        print(b)
    if bad:
        print("check_layout: %d breach(es)" % len(bad))
        return 1
    print("check_layout: ok (functions <= %d lines, runtime files <= %d "
          "lines, layers call downward, plugins use the ABI only)"
          % (MAX_FUNC, MAX_FILE))
    return 0


if __name__ == "__main__":
    sys.exit(main())
