#!/usr/bin/env python3
"""Bounded memory for a big slice: about 100 MB of one event type in one
month is one slice, written as a multipart upload of 8 MiB parts. With a
16 MiB memory_budget, what the big slice adds to skipprd's peak RSS, over
the same copy of a 1 MB slice, stays far below the slice's size; both
figures are printed. Measuring the growth rather than the total keeps the
bound the same for every build: an ASan build's runtime alone takes some
50 MB. The object is read back, byte-equal."""
import os
import re
import subprocess
import time

from s3_test import S3Server
from skippr_test import SKIPPRD, Workspace, asan_build, check, main

SLICE_MB = 100
# What the 100 MB slice may add to the peak RSS of a 1 MB one: the budget
# and a part in flight fit; a copy that held the slice in memory does not.
# An ASan build keeps freed part buffers in its quarantine and adds
# redzones: it measured 48 MB where the plain build measured 24.
GROWTH_LIMIT_MB = 40
ASAN_GROWTH_LIMIT_MB = 64


def write_input(ws, files):
    """files files of 10 MB (0 for a single 1 MB one); every record is the
    same event type and month, so all of them land in one slice. Returns
    the records in order."""
    folder = os.path.join(ws.inp, "ill-just-dump-this-here")
    os.makedirs(folder)
    pad = "x" * 200
    recs = []
    per_file = (10 if files else 1) * 10**6 // 260
    for f in range(max(files, 1)):
        lines = [b'{"event_type":"big","timestamp":"2021-10-%02dT01:02:03Z",'
                 b'"id":%d,"pad":"%s"}\n' % (1 + (i % 28), f * per_file + i,
                                           pad.encode())
                 for i in range(per_file)]
        with open(os.path.join(folder, "part-%02d" % f), "wb") as out:
            out.write(b"".join(lines))
        recs += lines
    return recs


def peak_rss_mb(proc):
    """skipprd's own high-water RSS (VmHWM), read until it exits. (rusage's
    maxrss would also count this Python process, which the child was forked
    from.) Polled every 10 ms, so growth in the last moments may be missed;
    the final upload and commit happen well before exit."""
    peak = 0
    while proc.poll() is None:
        try:
            with open("/proc/%d/status" % proc.pid) as f:
                for line in f:
                    if line.startswith("VmHWM:"):
                        peak = max(peak, int(line.split()[1]))
        except (FileNotFoundError, ProcessLookupError, ValueError):
            pass
        time.sleep(0.01)
    return peak / 1024


CONFIG = """skippr:
  state_dir: %s
pipelines:
  p:
    data_source: data_sources.a
    data_sink: data_sinks.b
    memory_budget: 16MiB
    max_object_bytes: 1GiB
    buffer_threshold_seconds: 86400
    transform:
      namespace_fields: event_type
      batch_time_fields: timestamp
      batch_time_unit: month
data_sources:
  a:
    File:
      path: %s
      prefix: ill-just-dump-this-here
data_sinks:
  b:
    S3:
      s3_bucket: dst
      part_size: 8MiB
"""


def copy_one_slice(files):
    """Copies files x 10 MB of one slice into a fresh bucket and checks the
    object. Returns (slice bytes, UploadPart count, skipprd's peak RSS MB)."""
    ws = Workspace("s3mem")
    s3 = S3Server(["dst"])
    try:
        recs = write_input(ws, files)
        size = sum(len(r) for r in recs)
        with open(ws.config, "w") as f:
            f.write(CONFIG % (ws.state, ws.inp))
        env = dict(os.environ)
        env.update(s3.env())
        log = os.path.join(ws.root, "skipprd.log")
        with open(log, "wb") as err:
            proc = subprocess.Popen([SKIPPRD, "sync", "-p", "p", "--once",
                                     "-c", ws.config], env=env, stderr=err)
            rss_mb = peak_rss_mb(proc)
        with open(log) as f:
            check(proc.returncode == 0, f.read()[-2000:])
        c = s3.stats()["counts"]
        objs = s3.objects("dst")
        check(len(objs) == 1, "want one object, got %s" % list(objs))
        data = next(iter(objs.values()))
        check(len(data) == size and sorted(data.splitlines(True)) ==
              sorted(recs), "the object is not the input's records")
        return size, c.get("upload_part", 0), c, rss_mb
    finally:
        s3.close()
        ws.cleanup()


