#!/usr/bin/env python3
"""Soak: skipprd in continuous mode, S3 to S3 against the test server,
for MINUTES (10) with new objects arriving all along and faults on (2% of
requests answer 500 or lose their connection). skipprd's RSS is printed
every minute, with the lowest and highest anonymous RSS of the minute
(sampled every second); at the end the input stops, skipprd is given 45 s
to seal what it holds and is stopped with SIGTERM, a last `sync --once`
drains the rest, and the output must hold every record exactly once.
skipprd's own minute report (heap in use, as malloc counts it) is printed
next to the RSS: a leak raises the heap; RSS also moves with the pages of
live buffers that happen to be touched.

    scripts/setup.sh build && SKIPPRD=build/runtime/skipprd \\
        python3 tests/tools/soak.py [--minutes N] [--seed N]

Not part of the test suite (it runs for minutes); its figures are
recorded in docs/RELIABILITY.md.
"""
import argparse
import collections
import json
import os
import random
import re
import signal
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "integration"))
from s3_test import S3Server  # noqa: E402
from skippr_test import (SINK_PREFIX, SKIPPRD, SOURCE_PREFIX,  # noqa: E402
                         Workspace, compare, expected_key, frame)
from test_kafka import kafka_config, make_records  # noqa: E402


def rss_mib(pid):
    """(total, anonymous, file-backed) resident MiB of pid. The file-backed
    part grows as library code pages are first touched (an error path, a
    retry); the anonymous part is the heap, stacks and buffers."""
    got = {}
    try:
        with open("/proc/%d/status" % pid) as f:
            for line in f:
                k = line.split(":")[0]
                if k in ("VmRSS", "RssAnon", "RssFile"):
                    got[k] = int(line.split()[1]) / 1024.0
    except OSError:
        pass
    return tuple(got.get(k, float("nan"))
                 for k in ("VmRSS", "RssAnon", "RssFile"))


HEAP = re.compile(rb"last minute: .* heap in use ([0-9.]+) MiB, malloc "
                  rb"holds ([0-9.]+) MiB")


