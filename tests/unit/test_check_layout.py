#!/usr/bin/env python3
"""scripts/check_layout.py fails on each kind of breach: a function over
120 lines, a runtime file over 800 lines, an include from a layer above
or beside, a plugin that includes the engine's headers; and passes a
tree that keeps the rules. Each case is a small tree in a temporary
folder."""
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
    "runtime/base/a.c": '#include "base/a.h"\n' + function("f", 120),
    "runtime/pipeline/p.c": '#include "state/state.h"\n#include "base/a.h"\n',
    "plugins/x/x.c": '#include "skippr/plugin.h"\n#include "x.h"\n',
}

CASES = [
    ("a function of 121 lines",
     {"runtime/base/a.c": function("too_long", 121)}, "too_long() is 121"),
    ("a runtime file of 801 lines",
     {"runtime/base/a.c": "\n" * 801}, "801 lines"),
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