def test_big_slice_bounded_memory():
    _, _, _, base_mb = copy_one_slice(0)
    size, parts, c, rss_mb = copy_one_slice(SLICE_MB // 10)
    check(c.get("create_multipart") == 1 and parts >= size // (8 << 20),
          "not one multipart upload of 8 MiB parts: %s" % c)
    print("  %.0f MB slice in %d parts; skipprd peak RSS %.1f MB, %.1f MB "
          "for a 1 MB slice (memory_budget 16 MiB, part_size 8 MiB)" %
          (size / 1e6, parts, rss_mb, base_mb))
    limit = ASAN_GROWTH_LIMIT_MB if asan_build() else GROWTH_LIMIT_MB
    check(rss_mb - base_mb < limit,
          "a %.0f MB slice adds %.0f MB to the peak RSS of a 1 MB one"
          % (size / 1e6, rss_mb - base_mb))


WINDOW_CONFIG = """skippr:
  state_dir: %s
pipelines:
  p:
    data_source: data_sources.a
    data_sink: data_sinks.b
    buffer_threshold_seconds: 86400
    transform:
      namespace_fields: event_type
data_sources:
  a:
    S3:
      s3_bucket: src
      concurrency: 16
data_sinks:
  b:
    File:
      path: %s
"""


def test_fetch_ahead_window_follows_listing():
    """With prefetch_bytes left at 0, the S3 source fetches ahead within
    twice what `concurrency` GETs of the mean listed object hold (8 MiB at
    least), not half the memory budget (128 MiB): 300 objects of 100 KB
    with 16 GETs at once get an 8 MiB window, and the bytes held ahead,
    from skipprd's debug log, never pass it by more than one object. The
    copy is exact."""
    ws = Workspace("s3window")
    s3 = S3Server(["src"])
    try:
        recs = []
        pad = b"y" * 900
        for o in range(300):
            lines = [b'{"event_type":"t%d","id":%d,"pad":"%s"}\n'
                     % (i % 3, o * 100 + i, pad) for i in range(100)]
            s3.client.put_object(Bucket="src", Key="o-%04d" % o,
                                 Body=b"".join(lines))
            recs += lines
        biggest = max(len(r) for r in recs) * 100
        with open(ws.config, "w") as f:
            f.write(WINDOW_CONFIG % (ws.state, ws.out))
        r = s3.sync(ws.config, args=["-v", "-v"])
        check(r.returncode == 0, r.stderr[-2000:])
        m = re.search(r"fetch-ahead: at most (\d+) GETs were in flight and "
                      r"(\d+) bytes held \(window (\d+) bytes\)", r.stderr)
        check(m, "no fetch-ahead summary in the log:\n" + r.stderr[-2000:])
        inflight, held, window = (int(g) for g in m.groups())
        print("  window %.1f MiB; at most %.1f MiB held, %d GETs in flight"
              % (window / 2**20, held / 2**20, inflight))
        check(window == 8 << 20, "window %d, want 8 MiB" % window)
        check(0 < held <= window + biggest,
              "%d bytes held ahead, window %d" % (held, window))
        got = []
        for d, _, fs in os.walk(ws.out):
            if "_skippr" in d:
                continue  # the state's claim on the sink
            for name in fs:
                with open(os.path.join(d, name), "rb") as f:
                    got += f.read().splitlines(True)
        check(sorted(got) == sorted(recs), "the copy is not the input")
    finally:
        s3.close()
        ws.cleanup()


if __name__ == "__main__":
    main([test_big_slice_bounded_memory,
          test_fetch_ahead_window_follows_listing])
