#!/usr/bin/env python3
"""S3 Inventory as the listing: a report in AWS's format (manifest.json and
gzip'd CSV files, rows in no order, keys URL-encoded, made from the bucket
by tests/tools/make_inventory.py) lists the source bucket's objects; the
copy is exact and the proxy counts no LIST request. Rows of another bucket
and delete markers are skipped; a Parquet report is refused clearly.
SKIPPR_INVENTORY_KEYS sets the number of objects (default 10,000; the
figure in docs/PERFORMANCE.md is from a run with 100,000)."""
import os
import subprocess
import sys
import time

from s3_test import S3Server
from skippr_test import (SOURCE_DIR, Workspace, check, expected_records,
                         main, output_records)

TOOL = os.path.join(SOURCE_DIR, "tests", "tools", "make_inventory.py")
TRANSFORM = {"namespace_fields": "event_type"}


def make_inventory(s3, extra=(), fmt="CSV"):
    env = dict(os.environ, **s3.env())
    p = subprocess.run([sys.executable, TOOL, s3.endpoint, "src", "inv",
                        "--files", "4", "--format", fmt] + list(extra),
                       env=env, capture_output=True, text=True, check=True)
    return p.stdout.strip()


def config(ws, manifest):
    with open(ws.config, "w") as f:
        f.write("""skippr:
  state_dir: %s
pipelines:
  p:
    data_source: data_sources.a
    data_sink: data_sinks.b
    transform:
      namespace_fields: event_type
data_sources:
  a:
    S3:
      s3_bucket: src
      inventory_manifest: %s
data_sinks:
  b:
    File:
      path: %s
""" % (ws.state, manifest, ws.out))


def test_inventory_lists_without_list_requests():
    n = int(os.environ.get("SKIPPR_INVENTORY_KEYS", "10000"))
    ws = Workspace("inventory")
    s3 = S3Server(["src", "dst", "inv"])
    try:
        ws.generate(objects=n, records=2, seed=21)
        # A key that URL-encoding changes.
        with open(os.path.join(ws.inp, "ill-just-dump-this-here",
                               "odd key+&=%.json"), "w") as f:
            f.write('{"event_type":"odd","n":1}\n')
        t0 = time.time()
        s3.seed_tree("src", ws.inp)
        up = time.time() - t0
        manifest = make_inventory(s3, ["--extra-rows"])
        config(ws, manifest)
        s3.reset_stats()
        t0 = time.time()
        p = s3.sync(ws.config)
        secs = time.time() - t0
        check(p.returncode == 0, p.stderr[-2000:])
        counts = s3.stats()["counts"]
        check(counts.get("list", 0) == 0, "LIST requests: %s" % counts)
        check("%d objects of s3://src/" % (n + 1) in p.stderr, p.stderr)
        want = expected_records(ws.inp, transform=TRANSFORM)
        got = output_records(ws.out)
        check(dict(want) == dict(got), "output differs from input")
        print("  %d keys listed from the inventory, copied in %.1f s with "
              "0 LIST requests (%s); placing them took %.1f s" % (
                  n + 1, secs, counts, up))
        # A second run, sorting the report on disk in small chunks: nothing
        # new, nothing listed from the bucket.
        s3.reset_stats()
        p = s3.sync(ws.config, env={"SKIPPR_TEST_INVENTORY_CHUNK": "100000"})
        check("(sorted on disk)" in p.stderr, p.stderr[-1000:])
        check(p.returncode == 0 and "0 units copied, %d already done" %
              (n + 1) in p.stderr, p.stderr[-1000:])
        check(s3.stats()["counts"].get("list", 0) == 0, "LIST on re-run")
        # Parquet: refused, saying what to do.
        config(ws, make_inventory(s3, fmt="Parquet"))
        p = s3.sync(ws.config)
        check(p.returncode == 1 and "fileFormat Parquet is not read" in
              p.stderr and "configure the inventory as CSV" in p.stderr,
              p.stderr[-1000:])
    finally:
        s3.close()
        ws.cleanup()


if __name__ == "__main__":
    main([test_inventory_lists_without_list_requests])
