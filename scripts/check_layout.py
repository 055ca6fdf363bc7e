#!/usr/bin/env python3
"""The house rules a reader can rely on, checked (run by scripts/test.sh):

1. No function over MAX_FUNC lines, in runtime/, plugins/ and sdk/c/.
2. No file in runtime/ or plugins/ over MAX_FILE lines.
3. Layers only call downward: a file in runtime/<layer>/ includes headers
   of its own layer or of a layer with a lower rank (RANKS below, the same
   order as docs/ARCHITECTURE.md); never of a layer beside it or above.
4. Plugins use only the public ABI: nothing under plugins/ includes a
   header from runtime/.
5. No circles between the files of one folder. A file here is a source
   with its header of the same name (foo.c and foo.h); it needs another
   when it includes that one's header or calls a function only that one
   defines. A header without a source of its own (a folder's private
   header) passes its own includes on to whoever includes it.

Includes are resolved whatever their form: relative to the including
file, then against runtime/, include/, plugins/common/ and the plugin's
own folder; the layer of an include is the folder of the file it names.

The tree holds every rule with no exception (issue 40 cut the last);
the one file not held to the file limit is the SDK's testkit (sdk/c),
whose functions are.

Prints each breach and exits 1 if there is any. SKIPPR_LAYOUT_ROOT checks
another tree (tests/unit/test_check_layout.py does). A function is a line at
column 0 that closes a parenthesis, then "{" alone at column 0, up to the
next "}" at column 0, which is the style of this tree (docs/STYLE.md)."""
import collections
import os
import re
import sys

MAX_FUNC = 80
MAX_FILE = 600
# rank: a layer may include from layers of a strictly lower rank, and from
# itself. Layers of equal rank are siblings and do not know each other.
RANKS = {
    "base": 0,
    "sched": 1, "format": 1, "state": 1,
    "route": 2, "verify": 2,
    "config": 3,
    "plugin": 4,
    "pipeline": 5,
    "cli": 6,
}
ROOT = os.environ.get("SKIPPR_LAYOUT_ROOT") or os.path.dirname(
    os.path.dirname(os.path.abspath(__file__)))
INCLUDE = re.compile(r'^\s*#\s*include\s+(["<])([^">]+)[">]')
ONE_LINE = re.compile(r"^(?!static\b)[A-Za-z_][\w \t*]*?\b(\w+)\s*\([^;{}]*\)"
                      r"\s*\{.*\}\s*$")  # int f(void) { return 0; }
COMMENT = re.compile(r"/\*.*?\*/|//[^\n]*|\"(?:\\.|[^\"\\\n])*\"", re.S)


def sources(top):
    for d, _, names in sorted(os.walk(os.path.join(ROOT, top))):
        for n in sorted(names):
            if n.endswith((".c", ".h")):
                yield os.path.join(d, n)


def functions(lines):
    """(name, first line, length, exported) of each function body."""
    start = None
    for i, line in enumerate(lines):
        if line.rstrip() == "{" and i > 0 and ")" in lines[i - 1] and start is None:
            j = i - 1
            while j > 0 and lines[j - 1].strip() and not lines[j - 1].startswith(
                    ("}", "#", "/", " *", "*")) and not lines[j - 1].rstrip().endswith(";"):
                j -= 1
            head = "".join(lines[j:i])
            m = re.search(r"(\w+)\s*\(", head)
            start = (m.group(1) if m else "?", j,
                     not re.search(r"\bstatic\b", head))
        elif start is not None and line.startswith("}"):
            yield start[0], start[1] + 1, i - start[1] + 1, start[2]
            start = None


def resolve(path, quote, inc):
    """The file an include names, or None (a system header)."""
    rel = os.path.relpath(path, ROOT).split(os.sep)
    bases = [os.path.dirname(path)] if quote == '"' else []
    bases += [os.path.join(ROOT, "runtime"), os.path.join(ROOT, "include"),
              os.path.join(ROOT, "plugins", "common")]
    if rel[0] == "plugins" and len(rel) > 2:
        bases.append(os.path.join(ROOT, "plugins", rel[1]))
    for b in bases:
        q = os.path.normpath(os.path.join(b, inc))
        if os.path.isfile(q):
            return q
    if quote == '"' and inc.split("/")[0] in RANKS:
        return os.path.join(ROOT, "runtime", inc)  # named by its layer
    return None


