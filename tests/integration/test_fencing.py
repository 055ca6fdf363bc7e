#!/usr/bin/env python3
"""Fencing a lease holder that outlived its lease (state in a bucket).

A Spot box that stalls, a paused pod, a partitioned node: the process
holding a pipeline's lease stops renewing it and a second process takes
over. When the first one runs again it must not write anything: no
object, no part, no state. Each round here, on file -> S3 and S3 -> S3:

  1. process A starts the copy (state in a bucket, a 3 s lease);
  2. a random delay after its state is in the bucket, it is stopped with
     SIGSTOP, mid-copy;
  3. process B, on another box (an empty state folder), waits out A's
     lease, takes it over, restores A's last durable commit and finishes;
  4. A is resumed with SIGCONT and must exit non-zero with its fencing
     line, while the server sees no write of A with a body take effect
     (no 2xx answer to a PutObject, UploadPart, Complete, claim or
     DeleteObjects once B has finished);
  5. the output is exact: 0 lost, 0 duplicated.

A write without a body (CreateMultipartUpload, UploadPartCopy, Abort,
DeleteObject) is checked only before it goes out: stopped in the
microseconds between that check and its first byte, it lands late. The
rounds count those and the output must be exact all the same.
A third thread (fence_moment) stops A at exactly that moment of a write
with a body.

A request body A was sending when it was stopped stays unfinished for
seconds; S3 answers such a request 400 RequestTimeout after about 20 s of
silence. The lease here is 3 s instead of 30, so the server's timeout is
scaled down with it (body_idle_ms 1500).

The two paths run side by side, each against its own server, so that
the rounds' waits for the lease overlap.
"""
import os
import random
import re
import signal
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from skippr_test import (SKIPPRD, Workspace, check, compare,  # noqa: E402
                         expected_records, main, trials)
from s3_test import S3Server  # noqa: E402

LEASE = 3
ROUNDS = trials(20)
# Writes with a body are asked the fence again after their headers went
# out; those without one only before (docs/OPERATIONS.md, "State off the
# box"): paused in the microseconds between that check and the request,
# one of them lands late, and the output must still be exact.
BODY_WRITES = ("put", "upload_part", "complete_multipart", "delete_objects",
               "claim_put")
BODYLESS_WRITES = ("create_multipart", "upload_part_copy", "abort_multipart",
                   "delete")
WRITES = BODY_WRITES + BODYLESS_WRITES
TRANSFORM = {"namespace_fields": "none", "batch_time_fields": "timestamp",
             "batch_time_unit": "month"}


def config(ws, source, rnd, box):
    """The round's config for one box: its own workspace (so its own
    state in the bucket and its own sink prefix), a state folder per box."""
    src = ("    S3:\n      s3_bucket: src\n"
           "      s3_prefix: ill-just-dump-this-here\n"
           "      read_chunk_bytes: 256KiB\n"
           if source == "s3" else
           "    File:\n      path: %s\n"
           "      prefix: ill-just-dump-this-here\n" % ws.inp)
    path = os.path.join(ws.root, "r%d-%s.yml" % (rnd, box))
    with open(path, "w") as f:
        f.write(
            "skippr:\n  workspace: r%d\n  skipprd_el_storage_mode: s3\n"
            "  state_store: data_sinks.state\n  state_lease_seconds: %d\n"
            "  state_dir: %s/state-%d-%s\n"
            "pipelines:\n  p:\n    type: copy\n"
            "    data_source: data_sources.a\n    data_sink: data_sinks.b\n"
            "    buffer_threshold_seconds: 86400\n"
            "    max_object_bytes: 6MiB\n    commit_interval_ms: 0\n"
            "    wal_disk_budget: 2MiB\n"
            "    transform:\n      namespace_fields: none\n"
            "      batch_time_fields: timestamp\n"
            "      batch_time_unit: month\n"
            "data_sources:\n  a:\n%s"
            "data_sinks:\n  b:\n    S3:\n      s3_bucket: dst\n"
            "      s3_prefix: out-%d\n      part_size: 5MiB\n"
            "  state:\n    S3:\n      s3_bucket: state\n"
            "      s3_prefix: skippr-state\n"
            % (rnd, LEASE, ws.root, rnd, box, src, rnd))
    return path