def heap_reports(path):
    """[(heap in use, malloc holds)] MiB from skipprd's minute reports."""
    with open(path, "rb") as f:
        return [(float(m.group(1)), float(m.group(2)))
                for m in HEAP.finditer(f.read())]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--minutes", type=float, default=10)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--fault-rate", type=float, default=0.02)
    ap.add_argument("--preload", type=int, default=0, metavar="N",
                    help="objects in the bucket before skipprd starts, so "
                    "that every poll lists at least N keys")
    ap.add_argument("--source-option", action="append", default=[],
                    metavar="K=V", help="an S3 source option, e.g. "
                    "list_concurrency=1")
    a = ap.parse_args()
    rng = random.Random(a.seed)
    ws = Workspace("soak")
    s3 = S3Server(["src", "dst", "staging"])
    expected = collections.Counter()
    lock = threading.Lock()
    stop = threading.Event()
    added = [0, 0]  # objects, records
    origin = collections.defaultdict(list)  # expected record -> its keys

    def add_object(k, small=False):
        n = rng.randrange(5, 20) if small else rng.randrange(200, 2000)
        recs = make_records(n, seed=a.seed * 100000 + k, days=3)
        key = "%s/2024/03/%02d/obj-%06d.jsonl" % (SOURCE_PREFIX,
                                                  1 + k % 3, k)
        for attempt in range(50):  # the injected faults hit us too
            try:
                s3.put_visible_at_once("staging", "src", key,
                                       b"\n".join(recs) + b"\n")
                break
            except Exception:  # noqa: BLE001 - any failed PUT: again
                time.sleep(0.1)
        else:
            raise SystemExit("soak: could not add %s" % key)
        with lock:
            for r in recs:
                expected[(expected_key(json.loads(r)), r)] += 1
                origin[(expected_key(json.loads(r)), r)].append(key)
            added[0] += 1
            added[1] += n

    def producer():
        k = a.preload
        while not stop.is_set():
            add_object(k)
            k += 1
            stop.wait(rng.uniform(0.2, 1.0))

    try:
        source = {"s3_bucket": "src", "s3_prefix": SOURCE_PREFIX}
        for kv in a.source_option:
            k, _, v = kv.partition("=")
            source[k] = v
        for k in range(a.preload):
            add_object(k, small=True)
        if a.preload:
            print("preloaded %d objects, %d records" % tuple(added),
                  flush=True)
        kafka_config(ws, ("S3", source),
                     ("S3", {"s3_bucket": "dst", "s3_prefix": SINK_PREFIX}),
                     pipeline_extra={"poll_interval_seconds": 1,
                                     "buffer_threshold_seconds": 30,
                                     "retry_backoff_ms": 20})
        s3.faults(a.fault_rate, ["500", "reset"], seed=a.seed)
        env = dict(os.environ, **s3.env())
        log = open(os.path.join(ws.root, "skipprd.log"), "wb")
        p = subprocess.Popen([SKIPPRD, "sync", "--pipeline",
                              "gdpr_compliant_migration", "--config",
                              ws.config, "--no-progress"], env=env,
                             stdout=log, stderr=log)
        t = threading.Thread(target=producer)
        t.start()
        start = time.time()
        rss, anons, floors = [], [], []
        for minute in range(1, int(a.minutes) + 1):
            # Anonymous RSS every second: its lowest value in the minute
            # is what skipprd keeps between bursts of work (a leak raises
            # it); the highest includes a backlog of work in flight.
            seen = []
            while time.time() < start + 60 * minute:
                if p.poll() is not None:
                    raise SystemExit("skipprd exited (%d) during the soak; "
                                     "see %s" % (p.returncode, log.name))
                seen.append(rss_mib(p.pid)[1])
                time.sleep(1)
            r, anon, filed = rss_mib(p.pid)
            seen.append(anon)
            rss.append(r)
            anons.append(anon)
            floors.append(min(seen))
            heap = heap_reports(log.name)
            with lock:
                print("minute %2d: RSS %6.1f MiB (anonymous %.1f, lowest "
                      "%.1f and highest %.1f in the minute; files %.1f); "
                      "heap in use %s; %d objects, %d records added so far" % (
                          minute, r, anon, min(seen), max(seen), filed,
                          "%.1f MiB (malloc holds %.1f)" % heap[-1]
                          if heap else "not reported yet",
                          added[0], added[1]), flush=True)
        stop.set()
        t.join()
        # Catch up: open slices seal within buffer_threshold_seconds (30);
        # then SIGTERM, and a last --once drains whatever is left. The
        # bucket is read only after: s3rver is not atomic to a reader
        # while the same key is being written again.
        time.sleep(45)
        p.send_signal(signal.SIGTERM)
        p.wait(120)
        want = sum(expected.values())
        heap = [h for h, _ in heap_reports(log.name)]
        last = subprocess.run([SKIPPRD, "sync", "--pipeline",
                               "gdpr_compliant_migration", "--config",
                               ws.config, "--once"], env=env,
                              capture_output=True, timeout=600)
        if last.returncode != 0:
            raise SystemExit("the last --once failed: %s" %
                             last.stderr.decode()[-2000:])
        s3.faults(0, [])
        injected = s3.stats().get("injected", {})
        got = collections.Counter()
        broken = []
        for key, data in s3.objects("dst", SINK_PREFIX + "/").items():
            folder = key[len(SINK_PREFIX) + 1:].rsplit("/", 1)[0]
            try:
                for raw, _ in frame(data):
                    got[(folder, raw)] += 1
            except ValueError as e:
                broken.append(key)
                print("soak: object %s is not JSON lines (%s); %d bytes, "
                      "near the error: %r" % (key, e, len(data),
                                              data[max(0, e.pos - 80):
                                                   e.pos + 80]
                                              if hasattr(e, "pos") else b""))
        if broken:
            raise SystemExit("soak: %d broken objects" % len(broken))
        lost, dup, unexpected = compare(expected, got)
        if lost:
            short = collections.Counter()
            for rec, n in expected.items():
                if got[rec] < n:
                    for key in origin[rec]:
                        short[key] += 1
            print("soak: objects with records missing (up to 20): %s" %
                  ", ".join("%s (%d)" % kv for kv in
                            sorted(short.items())[:20]))
        print("soak: %.1f min, %d objects, %d records; RSS first %.1f, "
              "min %.1f, max %.1f, last %.1f MiB (anonymous first %.1f, "
              "last %.1f; lowest in a minute, from minute 2, %.1f to "
              "%.1f); heap in use, from minute 2, %s; faults "
              "injected %s; skipprd exit %d after SIGTERM; lost %d, "
              "duplicated %d, unexpected %d" % (
                  a.minutes, added[0], want, rss[0], min(rss), max(rss),
                  rss[-1], anons[0], anons[-1], min(floors[1:] or floors),
                  max(floors[1:] or floors),
                  "%.1f to %.1f MiB, median %.1f" % (
                      min(heap[1:]), max(heap[1:]),
                      sorted(heap[1:])[len(heap[1:]) // 2])
                  if len(heap) > 1 else "not reported",
                  json.dumps(injected),
                  p.returncode, lost, dup, unexpected))
        if (lost, dup, unexpected) != (0, 0, 0) or p.returncode != 0:
            raise SystemExit("soak: FAILED")
    finally:
        stop.set()
        s3.close()
        ws.cleanup()


if __name__ == "__main__":
    main()
