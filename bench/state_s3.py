#!/usr/bin/env python3
"""What keeping the state in a bucket (skipprd_el_storage_mode: s3) costs,
against s3rver behind the test proxy. Figures only; asserts nothing.

    bench/state_s3.py [--objects 40] [--repeat 3]

A bucket -> bucket copy of Firehose-like objects (one partition, 6 MiB
objects, as tests/integration/test_s3_state.py), run `--repeat` times
from nothing in each mode, with commits at the default pace
(commit_interval_ms 1000) and after every read window (0). For each: the
median wall time, the WAL objects and bytes the run stored, the PUTs the
proxy counted; then one more run with nothing new from an empty state
folder: s3 mode restores from the bucket and skips every unit, local
mode copies everything again (a second copy of the output).
"""
import argparse
import os
import re
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(ROOT, "tests", "integration"))
os.environ.setdefault("SKIPPR_SOURCE_DIR", ROOT)
os.environ.setdefault("SKIPPRD", os.path.join(ROOT, "build", "runtime",
                                              "skipprd"))

from s3_test import S3Server  # noqa: E402
from skippr_test import SKIPPRD, Workspace  # noqa: E402
import test_s3_state  # noqa: E402


def clear(s3, bucket):
    for k in s3.objects(bucket, ""):
        s3.client.delete_object(Bucket=bucket, Key=k)


def sync(ws, s3):
    e = dict(os.environ)
    e.update(s3.env())
    t0 = time.monotonic()
    p = subprocess.run([SKIPPRD, "sync", "-p", "p", "--once", "-c",
                        ws.config], env=e, capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit("skipprd failed: %s" % p.stderr[-2000:])
    return time.monotonic() - t0, p.stderr


def case(ws, s3, mode, interval, repeat):
    test_s3_state.config(ws, mode=mode)
    with open(ws.config) as f:
        text = f.read()
    with open(ws.config, "w") as f:
        f.write(text.replace("commit_interval_ms: 0",
                             "commit_interval_ms: %d" % interval))
    times = []
    for _ in range(repeat):
        subprocess.run(["rm", "-rf", ws.state], check=True)
        clear(s3, "dst")
        clear(s3, "state")
        s3.reset_stats()
        dt, err = sync(ws, s3)
        times.append(dt)
    m = re.search(r"wal_objects_written=(\d+), wal_bytes_written=(\d+)", err)
    puts = s3.stats()["counts"].get("put", 0)
    subprocess.run(["rm", "-rf", ws.state], check=True)
    again, err = sync(ws, s3)
    done = re.search(r"done: (\d+) units copied, (\d+) already done", err)
    print("%-5s commit_interval_ms %-4d  median %.2f s (%s)  WAL objects "
          "%s, %s bytes  PUTs %d  |  from an empty folder: %.2f s, %s "
          "units copied, %s skipped" % (
              mode, interval, statistics.median(times),
              " ".join("%.2f" % t for t in times),
              m.group(1) if m else "-", m.group(2) if m else "-", puts,
              again, done.group(1), done.group(2)))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--objects", type=int, default=40)
    ap.add_argument("--repeat", type=int, default=3)
    a = ap.parse_args()
    ws = Workspace("statebench")
    s3 = S3Server(["src", "dst", "state"])
    try:
        ws.generate(objects=a.objects, records=5000, seed=41,
                    framing="lines")
        s3.upload_tree("src", ws.inp)
        for interval in (1000, 0):
            for mode in ("local", "s3"):
                case(ws, s3, mode, interval, a.repeat)
    finally:
        s3.close()
        ws.cleanup()


if __name__ == "__main__":
    main()