def start(s3, cfg, **env):
    e = dict(os.environ, **s3.env(), **env)
    return subprocess.Popen([SKIPPRD, "sync", "-p", "p", "--once", "-c", cfg],
                            env=e, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)


def state_stored(s3, rnd):
    """True once round rnd's state is in the bucket (state_id is stored
    last): A holds the lease and a takeover restores its state."""
    try:
        s3.client.head_object(Bucket="state",
                              Key="skippr-state/r%d/p/state_id" % rnd)
        return True
    except Exception:  # noqa: BLE001 - botocore's 404
        return False


def one_round(ws, s3, source, rnd, delay):
    """A round as in the docstring. A is stopped `delay` seconds after its
    state is in the bucket (however slowly a loaded machine starts it).
    Returns None when A finished before it could be stopped (the caller
    shortens the delay), else take_over's summary."""
    a = start(s3, config(ws, source, rnd, "a"))
    deadline = time.monotonic() + 120
    while not state_stored(s3, rnd) and a.poll() is None:
        check(time.monotonic() < deadline, "round %d: A stored no state "
              "in 120 s" % rnd)
        time.sleep(0.02)
    try:
        a.wait(delay)
        a.communicate()
        return None
    except subprocess.TimeoutExpired:
        a.send_signal(signal.SIGSTOP)
    return take_over(ws, s3, source, rnd, a, delay)


def take_over(ws, s3, source, rnd, a, delay):
    """Steps 3 to 5 with A stopped: B takes over and finishes, A resumes
    and must write nothing with a body; the output is exact. Returns A's
    exit status, its writes the server saw after the takeover, its fencing
    line and how many of its writes without a body took effect."""
    try:
        b = subprocess.run([SKIPPRD, "sync", "-p", "p", "--once", "-c",
                            config(ws, source, rnd, "b")],
                           env=dict(os.environ, **s3.env()),
                           capture_output=True, text=True, timeout=300)
        check(b.returncode == 0, "round %d: B failed (%d)\n%s" % (
            rnd, b.returncode, b.stderr[-3000:]))
        check("took over the lease" in b.stderr,
              "round %d: B did not take the lease over\n%s" % (
                  rnd, b.stderr[-2000:]))
        s3.reset_stats()
    finally:
        a.send_signal(signal.SIGCONT)
    _, err = a.communicate(timeout=120)
    st = s3.stats()
    wrote = {k: v for k, v in st.get("answered", {}).items()
             if k in BODY_WRITES}
    late = sum(v for k, v in st.get("answered", {}).items()
               if k in BODYLESS_WRITES)
    check(not wrote, "round %d: the stale holder wrote after B finished: "
          "%s\n%s" % (rnd, wrote, err[-3000:]))
    check(a.returncode == 3, "round %d: the stale holder exited %d, not 3"
          "\n%s" % (rnd, a.returncode, err[-3000:]))
    line = [x for x in err.splitlines()
            if "(fenced)" in x and "exiting with code 3" in x]
    check(line, "round %d: the stale holder exited %d without its fencing "
          "line\n%s" % (rnd, a.returncode, err[-3000:]))
    want = expected_records(ws.inp, transform=TRANSFORM)
    lost, dup, unexpected = compare(want, s3.records("dst", "out-%d/" % rnd))
    check((lost, dup, unexpected) == (0, 0, 0),
          "round %d (A stopped after %.2f s): %d lost, %d duplicated, %d "
          "unexpected of %d" % (rnd, delay, lost, dup, unexpected,
                                sum(want.values())))
    refused = sum(v for k, v in st["counts"].items() if k in WRITES)
    return a.returncode, refused, line[0], late


