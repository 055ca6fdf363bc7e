#!/usr/bin/env python3
"""Buffer v2 figures (bench/run.sh section 6; prints, asserts nothing).

On a generated date-ordered Firehose archive (tests/tools/gen_backfill.py)
with thousands of partitions and adversarial tenant values:

  - file -> file --once with 2 threads next to cp -r + sync of the same
    tree and of skipprd's output: medians of 3, their ratio, user and
    system CPU seconds; once with every run in folders of its own, once
    with each run deleting the last one's first (see file_figures);
  - bytes written to local disk per input byte (write_bytes of
    /proc/PID/io, the state folder and the sink together, as the kernel
    counts pages dirtied);
  - the state folder's peak size, sampled every 20 ms, against
    wal_disk_budget;
  - how many objects per partition-day.

With --sink s3 (s3rver on loopback, which stands in for S3: its own disk
writes are not counted), file -> S3 instead, on a corpus whose partitions
mostly exceed a 5 MiB part: the bytes skipprd writes to local disk per
input byte (its WAL: the tails of objects between parts), the state
folder's peak, objects per partition-day, wall and CPU time.

usage: bench/buffer.py [--mb 300] [--days 2] [--tenants 400] [--sink s3]
"""
import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SKIPPRD = os.environ.get("SKIPPRD",
                         os.path.join(ROOT, "build", "runtime", "skipprd"))
GEN = os.path.join(ROOT, "tests", "tools", "gen_backfill.py")

CONFIG = """skippr:
  workspace: bench
  skipprd_el_storage_mode: local
  state_dir: {state}
pipelines:
  p:
    type: copy
    buffer_threshold_seconds: 86400
    wal_disk_budget: {budget}
    data_source: data_sources.a
    data_sink: data_sinks.b
    transform:
      batch_partition_fields: detail.tenant_id
      batch_time_fields: timestamp
      batch_time_unit: day
      time_partition_prefix: p_
data_sources:
  a:
    File:
      path: {inp}
data_sinks:
  b:
    File:
      path: {out}
      format: jsonl
"""


def tree_bytes(root):
    total = 0
    for d, _, fs in os.walk(root):
        for f in fs:
            try:
                total += os.lstat(os.path.join(d, f)).st_size
            except FileNotFoundError:
                pass
    return total


def timed(cmd):
    """Runs cmd (a shell line) in a shell that prints its own /proc/PID/io
    after waiting, which then includes the reaped command's. Returns
    (seconds, user s, sys s, write_bytes)."""
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    out = subprocess.run(["sh", "-c", cmd + " >/dev/null 2>&1 || exit 9; "
                          "cat /proc/$$/io"], check=True,
                         stdout=subprocess.PIPE).stdout.decode()
    secs = time.perf_counter() - t0
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    wb = int([ln.split()[1] for ln in out.splitlines()
              if ln.startswith("write_bytes")][0])
    return secs, r1.ru_utime - r0.ru_utime, r1.ru_stime - r0.ru_stime, wb


def timed_sampled(cmd, state, peak):
    """timed(cmd), while a thread samples the size of the folder state
    every 20 ms into peak[0] (the largest seen across calls)."""
    stop = threading.Event()

    def sample():
        while not stop.is_set():
            peak[0] = max(peak[0], tree_bytes(state))
            time.sleep(0.02)
    th = threading.Thread(target=sample, daemon=True)
    th.start()
    try:
        return timed(cmd)
    finally:
        stop.set()
        th.join()


def s3_figures(a, work, inp, size):
    """file -> S3 (s3rver): local bytes written per input byte."""
    sys.path.insert(0, os.path.join(ROOT, "tests", "integration"))
    os.environ.setdefault("SKIPPR_SOURCE_DIR", ROOT)
    from s3_test import S3Server
    budget = 64 << 20
    cfg = os.path.join(work, "skippr-s3.yml")
    state = os.path.join(work, "state-s3")
    text = CONFIG.format(state=state, out="", inp=inp, budget=budget)
    text = text.split("data_sinks:")[0] + (
        "data_sinks:\n  b:\n    S3:\n      s3_bucket: dst\n"
        "      s3_prefix: out\n      part_size: 5MiB\n")
    with open(cfg, "w") as f:
        f.write(text)
    rows, peak, objects, pdays = [], [0], 0, 0
    for _ in range(a.runs):
        shutil.rmtree(state, ignore_errors=True)
        s3 = S3Server(["dst"])
        try:
            env = " ".join("%s=%s" % kv for kv in s3.env().items())
            rows.append(timed_sampled(
                "env %s %s sync -p p --once -q -t 2 -c %s" % (
                    env, SKIPPRD, cfg), state, peak))
            keys = [o["Key"] for page in s3.client.get_paginator(
                "list_objects_v2").paginate(Bucket="dst", Prefix="out/")
                for o in page.get("Contents", [])]
            objects = len(keys)
            pdays = len(set(k.rsplit("/", 1)[0] for k in keys))
            st = s3.stats()["counts"]
        finally:
            s3.close()
    med = lambda i: statistics.median(r[i] for r in rows)  # noqa
    print("%-34s %7.2f s  %6.0f MB/s  user %5.2f s  sys %5.2f s" % (
        "skipprd file -> S3 (s3rver)", med(0), size / med(0) / 1e6, med(1),
        med(2)))
    print("bytes written to local disk per input byte, file -> S3: %.3f "
          "(skipprd's WAL; medians of %d)" % (med(3) / size, a.runs))
    print("state folder peak %.2f MB (wal_disk_budget %d MiB); %d objects "
          "for %d partition-days; requests %s" % (
              peak[0] / 1e6, budget >> 20, objects, pdays,
              dict(sorted(st.items()))))