class Tree:
    """Every source file: its lines, resolved includes, exported functions."""

    def __init__(self, tops):
        self.lines, self.incs, self.exports = {}, {}, {}
        for top in tops:
            for path in sources(top):
                with open(path, encoding="utf-8") as f:
                    self.lines[path] = f.read().split("\n")
        for path, lines in self.lines.items():
            found = []
            for k, line in enumerate(lines):
                m = INCLUDE.match(line)
                if m:
                    found.append((k + 1, m.group(2),
                                  resolve(path, m.group(1), m.group(2))))
            self.incs[path] = found
            if path.endswith(".c"):
                self.exports[path] = {
                    name for name, _, _, exported in functions(lines)
                    if exported} | {m.group(1) for m in map(
                        ONE_LINE.match, lines) if m}


def check_sizes(tree, bad):
    for path, lines in tree.lines.items():
        rel = os.path.relpath(path, ROOT)
        for name, at, n, _ in functions(lines):
            if n > MAX_FUNC:
                bad.append("%s:%d: %s() is %d lines (at most %d)"
                           % (rel, at, name, n, MAX_FUNC))
        if not rel.startswith("sdk") and len(lines) - 1 > MAX_FILE:
            bad.append("%s: %d lines (at most %d)"
                       % (rel, len(lines) - 1, MAX_FILE))


def check_layers(tree, bad):
    for path, found in tree.incs.items():
        rel = os.path.relpath(path, ROOT)
        parts = rel.split(os.sep)
        for line, text, target in found:
            if target is None:
                continue
            trel = os.path.relpath(target, ROOT).split(os.sep)
            if parts[0] == "plugins":
                if trel[0] == "runtime":
                    bad.append("%s:%d: a plugin includes %s: plugins use "
                               "only include/skippr/" % (rel, line, text))
                continue
            if parts[0] != "runtime" or trel[0] != "runtime":
                continue
            own = parts[1] if len(parts) > 2 else None
            if own not in RANKS:
                bad.append("%s: not in a layer folder" % rel)
                break
            layer = trel[1] if len(trel) > 2 else None
            if layer in RANKS and layer != own and RANKS[layer] >= RANKS[own]:
                bad.append("%s:%d: %s (rank %d) includes %s (rank %d): "
                           "layers only call downward"
                           % (rel, line, own, RANKS[own], text,
                              RANKS[layer]))


def stem(path):
    return os.path.splitext(path)[0]


def needs(tree):
    """Folder -> {file stem: stems of that folder it needs}."""
    has_c = {stem(p) for p in tree.lines if p.endswith(".c")}
    words = {}
    for p, lines in tree.lines.items():
        if p.endswith(".c"):
            words[p] = set(re.findall(r"\b\w+\b",
                                      COMMENT.sub(" ", "\n".join(lines))))

    def header_needs(h, seen):
        """Stems a folder's header leads to (through private headers)."""
        out = set()
        for _, _, t in tree.incs.get(h, ()):
            if t is None or os.path.dirname(t) != os.path.dirname(h):
                continue
            if stem(t) in has_c:
                out.add(stem(t))
            elif t not in seen:
                seen.add(t)
                out |= header_needs(t, seen)
        return out

    graph = collections.defaultdict(lambda: collections.defaultdict(set))
    for p in tree.lines:
        s, d = stem(p), os.path.dirname(p)
        if s not in has_c:
            continue
        graph[d][s] |= header_needs(p, {p}) - {s}
        if p.endswith(".c"):
            for q, names in tree.exports.items():
                if (os.path.dirname(q) == d and stem(q) != s
                        and names & words[p]):
                    graph[d][s].add(stem(q))
    return graph


def circles(graph):
    """Strongly connected sets of more than one file, per folder."""
    out = []
    for d, g in graph.items():
        index, low, stack, on = {}, {}, [], set()

        def visit(v):
            index[v] = low[v] = len(index)
            stack.append(v)
            on.add(v)
            for w in g.get(v, ()):
                if w not in index:
                    visit(w)
                    low[v] = min(low[v], low[w])
                elif w in on:
                    low[v] = min(low[v], index[w])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                if len(comp) > 1:
                    out.append("%s: %s" % (
                        os.path.relpath(d, ROOT),
                        " ".join(sorted(os.path.basename(c) for c in comp))))
        for v in sorted(g):
            if v not in index:
                visit(v)
    return out


def check_circles(tree, bad):
    for c in sorted(set(circles(needs(tree)))):
        bad.append("circle: %s need each other" % c)


def main():
    tree = Tree(("runtime", "plugins", "sdk/c"))
    bad = []
    check_sizes(tree, bad)
    check_layers(tree, bad)
    check_circles(tree, bad)
    for b in bad:
        print(b)
    if bad:
        print("check_layout: %d breach(es)" % len(bad))
        return 1
    print("check_layout: ok (functions <= %d lines, files <= %d lines; "
          "layers call downward; plugins use the ABI only; no circles in a "
          "folder)" % (MAX_FUNC, MAX_FILE))
    return 0


if __name__ == "__main__":
    sys.exit(main())
