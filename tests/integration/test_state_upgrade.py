#!/usr/bin/env python3
"""A state folder written by an older skipprd is read, upgraded and copies
on exactly.

tests/fixtures/state-v1.tar.gz holds three file -> file copies that a
skipprd of version 1 of the WAL's SLICE frame (slice identities as text
after a NUL in the key) left cut short by SIGKILL at the middle of their
commits: the seed's JSON archive with multi-line records (.json slices
beside .jsonl ones), a CSV archive under two headers and an XML archive
under two roots (tests/tools/make_old_state.py made it). Each is resumed
by today's skipprd: every record must land once, byte for byte, under its
partition and (CSV, XML) its own header; the log must say the state was
upgraded; a second run must copy nothing; and the WAL's slices must then
be written in the typed form only.
"""
import base64
import collections
import glob
import json
import os
import shutil
import tarfile

from skippr_test import (SOURCE_DIR, Workspace, check, main, output_records,
                         run)
import test_csv_files
import test_xml_files

FIXTURE = os.path.join(SOURCE_DIR, "tests", "fixtures", "state-v1.tar.gz")
ROOT = "/tmp/skippr-state-v1"  # the paths the old states are tied to


def workspace(name):
    return Workspace(name, root=os.path.join(ROOT, name))


def want_of(ws, with_head):
    with open(os.path.join(ws.root, "want.json")) as f:
        rows = json.load(f)
    want = collections.Counter()
    for key, head, raw, n in rows:
        rec = base64.b64decode(raw)
        if with_head:
            want[(key, base64.b64decode(head), rec)] += n
        else:
            want[(key, rec)] += n
    return want


def got_of(name, ws):
    if name == "csv":
        return test_csv_files.output(ws)
    if name == "xml":
        return test_xml_files.output(ws)
    return output_records(ws.sink_root)


def wal_bytes(ws):
    data = b""
    for p in sorted(glob.glob(os.path.join(ws.state, "*", "*", "wal",
                                           "*.log"))):
        with open(p, "rb") as f:
            data += f.read()
    return data


def resume(name):
    ws = workspace(name)
    before = wal_bytes(ws)
    old_tags = {"csv": b"\0csv:", "xml": b"\0xml:",
                "json": b"\0json:multiline"}[name]
    check(old_tags in before, "%s: the fixture holds no old slice tag" % name)
    p = run(["sync", "--pipeline", "gdpr_compliant_migration", "--once",
             "--config", ws.config])
    check("upgraded" in p.err, "%s: the log does not say the state was "
          "upgraded:\n%s" % (name, p.err[-1500:]))
    want, got = want_of(ws, name != "json"), got_of(name, ws)
    lost, extra = want - got, got - want
    check(not lost and not extra, "%s: %d records lost, %d unexpected of %d"
          % (name, sum(lost.values()), sum(extra.values()),
             sum(want.values())))
    p = run(["sync", "--pipeline", "gdpr_compliant_migration", "--once",
             "--config", ws.config])
    check(got_of(name, ws) == got, "%s: a second run changed the output"
          % name)
    check("upgraded" not in p.err, "%s: upgraded twice" % name)
    check(old_tags not in wal_bytes(ws), "%s: old slice tags remain in the "
          "WAL after the copy finished" % name)
    return sum(want.values())


def test_v1_states_resume_exactly():
    shutil.rmtree(ROOT, ignore_errors=True)
    with tarfile.open(FIXTURE) as t:
        t.extractall(os.path.dirname(ROOT))
    try:
        for name in ("json", "csv", "xml"):
            n = resume(name)
            print("  %s: %d records exact after the upgrade" % (name, n))
    finally:
        shutil.rmtree(ROOT, ignore_errors=True)


if __name__ == "__main__":
    main([test_v1_states_resume_exactly])
