#!/usr/bin/env python3
"""One process per pipeline, graceful stop, and path safety.

- While one skipprd runs a pipeline, a second fails at once with a clear
  message (exit 3); SIGTERM stops the first cleanly and saves progress.
- A stop asked for while a continuous run writes sealed slices
  (SKIPPR_CRASH=sink_commit:1:term) is a graceful stop too: exit 0,
  progress saved, and the next run finishes exactly.
- Tenant and namespace values such as ../../etc, a/b, .., a NUL byte, 4 KiB
  strings and %2F never produce a path outside the sink folder, and land
  where the escaping rules say.
"""
import json
import os
import signal
import subprocess
import time

from skippr_test import (SKIPPRD, Workspace, assert_exact, check, main, run)


def status(ws):
    return run(["status", "--pipeline", "gdpr_compliant_migration",
                "--config", ws.config]).out


def test_second_process_refused_and_sigterm():
    ws = Workspace("lock")
    try:
        ws.generate(objects=5, records=100, seed=2)
        ws.write_config(pipeline_extra={"poll_interval_seconds": 1,
                                        "buffer_threshold_seconds": 3600})
        first = subprocess.Popen([SKIPPRD, "sync", "--pipeline",
                                  "gdpr_compliant_migration", "--config",
                                  ws.config], stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE)
        deadline = time.time() + 20
        while "running:         yes" not in status(ws):
            check(time.time() < deadline, "first skipprd never took the lock")
            time.sleep(0.05)
        second = ws.sync("--once", check_rc=False)
        check(second.returncode == 3, "second exited %d" % second.returncode)
        check("already running" in second.err and
              "process %d" % first.pid in second.err,
              "unclear message: %s" % second.err)
        # Let it copy (continuous mode: slices stay open), then stop it.
        deadline = time.time() + 20
        while "units partial:   0" not in status(ws) or \
                "units done:      0 (compacted ledger) + 5" not in status(ws):
            check(time.time() < deadline, "first run made no progress: %s" %
                  status(ws))
            time.sleep(0.1)
        first.send_signal(signal.SIGTERM)
        out, err = first.communicate(timeout=30)
        check(first.returncode == 0, "SIGTERM exit %d: %s" % (first.returncode,
                                                              err.decode()))
        check(b"stopped on request" in err, err.decode())
        s = status(ws)
        check("running:         no" in s, s)
        check("slices open:" in s and "slices open:     0" not in s,
              "open slices should wait in the WAL: %s" % s)
        # The next --once finishes the job from the WAL: exactly once.
        p = ws.sync("--once")
        check("0 units copied, 5 already done" in p.err, p.err)
        assert_exact(ws)
    finally:
        ws.cleanup()


def test_stop_while_sealing_between_polls():
    ws = Workspace("stopseal")
    try:
        ws.generate(objects=5, records=200, seed=3)
        # Continuous mode, polls 30 s apart: the generated days are past,
        # so event time seals their slices in the flush after the first
        # pass (the flush run while waiting for a poll is the same call,
        # and sealing after 1 s of wall clock feeds it too), and the stop
        # is asked for while that flush writes them.
        ws.write_config(pipeline_extra={"poll_interval_seconds": 30,
                                        "buffer_threshold_seconds": 1})
        p = ws.sync(env={"SKIPPR_CRASH": "sink_commit:1:term"}, timeout=60,
                    check_rc=False)
        err = p.err
        check("crash point sink_commit reached, asking to stop" in err, err)
        check(p.returncode == 0, "exit %d: %s" % (p.returncode, err))
        check("stopped on request; progress is saved" in err, err)
        p = ws.sync("--once")
        check("0 units copied, 5 already done" in p.err, p.err)
        assert_exact(ws)
    finally:
        ws.cleanup()


EVIL = ["../../etc", "a/b", "..", ".", "a\u0000b", "x" * 4096, "%2F..%2F",
        "/abs/path", "\\..\\..\\win", "tab\tnew\nline", "\u00e9\u2603",
        "..\u002f..", "~", "CON", "*?:=[]{}^#'\""]


def test_path_safety():
    ws = Workspace("paths")
    try:
        folder = os.path.join(ws.inp, "ill-just-dump-this-here/2021/10/03")
        os.makedirs(folder)
        lines = []
        for i, v in enumerate(EVIL):
            lines.append(json.dumps({"event_type": v, "timestamp": "2021-10-03",
                                     "detail": {"tenant_id": v}, "i": i}))
            lines.append(json.dumps({"event_type": "ok", "truck":
                                     {"tenant_id": v}, "i": i}))
        with open(os.path.join(folder, "evil"), "w") as f:
            f.write("\n".join(lines) + "\n")
        ws.write_config()
        ws.sync("--once")
        root = os.path.realpath(ws.out)
        count = 0
        for dirpath, dirs, files in os.walk(ws.root):
            for fn in files + dirs:
                real = os.path.realpath(os.path.join(dirpath, fn))
                check(real.startswith(os.path.realpath(ws.root) + os.sep),
                      "escaped the workspace: %s" % real)
        for dirpath, _, files in os.walk(ws.out):
            for fn in files:
                real = os.path.realpath(os.path.join(dirpath, fn))
                check(real.startswith(root + os.sep), "outside sink: %s" % real)
                check(len(fn.encode()) <= 255, "name too long")
                for seg in os.path.relpath(dirpath, root).split(os.sep):
                    check(len(seg.encode()) <= 200, "segment over 200 bytes")
                count += 1
        # Nothing appeared next to the sink (e.g. out/../etc).
        check(sorted(os.listdir(ws.root)) == ["in", "out", "skippr.yml",
                                              "state"],
              "unexpected entries: %s" % os.listdir(ws.root))
        n = assert_exact(ws)
        check(n == 2 * len(EVIL), "records: %d" % n)
        print("  %d hostile values, %d objects, all under the sink" %
              (len(EVIL), count))
    finally:
        ws.cleanup()


if __name__ == "__main__":
    main([test_second_process_refused_and_sigterm,
          test_stop_while_sealing_between_polls, test_path_safety])
