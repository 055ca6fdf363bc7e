#!/usr/bin/env python3
"""Exactly once however an operator starts skipprd (issue 38).

The state is the pipeline's, not the working directory's:
- a config file's relative state_dir (and the default, .skippr), and a
  relative File `path`, are read against the file's folder, so the
  seed's config run from its folder,
  from another folder and through a symlinked path copies each record
  once, and `status` from anywhere sees the same state;
- a pipeline given by flags has a state of its own, named after what
  defines the copy: two unrelated copies with the same file names are
  both exact, and the same copy run twice from two folders copies nothing
  the second time;
- the sink knows who writes it: a second state (the state folder deleted,
  another workspace) against a sink the first state claimed is refused
  with a line naming the first, and writes nothing; with
  allow_second_copy a whole second copy lands beside the first, and the
  claim stays the first state's;
- a state belongs to one definition: another source, sink or layout
  against an existing state is refused, naming both, and writes nothing.
"""
import os
import re

import json
import shutil

from skippr_test import (Workspace, assert_exact, check, expected_records,
                         files_snapshot, main, output_records, run)


def seed_config_without_state_dir(ws):
    """ws's config with no state_dir (the default, .skippr) and the
    source's and sink's paths relative to the config's folder."""
    ws.write_config()
    with open(ws.config) as f:
        text = f.read()
    text = re.sub(r"\n  state_dir: [^\n]*", "", text)
    text = text.replace("path: %s\n" % ws.inp, "path: in\n")
    text = text.replace("path: %s\n" % ws.out, "path: ./out\n")
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
              "folder and a symlinked path (state and File paths relative "
              "to the config); status agrees" % n)
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


def claims(ws):
    d = os.path.join(ws.sink_root, "_skippr", "claims")
    return {f: json.load(open(os.path.join(d, f))) for f in os.listdir(d)}


def test_second_state_is_refused():
    ws = Workspace("state-claim")
    try:
        ws.generate(objects=5, records=50, seed=39)
        ws.write_config()
        p = ws.sync("--once")
        first = claims(ws)
        check(len(first) == 1, "claims: %r" % first)
        (claim,) = first.values()
        with open(os.path.join(ws.state, "test", "gdpr_compliant_migration",
                               "state_id")) as f:
            state_id = f.read().strip()
        check(claim["state_id"] == state_id and
              claim["pipeline"] == "gdpr_compliant_migration", claim)
        before = files_snapshot(ws.out)

        def refused(what):
            p = ws.sync("--once", check_rc=False)
            check(p.returncode == 1 and "another state already copies this "
                  "source here: state %s" % state_id in p.err and
                  "allow_second_copy" in p.err and "Nothing was written"
                  in p.err, "%s: exit %d\n%s" % (what, p.returncode,
                                                  p.err[-2000:]))
            check(files_snapshot(ws.out) == before, "%s wrote" % what)

        # A lost state folder (a new box with local state).
        shutil.rmtree(ws.state)
        refused("a new state folder")
        # Another workspace, the first state still there.
        text = open(ws.config).read()
        with open(ws.config, "w") as f:
            f.write(text.replace("workspace: test", "workspace: other"))
        refused("another workspace")
        # A second copy, on purpose: beside the first, every record twice.
        with open(ws.config, "w") as f:
            f.write(text.replace("workspace: test", "workspace: other")
                    .replace("    type: copy\n", "    type: copy\n"
                             "    allow_second_copy: true\n"))
        p = ws.sync("--once")
        check("writing a second copy beside it" in p.err, p.err[-1500:])
        want = expected_records(ws.inp)
        got = output_records(ws.sink_root)
        check(got == want + want, "a second copy on purpose: %d records, "
              "expected %d" % (sum(got.values()), 2 * sum(want.values())))
        check(claims(ws) == first, "the claim changed hands")
        print("  a deleted state folder and another workspace refused, "
              "nothing written; allow_second_copy: %d records twice" %
              sum(want.values()))
    finally:
        ws.cleanup()


def test_changed_definition_is_refused():
    ws = Workspace("state-definition")
    try:
        ws.generate(objects=4, records=50, seed=40)
        ws.write_config()
        ws.sync("--once")
        text = open(ws.config).read()
        before = files_snapshot(ws.out)
        other_in = os.path.join(ws.root, "in2")
        shutil.copytree(ws.inp, other_in)
        changes = {
            "another source": text.replace("path: %s\n" % ws.inp,
                                           "path: %s\n" % other_in),
            "another sink": text.replace("path: %s\n" % ws.out,
                                         "path: %s2\n" % ws.out),
            "another layout": text.replace("batch_time_unit: day",
                                           "batch_time_unit: month"),
        }
        for what, changed in changes.items():
            check(changed != text, "%s: the config did not change" % what)
            with open(ws.config, "w") as f:
                f.write(changed)
            p = ws.sync("--once", check_rc=False)
            check(p.returncode == 1 and "was made for another definition"
                  in p.err and "Nothing was read or written" in p.err,
                  "%s: exit %d\n%s" % (what, p.returncode, p.err[-2000:]))
            check(files_snapshot(ws.out) == before and
                  not os.path.exists(ws.out + "2"), "%s: wrote" % what)
        # Undone, the pipeline goes on: nothing left to copy.
        with open(ws.config, "w") as f:
            f.write(text)
        p = ws.sync("--once")
        check(copied(p) == (0, 4), "undone: %r" % (copied(p),))
        assert_exact(ws)
        print("  another source, another sink and another layout against "
              "the state: each refused, nothing written; undone: goes on")
    finally:
        ws.cleanup()


if __name__ == "__main__":
    main([test_config_file_from_anywhere,
          test_flag_copies_have_their_own_state,
          test_second_state_is_refused,
          test_changed_definition_is_refused])