def file_figures(a, work, inp, size, reuse):
    """file -> file next to cp -r + sync of the input tree and of skipprd's
    output, the three taking turns. reuse False: every run writes into
    folders of its own and nothing is deleted until the end. reuse True:
    each command first deletes what the last run of it wrote (and syncs),
    as a rerun in place does. The difference is large on this machine:
    its ext4 has no journal, and there an inode allocated within seconds
    of deleting tens of thousands skips every recently freed one, reading
    its inode table block (recently_deleted in the kernel's profile);
    which command pays more of that depends on timing."""
    budget = 64 << 20
    cp, sk, cpo = [], [], []
    peak = [0]
    name = (lambda d, i: os.path.join(work, d)) if reuse else \
        (lambda d, i: os.path.join(work, "%s%d" % (d, i)))
    for i in range(a.runs):
        state, out = name("state", i), name("out", i)
        cfg = os.path.join(work, "skippr.yml")
        with open(cfg, "w") as f:
            f.write(CONFIG.format(state=state, out=out, inp=inp,
                                  budget=budget))
        for d in (name("cp", i), state, out, name("cpo", i)):
            if reuse:
                shutil.rmtree(d, ignore_errors=True)
        subprocess.run(["sync"], check=True)
        cp.append(timed("cp -r %s %s && sync %s" % (inp, name("cp", i),
                                                    name("cp", i))))
        subprocess.run(["sync"], check=True)
        sk.append(timed_sampled("%s sync -p p --once -q -t 2 -c %s" % (
            SKIPPRD, cfg), state, peak))
        # The same bytes in skipprd's layout (14,000 folders, 5,600
        # files): what any tool writing that tree pays in folders and
        # metadata.
        subprocess.run(["sync"], check=True)
        cpo.append(timed("cp -r %s %s && sync %s" % (out, name("cpo", i),
                                                     name("cpo", i))))
    objects = sum(len(fs) for _, _, fs in os.walk(out))
    pdays = set(d for d, _, fs in os.walk(out) if fs)
    print("-- %s" % ("each run deletes the last run's trees first" if reuse
                     else "each run into folders of its own"))
    med = lambda rows, i: statistics.median(r[i] for r in rows)  # noqa
    tc, ts, to = med(cp, 0), med(sk, 0), med(cpo, 0)
    for label, rows, t in (("cp -r + sync", cp, tc),
                           ("skipprd file -> file, 2 threads", sk, ts),
                           ("cp -r + sync of skipprd's output", cpo, to)):
        print("%-34s %7.2f s  %6.0f MB/s  user %5.2f s  sys %5.2f s" % (
            label, t, size / t / 1e6, med(rows, 1), med(rows, 2)))
    print("skipprd / cp -r + sync speed: %.2fx of the input tree, %.2fx "
          "of the output tree (medians of %d)" % (tc / ts, to / ts, a.runs))
    print("bytes written to local disk per input byte: cp -r %.2f, "
          "cp -r of the output tree %.2f, skipprd %.2f (state folder "
          "and sink)" % (med(cp, 3) / size, med(cpo, 3) / size,
                         med(sk, 3) / size))
    print("state folder peak %.2f MB (wal_disk_budget %d MiB); %d "
          "objects for %d partition-days" % (peak[0] / 1e6, budget >> 20,
                                             objects, len(pdays)))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mb", type=int, default=300)
    ap.add_argument("--days", type=int, default=2)
    ap.add_argument("--tenants", type=int, default=400)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--sink", choices=["file", "s3"], default="file")
    a = ap.parse_args()
    work = tempfile.mkdtemp(prefix="skippr-bench-buffer-")
    try:
        inp = os.path.join(work, "in")
        made = subprocess.run(
            [sys.executable, GEN, inp, "--days", str(a.days), "--day-bytes",
             str(a.mb * 1_000_000 // a.days), "--tenants", str(a.tenants)],
            check=True, stdout=subprocess.PIPE).stdout.decode().split()
        size = tree_bytes(inp)
        nobj = sum(len(fs) for _, _, fs in os.walk(inp))
        print("corpus: %.0f MB in %d objects, %s records, %s partition-days "
              "(%d tenants with names like %r)" % (
                  size / 1e6, nobj, made[0], made[2], a.tenants,
                  "tenant-001-..-" ))
        if a.sink == "s3":
            s3_figures(a, work, inp, size)
            return
        for reuse in (False, True):
            file_figures(a, work, inp, size, reuse)
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
