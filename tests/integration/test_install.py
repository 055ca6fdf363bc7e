#!/usr/bin/env python3
"""`cmake --install` gives a working skipprd: it finds its plugins next to
itself (never in the working directory) and copies a pipeline."""
import os
import subprocess

from skippr_test import SKIPPRD, Workspace, assert_exact, check, main


def test_installed_tree_runs():
    ws = Workspace("install")
    try:
        build = os.path.dirname(os.path.dirname(SKIPPRD))
        prefix = os.path.join(ws.root, "prefix")
        subprocess.run(["cmake", "--install", build, "--prefix", prefix],
                       check=True, stdout=subprocess.DEVNULL)
        exe = os.path.join(prefix, "bin", "skipprd")
        for h in ("plugin.h", "status.h", "version.h"):
            check(os.path.exists(os.path.join(prefix, "include", "skippr", h)),
                  "header %s not installed" % h)
        p = subprocess.run([exe, "plugins", "--config", "/nonexistent"],
                           cwd=ws.root, capture_output=True, text=True,
                           check=True)
        check("warning" not in p.stderr, p.stderr)
        sos = [l.strip() for l in p.stdout.splitlines()
               if l.strip().endswith(".so")]
        check(len(sos) >= 3 and all(l.startswith(prefix) for l in sos) and
              any(l.endswith("skippr_file.so") for l in sos),
              "plugins not found under the prefix: %s" % sos)
        ws.generate(objects=4, records=50, seed=8)
        ws.write_config()
        subprocess.run([exe, "sync", "--pipeline", "gdpr_compliant_migration",
                        "--once", "--config", ws.config], check=True,
                       capture_output=True)
        assert_exact(ws)
    finally:
        ws.cleanup()


if __name__ == "__main__":
    main([test_installed_tree_runs])
