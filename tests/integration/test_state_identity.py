#!/usr/bin/env python3
"""Exactly once however an operator starts skipprd (issue 38).

The state is the pipeline's, not the working directory's:
- a config file's relative state_dir (and the default, .skippr) is read
  against the file's folder, so the seed's config run from its folder,
  from another folder and through a symlinked path copies each record
  once, and `status` from anywhere sees the same state;
- a pipeline given by flags has a state of its own, named after what
  defines the copy: two unrelated copies with the same file names are
  both exact, and the same copy run twice from two folders copies nothing
  the second time.
"""
import os
import re

from skippr_test import (Workspace, assert_exact, check, main, run)


def seed_config_without_state_dir(ws):
    """ws's config with no state_dir: the default, .skippr."""
    ws.write_config()
    with open(ws.config) as f:
        text = f.read()
    text = re.sub(r"\n  state_dir: [^\n]*", "", text)
    with open(ws.config, "w") as f:
        f.write(text)


def copied(p):
    m = re.search(r"done: (\d+) units copied, (\d+) already done", p.err)
    check(m, "no summary line:\n%s" % p.err[-2000:])
    return int(m.group(1)), int(m.group(2))


def test_config_file_from_anywhere():
    ws = Workspace("state-anywhere")
    try:
        ws.generate(objects=6, records=60, seed=38)
        seed_config_without_state_dir(ws)
        args = ["sync", "--once", "--pipeline", "gdpr_compliant_migration"]
        # From the config's own folder, as the seed's README has it.
        p = run(args, cwd=ws.root)
        check(copied(p) == (6, 0), "first run: %s" % p.err[-1500:])
        check(os.path.isdir(os.path.join(ws.root, ".skippr", "test",
                                         "gdpr_compliant_migration")),
              "state not beside the config")
        # From another folder, as cron or systemd would.
        other = os.path.join(ws.root, "elsewhere")
        os.makedirs(other)
        p = run(args + ["--config", ws.config], cwd=other)
        check(copied(p) == (0, 6), "from another folder: %s" % p.err[-1500:])
        check(not os.path.exists(os.path.join(other, ".skippr")),
              "state made in the working directory")
        # Through a symlink to the config's folder, from /.
        link = os.path.join(ws.root, "link")
        os.symlink(ws.root, link)
        p = run(args + ["--config", os.path.join(link, "skippr.yml")],
                cwd="/")
        check(copied(p) == (0, 6), "through a symlink: %s" % p.err[-1500:])
        p = run(["status", "--pipeline", "gdpr_compliant_migration",
                 "--config", ws.config], cwd=other)
        check("units done:      6" in p.out and "never run" not in p.out,
              "status from another folder:\n%s" % p.out)
        n = assert_exact(ws)
        print("  %d records once: run from the config's folder, another "
              "folder and a symlinked path; status agrees" % n)
    finally:
        ws.cleanup()


def flag_copy(inp, out, cwd):
    return run(["sync", "--once", "--source", inp, "--sink", out,
                "--namespace-fields", "event_type"], cwd=cwd)


def test_flag_copies_have_their_own_state():
    ws = Workspace("state-flags")
    try:
        a, b = os.path.join(ws.root, "a"), os.path.join(ws.root, "b")
        for d, body in ((a, b'{"id":1,"event_type":"x"}\n'),
                        (b, b'{"id":2,"event_type":"y"}\n')):
            os.makedirs(os.path.join(d, "raw"))
            for name in ("f1", "f2"):
                with open(os.path.join(d, "raw", name), "wb") as f:
                    f.write(body)
        # Two unrelated copies, the same file names: both are copied.
        p = flag_copy(os.path.join(a, "raw"), os.path.join(a, "out"), a)
        check(copied(p) == (2, 0), "copy a: %s" % p.err[-1500:])
        # From the same folder, by relative paths.
        p = flag_copy("../b/raw", "../b/out", a)
        check(copied(p) == (2, 0), "copy b: %s" % p.err[-1500:])
        for d, ns in ((a, "x"), (b, "y")):
            files = os.listdir(os.path.join(d, "out", ns))
            data = b"".join(open(os.path.join(d, "out", ns, f), "rb").read()
                            for f in files)
            check(data.count(b"\n") == 2, "%s/out: %r" % (d, data))
        # The same copy again, from another folder: nothing to do.
        p = flag_copy(os.path.join(b, "raw"), os.path.join(b, "out"), a)
        check(copied(p) == (0, 2), "copy b again: %s" % p.err[-1500:])
        print("  two copies by flags with the same file names: both exact; "
              "the same copy again from another folder: 0 copied")
    finally:
        ws.cleanup()


if __name__ == "__main__":
    main([test_config_file_from_anywhere,
          test_flag_copies_have_their_own_state])
