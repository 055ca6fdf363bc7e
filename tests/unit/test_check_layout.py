#!/usr/bin/env python3
"""scripts/check_layout.py fails on each kind of breach: a function over
80 lines, a runtime or plugin file over 600 lines, an include from a layer
above or beside (in any form: by layer, relative, through ../), a plugin
that includes the engine's headers, two files of a folder that need each
other (by header or by call), and an exception of today that grew or is
gone; and passes a tree that keeps the rules. Each case is a small tree in
a temporary folder."""
import os
import subprocess
import sys
import tempfile

CHECK = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                     "scripts", "check_layout.py")


def run(files):
    with tempfile.TemporaryDirectory() as root:
        for path, text in files.items():
            full = os.path.join(root, path)
            os.makedirs(os.path.dirname(full), exist_ok=True)
            with open(full, "w") as f:
                f.write(text)
        env = dict(os.environ, SKIPPR_LAYOUT_ROOT=root)
        p = subprocess.run([sys.executable, CHECK], env=env,
                           capture_output=True, text=True)
        return p.returncode, p.stdout


def function(name, lines):
    return "int %s(void)\n{\n%s    return 0;\n}\n" % (
        name, "    ;\n" * (lines - 4))


GOOD = {
    "runtime/base/a.c": '#include "base/a.h"\n' + function("f", 80),
    "runtime/base/a.h": "int f(void);\n",
    "runtime/base/b.c": '#include "a.h"\nint g(void) { return f(); }\n',
    "runtime/base/b_impl.h": '#include "a.h"\n',
    "runtime/state/state.h": "",
    "runtime/pipeline/p.c": '#include "state/state.h"\n#include "base/a.h"\n',
    "plugins/x/x.c": '#include "skippr/plugin.h"\n#include "x.h"\n',
}

CASES = [
    ("a function of 81 lines",
     {"runtime/base/a.c": function("too_long", 81)}, "too_long() is 81"),
    ("a runtime file of 601 lines",
     {"runtime/base/a.c": "\n" * 601}, "601 lines"),
    ("a plugin file of 601 lines",
     {"plugins/x/x.c": "\n" * 601}, "601 lines"),
    ("a layer including one above it, by a relative path",
     {"runtime/state/s.c": '#include "../pipeline/engine.h"\n',
      "runtime/pipeline/engine.h": ""},
     "layers only call downward"),
    ("two files of a folder that call each other",
     {"runtime/base/a.c": "int f(void)\n{\n    return g();\n}\n",
      "runtime/base/b.c": "int g(void)\n{\n    return f();\n}\n"},
     "circle: runtime/base: a b need each other"),
    ("a circle through a folder's private header",
     {"runtime/base/a.c": '#include "a_impl.h"\n',
      "runtime/base/a_impl.h": '#include "b.h"\n',
      "runtime/base/b.h": "", "runtime/base/b.c": '#include "a.h"\n',
      "runtime/base/a.h": ""},
     "circle: runtime/base: a b need each other"),
    ("a layer including one above it",
     {"runtime/state/s.c": '#include "pipeline/engine.h"\n'},
     "layers only call downward"),
    ("a layer including a sibling",
     {"runtime/format/j.c": '#include "state/wal.h"\n'},
     "layers only call downward"),
    ("a plugin including the engine",
     {"plugins/x/x.c": '#include "base/common.h"\n'},
     "plugins use only include/skippr/"),
]


def main():
    rc, out = run(GOOD)
    if rc != 0:
        print("FAIL: a tree that keeps the rules was refused:\n" + out)
        return 1
    bad = 0
    for what, files, words in CASES:
        rc, out = run(files)
        if rc != 1 or words not in out:
            print("FAIL: %s: exit %d, output:\n%s" % (what, rc, out))
            bad += 1
        else:
            print("PASS: %s is caught" % what)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