def fence_path(source, results):
    ws = Workspace("fence-" + source)
    s3 = S3Server(["src", "dst", "state"])
    try:
        ws.generate(objects=8, records=20000, seed=41, framing="lines")
        if source == "s3":
            s3.upload_tree("src", ws.inp)
        s3.faults(0, [], body_idle_ms=1500)
        rng = random.Random(17 if source == "s3" else 18)
        rnd, high, codes, reached, early, late = 0, 1.5, {}, 0, 0, 0
        while rnd < ROUNDS:
            delay = rng.uniform(0.0, high)
            got = one_round(ws, s3, source, rnd + 100 * early, delay)
            if got is None:
                early += 1
                high = max(0.3, high * 0.8)
                check(early < 3 * ROUNDS, "%s: A kept finishing before the "
                      "stop" % source)
                continue
            rnd += 1
            codes[got[0]] = codes.get(got[0], 0) + 1
            reached += got[1]
            late += got[3]
            results[source] = (rnd, codes, reached, got[2], early, late)
    except Exception as e:  # noqa: BLE001 - reported by the main thread
        results[source] = e
    finally:
        s3.close()
        ws.cleanup()


def test_stale_holder_writes_nothing_after_its_lease():
    results = {}
    threads = [threading.Thread(target=fence_path, args=(s, results))
               for s in ("file", "s3")]
    threads.append(threading.Thread(target=fence_moment, args=(results,)))
    t0 = time.monotonic()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for source, r in results.items():
        if isinstance(r, Exception):
            raise r
        if source == "moment":
            print("\n".join(r))
            continue
        rounds, codes, tried, line, early, late = r
        print("  %s -> S3: %d rounds, the stale holder exited %s; %d of its "
              "writes tried after the takeover, none with a body took "
              "effect, %d without one did (output exact); %d runs finished "
              "before the stop; e.g. %s" % (
                  source, rounds, codes, tried, late, early,
                  re.sub(r"^skipprd: ", "", line)[:200]))
    print("  %.0f s" % (time.monotonic() - t0))


def stopped(pid):
    """True once the process is stopped (state T in /proc/PID/stat)."""
    with open("/proc/%d/stat" % pid) as f:
        return f.read().rsplit(")", 1)[1].split()[0] in ("T", "t")


def fence_moment(results):
    """The narrowest moment: A stops itself right after the fence let a
    write with a body through (libcurl's last call before the request
    goes out; SKIPPR_TEST_STOP_AFTER_FENCE), the nth PUT of the run. Its
    headers go out when it resumes, and its body must not: the fence is
    asked again before each piece of a body."""
    ws = Workspace("fence-moment")
    s3 = S3Server(["src", "dst", "state"])
    said = []
    try:
        ws.generate(objects=8, records=20000, seed=43, framing="lines")
        s3.faults(0, [], body_idle_ms=1500)
        for rnd, nth in enumerate((2, 5, 9)):
            a = start(s3, config(ws, "file", rnd, "a"),
                      SKIPPR_TEST_STOP_AFTER_FENCE="PUT:%d" % nth)
            deadline = time.monotonic() + 120
            while a.poll() is None and not stopped(a.pid):
                check(time.monotonic() < deadline, "PUT %d: A did not "
                      "stop in 120 s" % nth)
                time.sleep(0.02)
            if a.poll() is not None:
                check(False, "PUT %d: A ended (%d) before its stop\n%s"
                      % (nth, a.returncode, a.communicate()[1]))
            code, tried, _, _ = take_over(ws, s3, "file", rnd, a, 0)
            check(tried >= 1, "PUT %d: the server saw no write of A after "
                  "the takeover: the moment was not tested" % nth)
            said.append("  stopped after the fence let PUT %d through: "
                        "exited %d, %d of its writes reached the server, "
                        "none took effect" % (nth, code, tried))
        results["moment"] = said
    except Exception as e:  # noqa: BLE001 - reported by the main thread
        results["moment"] = e
    finally:
        s3.close()
        ws.cleanup()

if __name__ == "__main__":
    main([test_stale_holder_writes_nothing_after_its_lease])
