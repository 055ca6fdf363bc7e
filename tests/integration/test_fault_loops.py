#!/usr/bin/env python3
"""Fault loops, in the SQLite manner: fail the Nth file operation of a kind
(open, write, fsync, rename, unlink, mkdir; tests/tools/faultfs.c), for
N = 1, 2, 3 ... until a run finishes without the fault firing.

Each loop runs in three modes:
- once: only the Nth operation fails; the run may recover by itself;
- persist: the Nth and every later operation of the kind fail; the run
  must stop with a clear error;
- recovery: a run is first killed at a crash point, then the next run,
  which recovers, meets the fault (once).
After each faulted run a clean run must finish, and the output must be
exact: 0 lost, 0 duplicated. A faulted run must never crash, and a failed
one must say why (an error line). Every N up to 10 is tried, then N
grows by 60%, to the last operation of the kind. Retries wait 1 ms
(retry_backoff_ms), so that a persistent fault fails a run quickly.

S3 request faults: the same loop with the Nth request to the S3 test
server failing (500, or the connection cut), once and persistent; and with
the Nth UploadPart failing, on objects that grow as multipart uploads of
several parts (a part is retried in place, or after a restart uploaded
again from the recorded notes).
"""
import os
import re
import shutil
import signal
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from skippr_test import (GEN, SKIPPRD, SOURCE_PREFIX, TEST_SCALE,  # noqa: E402
                         Workspace, check, compare, expected_records, main,
                         output_records, trials)
from test_powerloss import faultfs_sync, reset  # noqa: E402

FAULTFS = os.environ.get("FAULTFS", "")
KINDS = ["open", "write", "fsync", "rename", "unlink", "mkdir"]


