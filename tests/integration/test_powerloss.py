#!/usr/bin/env python3
"""Power loss: the WAL, the ledger and the file sink come back with nothing
lost and nothing duplicated when a crash also drops every write that was
not made durable.

tests/tools/faultfs.c (LD_PRELOAD) models the state dir and the sink
folder: at the Nth file operation it undoes what a disk could lose (writes
after a file's last fsync, torn or not; names made since their folder's
last fsync, such as a created file or a rename) and kills the process.

A counting run gives the number T of modelled operations of a whole copy.
Then, in cycles over a fresh state and output, runs lose power at an N
drawn from 1..T (half of them from its last 40, the final commits; and
recovery itself loses power too) until one finishes;
each cycle's output must equal the input exactly. The seed is printed and
SKIPPR_POWERLOSS_SEED=N reproduces a run.
"""
import os
import random
import shutil
import signal
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from skippr_test import (GEN, SKIPPRD, Workspace, assert_exact, check,  # noqa: E402
                         main, run)

FAULTFS = os.environ.get("FAULTFS", "")
MIN_LOSSES = 40


def faultfs_sync(ws, report, settings):
    """One `sync --once -q` of ws under tests/tools/faultfs.c, modelling
    its state and sink folders, with the library's other SKIPPR_*
    settings (and SKIPPR_CRASH) from `settings`; none is inherited.
    Returns the CompletedProcess."""
    env = dict(os.environ)
    for k in ("SKIPPR_CRASH", "SKIPPR_FAULT", "SKIPPR_IOFAULT",
              "SKIPPR_POWERLOSS_AT", "SKIPPR_POWERLOSS_SEED"):
        env.pop(k, None)
    env.update({
        "LD_PRELOAD": FAULTFS,
        "SKIPPR_POWERLOSS_ROOTS": "%s:%s" % (ws.state, ws.out),
        "SKIPPR_POWERLOSS_REPORT": report,
        # the library comes before the sanitizer runtime in an ASan build
        "ASAN_OPTIONS": os.environ.get("ASAN_OPTIONS", "") +
        ":verify_asan_link_order=0"})
    env.update(settings)
    return subprocess.run([SKIPPRD, "sync", "--pipeline",
                           "gdpr_compliant_migration", "--config", ws.config,
                           "--once", "-q"], env=env, capture_output=True,
                          timeout=300)


def powered(ws, at, seed, report):
    """One sync --once that loses power at operation `at`; returns its
    exit."""
    p = faultfs_sync(ws, report, {"SKIPPR_POWERLOSS_AT": str(at),
                                  "SKIPPR_POWERLOSS_SEED": str(seed)})
    if p.returncode not in (0, -signal.SIGKILL):
        raise AssertionError("run at %d failed (%d): %s" % (
            at, p.returncode, p.stderr.decode()[-3000:]))
    return p.returncode


def reset(ws):
    for d in (ws.state, ws.out, ws.state + ".powerloss",
              ws.out + ".powerloss"):
        shutil.rmtree(d, ignore_errors=True)
    os.makedirs(ws.state)
    os.makedirs(ws.out)


def last_line(path):
    with open(path) as f:
        lines = f.read().splitlines()
    return lines[-1] if lines else ""


def test_power_loss_anywhere():
    check(os.path.exists(FAULTFS), "FAULTFS (the library) not built")
    seed = int(os.environ.get("SKIPPR_POWERLOSS_SEED",
                              random.randrange(1 << 30)))
    rng = random.Random(seed)
    print("  seed %d (SKIPPR_POWERLOSS_SEED=%d reproduces)" % (seed, seed))
    ws = Workspace("powerloss")
    report = os.path.join(ws.root, "powerloss.log")
    try:
        subprocess.run([sys.executable, GEN, ws.inp, "--objects", "24",
                        "--records", "300", "--seed", str(seed)],
                       check=True, stdout=subprocess.DEVNULL)
        # Small objects and a commit per batch: many seals, renames and
        # fsyncs to lose power between.
        ws.write_config(pipeline_extra={"max_object_bytes": "16KiB",
                                        "commit_interval_ms": 0})
        reset(ws)
        check(powered(ws, 0, seed, report) == 0, "counting run failed")
        total = int(last_line(report).split()[1])
        check(total > 100, "only %d modelled operations" % total)
        n_exp = assert_exact(ws)
        losses, cycles, runs = 0, 0, 0
        dropped = torn = undone = 0
        while losses < MIN_LOSSES:
            cycles += 1
            reset(ws)
            for _ in range(200):
                runs += 1
                # Half the draws fall in a run's last operations: the
                # final commits, where a sink that claimed durability
                # falsely would lose what the ledger calls written.
                at = (rng.randrange(1, total + 1) if rng.random() < 0.5
                      else rng.randrange(max(1, total - 40), total + 1))
                rc = powered(ws, at, rng.randrange(1 << 30), report)
                if rc == 0:
                    break
                losses += 1
                line = last_line(report)
                check(line.startswith("power lost"), "no report: %r" % line)
                f = line.replace(",", "").replace(";", "").split()
                dropped += int(f[f.index("dropped") + 1])
                torn += int(f[f.index("torn") + 1])
                undone += int(f[f.index("undone") + 1])
            else:
                raise AssertionError("cycle %d never finished" % cycles)
            assert_exact(ws)
            p = run(["status", "--pipeline", "gdpr_compliant_migration",
                     "--config", ws.config])
            check("slices pending:  0" in p.out, p.out)
        # The losses must have cost something, or nothing was tested.
        check(dropped > 0 and undone > 0,
              "power losses dropped %d writes and undid %d names" %
              (dropped, undone))
        print("  %d power losses over %d runs in %d cycles (%d modelled "
              "operations a copy); %d unsynced writes dropped, %d torn, %d "
              "name changes undone; each cycle: %d records exactly once" % (
                  losses, runs, cycles, total, dropped, torn, undone, n_exp))
    finally:
        ws.cleanup()
        for d in (ws.state + ".powerloss", ws.out + ".powerloss"):
            shutil.rmtree(d, ignore_errors=True)


if __name__ == "__main__":
    main([test_power_loss_anywhere])
