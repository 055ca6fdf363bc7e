#!/usr/bin/env python3
"""Makes tests/fixtures/state-v1.tar.gz: copies cut short by a kill, as a
skipprd whose WAL wrote slice identities as text in the key (version 1 of
the SLICE frame) left them. test_state_upgrade.py resumes them with
today's skipprd.

Three copies, file -> file, at fixed paths under ROOT (a state is tied to
the absolute paths of its source and sink): the seed's JSON archive with
pretty-printed records (multi-line .json slices beside .jsonl ones), a CSV
archive under two headers, and an XML archive under two roots. Each run is
killed (SIGKILL) at the middle of its commits, so the state holds open
slices of every form. The oracle of each copy (every record's partition,
header and bytes) is written beside it as want.json.

Usage: SKIPPRD=/path/to/old/skipprd python3 tests/tools/make_old_state.py
"""
import base64
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "integration"))
import skippr_test as T  # noqa: E402
import test_csv_files  # noqa: E402
import test_xml_files  # noqa: E402

ROOT = "/tmp/skippr-state-v1"
OUT = os.path.join(HERE, "..", "fixtures", "state-v1.tar.gz")
MTIME = 1700000000 * 10**9
PIPE = {"max_object_bytes": "16KiB", "commit_interval_ms": 0}


def workspace(name):
    return T.Workspace(name, root=os.path.join(ROOT, name))


def copies():
    """(workspace, want) of each copy: want is a list of [partition,
    header or null, record] (base64 where bytes) with counts."""
    ws = workspace("json")
    ws.generate(objects=8, records=80, seed=41)
    ws.generate(objects=3, records=60, seed=44, framing="pretty",
                first_id=100000)
    ws.write_config(pipeline_extra=PIPE)
    want = [[k, None, base64.b64encode(r).decode(), n]
            for (k, r), n in T.expected_records(ws.inp).items()]
    yield ws, want
    ws = workspace("csv")
    w = test_csv_files.generate(ws.inp, objects=6, rows=150, seed=42)
    test_csv_files.config(ws, pipeline_extra=PIPE)
    yield ws, [[k, base64.b64encode(h).decode(),
                base64.b64encode(r).decode(), n] for (k, h, r), n in w.items()]
    ws = workspace("xml")
    w = test_xml_files.generate(ws.inp, objects=6, records=150, seed=43)
    test_xml_files.config(ws, pipeline_extra=PIPE)
    yield ws, [[k, base64.b64encode(h).decode(),
                base64.b64encode(r).decode(), n] for (k, h, r), n in w.items()]


def run(ws, env):
    return subprocess.run([T.SKIPPRD, "sync", "--pipeline",
                           "gdpr_compliant_migration", "--once", "--config",
                           ws.config], env=dict(os.environ, **env),
                          capture_output=True, text=True, timeout=300)


def whole_seconds(folder):
    """Source files' times in whole seconds, which a tar keeps exactly (a
    File unit's version is its mtime in nanoseconds and its size)."""
    for dirpath, _, files in os.walk(folder):
        for fn in files:
            os.utime(os.path.join(dirpath, fn), ns=(MTIME, MTIME))


def cut_short(ws):
    """Runs the copy once to count its commits, then again from scratch,
    killed at the middle one."""
    whole_seconds(ws.inp)
    tally = os.path.join(tempfile.mkdtemp(), "tally")
    p = run(ws, {"SKIPPR_CRASH_TALLY": tally})
    T.check(p.returncode == 0, p.stderr[-2000:])
    with open(tally) as f:
        n = dict(line.split() for line in f).get("commit", "0")
    T.check(int(n) >= 4, "%s: only %s commits" % (ws.root, n))
    shutil.rmtree(ws.out)
    shutil.rmtree(ws.state)
    p = run(ws, {"SKIPPR_CRASH": "commit:%d" % ((int(n) + 1) // 2)})
    T.check(p.returncode == -9, "%s: not killed: %s" % (ws.root,
                                                       p.stderr[-2000:]))
    return int(n)


def main():
    shutil.rmtree(ROOT, ignore_errors=True)
    for ws, want in copies():
        n = cut_short(ws)
        with open(os.path.join(ws.root, "want.json"), "w") as f:
            json.dump(want, f)
        print("%s: killed at commit %d of %d" % (ws.root, (n + 1) // 2, n))
    with tarfile.open(OUT, "w:gz") as t:
        t.add(ROOT, arcname=os.path.basename(ROOT))
    print("wrote %s (%d bytes)" % (OUT, os.path.getsize(OUT)))


if __name__ == "__main__":
    main()
