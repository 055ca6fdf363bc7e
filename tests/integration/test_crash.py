#!/usr/bin/env python3
"""Crash safety: SIGKILL at 50 or more points, restart after each, and the
final output equals the input multiset: 0 lost, 0 duplicated, 0 changed.

Kill points come from two sources, chosen by a seeded generator:
  - named crash points inside skipprd (SKIPPR_CRASH=POINT:N): while reading,
    during group commit, after seal, during the sink write, just before the
    sink's rename, after it, and during WAL garbage collection;
  - a plain SIGKILL from outside after a random delay.
New objects arrive between runs so every run has work. The seed and every
kill point are printed; SKIPPR_CRASH_SEED=N reproduces a run.
"""
import os
import random
import signal
import subprocess
import sys
import time

from skippr_test import (GEN, SKIPPRD, KillClock, Workspace, assert_exact,
                         check, main, run, trials)

# Crash point -> largest N drawn (hits per run differ a lot between points).
# The File sink grows data objects in place: grow_write is an append to a
# temporary file, stream_sync the sink's sync() before a commit records
# the appends, grow_commit the rename of a sealed slice's file.
POINTS = {"read": 8, "commit": 6, "seal": 6, "grow_write": 30,
          "stream_sync": 6, "grow_commit": 10, "sink_commit": 3,
          "done": 10, "gc": 2, "any": 60}
MIN_KILLS = trials(50)


def add_objects(ws, rng, n, first_id):
    subprocess.run([sys.executable, GEN, ws.inp, "--objects", str(n),
                    "--records", str(rng.randrange(50, 400)),
                    "--seed", str(rng.randrange(1 << 30)),
                    "--first-id", str(first_id)],
                   check=True, stdout=subprocess.DEVNULL)


def test_kill_nine_everywhere():
    seed = int(os.environ.get("SKIPPR_CRASH_SEED", random.randrange(1 << 30)))
    rng = random.Random(seed)
    print("  seed %d (SKIPPR_CRASH_SEED=%d reproduces)" % (seed, seed))
    ws = Workspace("crash")
    try:
        add_objects(ws, rng, 12, 0)
        next_id = 10_000_000
        # Small objects and constant commits: many seals, uploads, commits.
        ws.write_config(pipeline_extra={"max_object_bytes": "16KiB",
                                        "commit_interval_ms": 0})
        kills, runs, by_point = 0, 0, {}
        # External kills land within the length of a typical run.
        clock = KillClock(0.4)
        while (kills < MIN_KILLS or len(by_point) < len(POINTS) + 1) and \
                runs < 400:
            runs += 1
            if rng.random() < 0.7:
                add_objects(ws, rng, rng.randrange(1, 4), next_id)
                next_id += 10_000_000
            args = [SKIPPRD, "sync", "--pipeline", "gdpr_compliant_migration",
                    "--config", ws.config, "--once", "-q"]
            env = dict(os.environ)
            if rng.random() < 0.75:
                point = rng.choice(sorted(POINTS))
                n = rng.randrange(1, POINTS[point] + 1)
                env["SKIPPR_CRASH"] = "%s:%d" % (point, n)
                label = "%s:%d" % (point, n)
                t0 = time.monotonic()
                p = subprocess.run(args, env=env, stdout=subprocess.PIPE,
                                   stderr=subprocess.PIPE, timeout=300)
                rc = p.returncode
                if rc == 0:  # the crash point was not reached
                    clock.ended(time.monotonic() - t0)
            else:
                proc = subprocess.Popen(args, env=env, stdout=subprocess.PIPE,
                                        stderr=subprocess.PIPE)
                err, delay = clock.kill(proc, rng)
                label = "after %.3fs" % delay
                rc = proc.returncode
                p = subprocess.CompletedProcess(args, rc, b"", err)
            if rc == -signal.SIGKILL:
                kills += 1
                kind = label.split(":")[0] if ":" in label else "external"
                by_point[kind] = by_point.get(kind, 0) + 1
                print("  run %d: killed at %s" % (runs, label))
            elif rc != 0:
                raise AssertionError("run %d (%s) failed with %d: %s" % (
                    runs, label, rc, p.stderr.decode()[-2000:]))
        check(kills >= MIN_KILLS, "only %d kills in %d runs" % (kills, runs))
        check(len(by_point) == len(POINTS) + 1,
              "some kill points never hit: %s" % by_point)
        ws.sync("--once")
        n = assert_exact(ws)
        p = run(["status", "--pipeline", "gdpr_compliant_migration",
                 "--config", ws.config])
        check("slices pending:  0" in p.out and "slices open:     0" in p.out,
              p.out)
        print("  %d kills over %d runs %s; %d records exactly once" % (
            kills, runs, dict(sorted(by_point.items())), n))
    finally:
        ws.cleanup()


if __name__ == "__main__":
    main([test_kill_nine_everywhere])