def steps(last):
    """1..10, then growing by 60%, then last + 1 (no fault fires). With
    SKIPPR_TEST_SCALE at 0.5: 1..5, then growing by 120%."""
    dense = trials(10, least=3)
    grow = 5 + round(3 / TEST_SCALE)  # fifths: 8 is 60% more
    n = 1
    while n <= last:
        yield n
        n = n + 1 if n < dense else max(n + 1, n * grow // 5)
    yield last + 1


def faulted(ws, fault, report, crash=None):
    """One sync --once under faultfs with SKIPPR_IOFAULT=fault (and
    SKIPPR_CRASH=crash); returns (exit, stderr, fired, report text)."""
    settings = {}
    if fault:
        settings["SKIPPR_IOFAULT"] = fault
    if crash:
        settings["SKIPPR_CRASH"] = crash
    if os.path.exists(report):
        os.unlink(report)
    p = faultfs_sync(ws, report, settings)
    err = p.stderr.decode("utf-8", "replace")
    text = open(report).read() if os.path.exists(report) else ""
    return p.returncode, err, "fault " in text, text


def clean_run_exact(ws, what):
    p = subprocess.run([SKIPPRD, "sync", "--pipeline",
                        "gdpr_compliant_migration", "--config", ws.config,
                        "--once", "-q"], capture_output=True, timeout=300)
    check(p.returncode == 0, "%s: the clean run after it failed: %s" % (
        what, p.stderr.decode()[-2000:]))
    exp = expected_records(ws.inp)
    lost, dup, unexpected = compare(exp, output_records(ws.sink_root))
    check((lost, dup, unexpected) == (0, 0, 0),
          "%s: %d lost, %d duplicated, %d unexpected" % (what, lost, dup,
                                                          unexpected))


def judge(what, rc, err, persist):
    check(rc >= 0, "%s: skipprd died of signal %d:\n%s" % (what, -rc,
                                                           err[-2000:]))
    check("Sanitizer" not in err, "%s: sanitizer report:\n%s" % (
        what, err[-3000:]))
    if rc != 0:
        check("error" in err, "%s: failed (%d) without saying why:\n%s" % (
            what, rc, err[-2000:]))
    if persist:
        check(rc != 0, "%s: a persistent fault, yet the run succeeded" %
              what)


def test_file_fault_loops():
    check(os.path.exists(FAULTFS), "FAULTFS (the library) not built")
    ws = Workspace("faultloop")
    report = os.path.join(ws.root, "faultfs.log")
    try:
        subprocess.run([sys.executable, GEN, ws.inp, "--objects", "4",
                        "--records", "100", "--seed", "3"],
                       check=True, stdout=subprocess.DEVNULL)
        ws.write_config(pipeline_extra={"max_object_bytes": "8KiB",
                                        "commit_interval_ms": 0,
                                        "retry_backoff_ms": 1})
        reset(ws)
        rc, err, _, text = faulted(ws, None, report)
        check(rc == 0, "counting run: %s" % err)
        counts = dict(re.findall(r"(\w+) (\d+)", text))
        print("  operations in a whole copy: %s" % ", ".join(
            "%s %s" % (k, counts[k]) for k in KINDS))
        total_runs = 0
        summary = []
        for kind in KINDS:
            last = int(counts[kind])
            for mode in ("once", "persist", "recovery"):
                runs = fired_runs = recovered = 0
                # A run may make more calls of a kind than the counting
                # copy: recovering from a kill, it cuts growing objects
                # back (ftruncate is a write); the number of commits,
                # each with its fsyncs, follows the order in which units
                # finish (event-time sealing flushes when one moves the
                # watermark); and two upload instances that meet a new
                # folder at once both make it (the File sink's folder set
                # is shared, so which ones race varies from run to run).
                for n in steps(2 * last):
                    reset(ws)
                    what = "%s:%d:%s" % (kind, n, mode)
                    fault = "%s:%d%s" % (kind, n,
                                         ":persist" if mode == "persist"
                                         else "")
                    if mode == "recovery":
                        rc, err, _, _ = faulted(ws, None, report,
                                                crash="any:%d" % (n % 23 + 1))
                        check(rc in (0, -signal.SIGKILL), "%s: kill run %d" %
                              (what, rc))
                    rc, err, fired, _ = faulted(ws, fault, report)
                    runs += 1
                    judge(what, rc, err, mode == "persist" and fired)
                    fired_runs += fired
                    recovered += fired and rc == 0
                    clean_run_exact(ws, what)
                    if not fired:
                        break
                check(not fired, "%s %s: the fault still fired at the last "
                      "step" % (kind, mode))
                total_runs += runs
                summary.append("%s/%s %d steps (%d fired, %d recovered "
                               "within the run)" % (kind, mode, runs,
                                                    fired_runs, recovered))
        for line in summary:
            print("  " + line)
        print("  %d faulted runs, each followed by a clean run with exact "
              "output" % total_runs)
    finally:
        ws.cleanup()
        for d in (ws.state + ".powerloss", ws.out + ".powerloss"):
            shutil.rmtree(d, ignore_errors=True)




def s3_loop(ws, s3, exp, pipeline, transform, sink_extra):
    """The S3 loops' steps: configure(prefix) writes the config for a
    sink prefix, sync() runs --once, exact(prefix, what) checks the bucket
    and that no upload was left open."""
    env = dict(os.environ, **s3.env())

    def configure(prefix):
        ws.write_config(pipeline_extra=dict(pipeline, retry_backoff_ms=1),
                        transform=transform)
        with open(ws.config) as f:
            text = f.read()
        text = text[:text.index("data_sinks:")] + (
            "data_sinks:\n  tenant_layout:\n    S3:\n"
            "      s3_bucket: dst\n      s3_prefix: %s\n" % prefix +
            sink_extra)
        with open(ws.config, "w") as f:
            f.write(text)

    def sync():
        return subprocess.run([SKIPPRD, "sync", "--pipeline",
                               "gdpr_compliant_migration", "--config",
                               ws.config, "--once", "-q"], env=env,
                              capture_output=True, timeout=300)

    def exact(prefix, what):
        got = s3.records("dst", prefix + "/")
        lost, dup, unexpected = compare(exp, got)
        check((lost, dup, unexpected) == (0, 0, 0),
              "%s: %d lost, %d duplicated, %d unexpected" % (
                  what, lost, dup, unexpected))
        check(s3.stats()["open_uploads"] == 0, "%s: uploads left open" %
              what)
    return configure, sync, exact


def test_s3_request_fault_loops():
    """File -> S3: the Nth request to the S3 server fails (500 once; the
    connection cut, persistently), for N = 1, 2, ... until one run sees no
    fault; after each, a clean run leaves the bucket exact."""
    from s3_test import S3Server
    ws = Workspace("s3faultloop")
    s3 = S3Server(["dst"])
    try:
        subprocess.run([sys.executable, GEN, ws.inp, "--objects", "3",
                        "--records", "60", "--seed", "4"],
                       check=True, stdout=subprocess.DEVNULL)
        exp = expected_records(ws.inp)
        summary = []

        configure, sync, exact = s3_loop(
            ws, s3, exp, {"max_object_bytes": "8KiB"}, None, "")

        configure("count")
        reset(ws)
        s3.reset_stats()
        check(sync().returncode == 0, "counting run failed")
        total = sum(s3.stats()["counts"].values())
        exact("count", "counting run")
        for mode, kind in (("once", "500"), ("persist", "reset")):
            runs = recovered = 0
            for n in steps(total):
                prefix = "%s-%d" % (mode, n)
                what = "s3 request %d %s (%s)" % (n, kind, mode)
                configure(prefix)
                reset(ws)
                s3.reset_stats()
                s3.faults(0, [kind], nth=n, persist=mode == "persist")
                p = sync()
                fired = sum(s3.stats()["injected"].values()) > 0
                s3.faults(0, [])
                err = p.stderr.decode("utf-8", "replace")
                judge(what, p.returncode, err, mode == "persist" and fired)
                recovered += fired and p.returncode == 0
                runs += 1
                q = sync()
                check(q.returncode == 0, "%s: the clean run: %s" % (
                    what, q.stderr.decode()[-2000:]))
                exact(prefix, what)
                if not fired:
                    break
            summary.append("S3 %s/%s: %d steps over %d requests (%d "
                           "recovered within the run)" % (kind, mode, runs,
                                                          total, recovered))
        for line in summary:
            print("  " + line)
    finally:
        s3.close()
        ws.cleanup()


def test_s3_upload_part_fault_loops():
    """File -> S3 with objects of several 5 MiB parts: the Nth UploadPart
    fails (500 once; the connection cut, persistently). Once: the run
    recovers by itself; persistent: it stops with one clear error. After
    each, a clean run completes the objects from their recorded parts and
    leaves the bucket exact, with no upload left open."""
    from s3_test import S3Server
    ws = Workspace("s3partloop")
    s3 = S3Server(["dst"])
    try:
        # Two event types, no tenant or time folders: two slices of about
        # 11 MB, each two 5 MiB parts and a last one.
        folder = os.path.join(ws.inp, SOURCE_PREFIX)
        os.makedirs(folder)
        pad = "x" * 180
        with open(os.path.join(folder, "part-0"), "wb") as f:
            for i in range(100000):
                f.write(b'{"event_type":"t%d","id":%d,"pad":"%s"}\n' % (
                    i % 2, i, pad.encode()))
        transform = {"namespace_fields": "event_type"}
        exp = expected_records(ws.inp, transform=transform)

        configure, sync, exact = s3_loop(ws, s3, exp, {}, transform,
                                         "      part_size: 5MiB\n")

        configure("count")
        reset(ws)
        s3.reset_stats()
        check(sync().returncode == 0, "counting run failed")
        parts = s3.stats()["counts"].get("upload_part", 0)
        check(parts >= 6, "only %d parts uploaded" % parts)
        exact("count", "counting run")
        summary = []
        for mode, kind in (("once", "500"), ("persist", "reset")):
            runs = recovered = 0
            for n in steps(parts):
                prefix = "%s-%d" % (mode, n)
                what = "UploadPart %d %s (%s)" % (n, kind, mode)
                configure(prefix)
                reset(ws)
                s3.reset_stats()
                s3.faults(0, [kind], nth=n, persist=mode == "persist",
                          only=["upload_part"])
                p = sync()
                fired = sum(s3.stats()["injected"].values()) > 0
                s3.faults(0, [])
                err = p.stderr.decode("utf-8", "replace")
                judge(what, p.returncode, err, mode == "persist" and fired)
                if mode == "persist" and fired:
                    # One line per object whose part could not go (the
                    # sink instances upload in parallel), naming it.
                    errors = [ln for ln in err.splitlines()
                              if " error: " in ln]
                    check(errors and all(("uploading a part of " in ln or
                                          "finishing " in ln) and
                                         "giving up" in ln and "/apply-" in ln
                                         for ln in errors),
                          "%s: want error lines naming the object:\n%s" %
                          (what, err[-2000:]))
                recovered += fired and p.returncode == 0
                runs += 1
                q = sync()
                check(q.returncode == 0, "%s: the clean run: %s" % (
                    what, q.stderr.decode()[-2000:]))
                exact(prefix, what)
                if not fired:
                    break
            summary.append("UploadPart %s/%s: %d steps over %d parts (%d "
                           "recovered within the run)" % (kind, mode, runs,
                                                          parts, recovered))
        for line in summary:
            print("  " + line)
    finally:
        s3.close()
        ws.cleanup()


if __name__ == "__main__":
    main([test_file_fault_loops, test_s3_request_fault_loops,
          test_s3_upload_part_fault_loops])
