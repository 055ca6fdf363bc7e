#!/usr/bin/env python3
"""How skipprd's cost grows with the number of units (objects) it has done:
the ledger and the listing, not the bytes. Figures only; asserts nothing.

    bench/units.py [--files 1000000] [--synth 1000000,10000000]
                   [--restore 1000000] [--threads 2]

Two kinds of archive of small objects (two JSON records each, Firehose-like
keys "YYYY/MM/DD/HH/stream-1-...", 1,000 an hour):

  --files N   N real files in a folder tree, copied by the File source.
  --synth N   N units made up as they are listed by the bench's Synth
              source (bench/synth_source.c): ten million units without ten
              million files. Keys end in 16 random hex digits and versions
              are 32 (an S3 ETag's length), so the ledger cannot compress
              them away.

For each: the first `--once` (units/s, peak RSS), `skipprd verify` of
it (both sides read again: wall time next to the copy's, peak RSS), then
`verify --since-state` twice (the first reads everything, the second
nothing new), a re-run with nothing new
(units/s skipped, peak RSS; the median of five runs; for files also "by
name", with `verify_done_units: false`, which skips done files without a
stat), the ledger's bytes
per unit, and a run after 1,000 new units land: its wall time and the
time of its ledger flush (the `ledger: flushed` debug line), the cost the
issue calls one compaction;
then 1,000 more with `incremental_listing: true`, which lists only after
the mark the previous run left.
Each copy goes file -> File sink, partitioned by event type, tenant and day.

  --restore N  N synth units with the state in a bucket
               (skipprd_el_storage_mode: s3, on s3rver behind the test
               proxy): the first run, the state's objects and bytes in the
               bucket, then the state folder deleted, as on a replacement
               box, and a run that restores it and skips all N (its wall
               time, and the GETs it made).
"""
import argparse
import hashlib
import os
import re
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
SKIPPRD = os.path.join(ROOT, "build", "runtime", "skipprd")
SYNTH_DIR = os.path.join(ROOT, "build", "bench", "plugins")

# GNU time and the build (which makes the Synth plugin too), as scale.py.
from scale import setup  # noqa: E402


def make_files(root, first, n):
    """Files first..first+n-1, 1,000 an hour, two records each."""
    d = None
    for i in range(first, first + n):
        h = i // 1000
        day, hour = divmod(h, 24)
        mon, dom = 1 + day // 28 % 12, 1 + day % 28
        nd = os.path.join(root, "2024/%02d/%02d/%02d" % (mon, dom, hour))
        if nd != d:
            os.makedirs(nd, exist_ok=True)
            d = nd
        u = hashlib.md5(b"%d" % i).hexdigest()
        name = "stream-1-2024-%02d-%02d-%02d-%03d-%s-%s-%s-%s-%s" % (
            mon, dom, hour, i % 1000, u[:8], u[8:12], u[12:16], u[16:20],
            u[20:])
        with open(os.path.join(d, name), "wb") as f:
            for k in range(2):
                f.write(b'{"event_type":"e%d","timestamp":"2024-%02d-%02dT'
                        b'%02d:00:00Z","detail":{"tenant_id":"t%d","n":%d}}\n'
                        % ((i + k) % 5, mon, dom, hour, i % 7, k))


def write_config(work, source, extra="", top="", sinks=""):
    """The bench's config; top: more lines under skippr:, sinks: more
    sinks under data_sinks:."""
    cfg = os.path.join(work, "skippr.yml")
    with open(cfg, "w") as f:
        f.write("""skippr:
%s  state_dir: %s/state
  plugin_dirs: [%s]
pipelines:
  p:
    data_source: data_sources.a
    data_sink: data_sinks.b
%s    transform:
      namespace_fields: event_type
      batch_partition_fields: detail.tenant_id
      batch_time_fields: timestamp
      batch_time_unit: day
data_sources:
  a:
%s
data_sinks:
  b:
    File:
      path: %s/out
%s""" % (top, work, SYNTH_DIR, extra, source, work, sinks))
    return cfg


def run(cfg, threads, verbose=False, env=None):
    """One --once run: (wall s, peak RSS MiB, stderr)."""
    with tempfile.NamedTemporaryFile("r") as t:
        cmd = ["/usr/bin/time", "-f", "%e %M", "-o", t.name, SKIPPRD, "sync",
               "-p", "p", "--once", "-t", str(threads), "-c", cfg]
        cmd.append("-vv" if verbose else "-q")
        p = subprocess.run(cmd, stderr=subprocess.PIPE, text=True, env=env)
        if p.returncode != 0:
            sys.exit("skipprd failed:\n" + p.stderr[-2000:])
        wall, rss = t.read().split()[-2:]
    return float(wall), int(rss) / 1024, p.stderr


def verify(cfg, threads, *extra):
    """skipprd verify of the pipeline: (wall s, peak RSS MiB, clean)."""
    with tempfile.NamedTemporaryFile("r") as t:
        p = subprocess.run(["/usr/bin/time", "-f", "%e %M", "-o", t.name,
                            SKIPPRD, "verify", "-p", "p", "-q", "-t",
                            str(threads), "-c", cfg, *extra],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           text=True)
        if p.returncode not in (0, 6):
            sys.exit("skipprd verify failed:\n" + p.stderr[-2000:])
        wall, rss = t.read().split()[-2:]
    return float(wall), int(rss) / 1024, p.returncode == 0


def units_listed(err):
    """Units the run listed, from its summary: copied + already done."""
    m = re.search(r"done: (\d+) units copied, (\d+) already done", err)
    return int(m.group(1)) + int(m.group(2)) if m else -1


def dir_bytes(root):
    return sum(os.path.getsize(os.path.join(d, f))
               for d, _, fs in os.walk(root) for f in fs)


def rerun(label, what, n, cfg, threads):
    """The median of five runs with nothing new."""
    reruns = sorted(run(cfg, threads)[:2] for _ in range(5))
    wall, rss = reruns[2]
    print("%-22s %-11s %9.2f s %9.0f units/s %6.0f MiB RSS (median "
          "of 5: %.2f to %.2f s)" % (label, what, wall, n / wall, rss,
                                    reruns[0][0], reruns[-1][0]), flush=True)


def case(label, n, work, source_for, add_new, threads, by_name=False):
    cfg = write_config(work, source_for(n))
    wall, rss, _ = run(cfg, threads)
    print("%-22s first run   %9.1f s %9.0f units/s %6.0f MiB RSS" % (
        label, wall, n / wall, rss), flush=True)
    vwall, vrss, clean = verify(cfg, threads)
    print("%-22s verify      %9.1f s %9.0f units/s %6.0f MiB RSS, %s "
          "(%.2f x the first run's time)" % (
              label, vwall, n / vwall, vrss, "clean" if clean else
              "NOT CLEAN", vwall / wall), flush=True)
    for what in ("first", "nothing new"):
        swall, srss, clean = verify(cfg, threads, "--since-state")
        print("%-22s verify --since-state, %s: %.2f s %6.0f MiB RSS, %s" % (
            label, what, swall, srss, "clean" if clean else "NOT CLEAN"),
            flush=True)
    # The re-run is short and the machine shared: the median of five.
    rerun(label, "re-run", n, cfg, threads)
    if by_name:
        rerun(label, "by name", n,
              write_config(work, source_for(n),
                           "    verify_done_units: false\n"), threads)
        cfg = write_config(work, source_for(n))
    ledger = dir_bytes(os.path.join(work, "state", "default", "p",
                                    "ledger.d"))
    print("%-22s ledger      %9.1f MB %8.1f bytes/unit" % (
        label, ledger / 1e6, ledger / n), flush=True)
    cfg = write_config(work, source_for(add_new(n)))
    wall, rss, err = run(cfg, threads, verbose=True)
    flushes = re.findall(r"ledger: flushed (\d+) units in ([0-9.]+) ms", err)
    last = flushes[-1] if flushes else ("?", "?")
    print("%-22s +1,000 new  %9.2f s, flush of %s units %s ms, %6.0f MiB "
          "RSS" % (label, wall, last[0], last[1], rss), flush=True)
    swall, srss, clean = verify(cfg, threads, "--since-state")
    print("%-22s +1,000 new, verify --since-state: %.2f s %6.0f MiB RSS, %s"
          % (label, swall, srss, "clean" if clean else "NOT CLEAN"),
          flush=True)
    # The same again with incremental_listing: the run lists only after
    # the mark the last one left (every unit before it is done and old).
    cfg = write_config(work, source_for(add_new(n + 1000)),
                       "    incremental_listing: true\n")
    wall, rss, err = run(cfg, threads, verbose=True)
    print("%-22s +1,000 new, incremental_listing: %.2f s, %d units listed, "
          "%6.0f MiB RSS" % (label, wall, units_listed(err), rss),
          flush=True)


def restore_case(n, threads):
    """N synth units with the state in a bucket; then the state folder is
    deleted and a run restores it and skips them all."""
    sys.path.insert(0, os.path.join(ROOT, "tests", "integration"))
    os.environ.setdefault("SKIPPR_SOURCE_DIR", ROOT)
    from s3_test import S3Server
    label = "synth %d, s3 state" % n
    s3 = S3Server(["state"])
    work = tempfile.mkdtemp(prefix="skippr-units-")
    try:
        env = dict(os.environ, **s3.env())
        cfg = write_config(
            work, "    Synth:\n      units: %d" % n,
            top="  workspace: w\n  skipprd_el_storage_mode: s3\n"
                "  state_store: data_sinks.state\n",
            sinks="  state:\n    S3:\n      s3_bucket: state\n"
                  "      s3_prefix: skippr-state\n")
        wall, rss, _ = run(cfg, threads, env=env)
        print("%-22s first run   %9.1f s %9.0f units/s %6.0f MiB RSS" % (
            label, wall, n / wall, rss), flush=True)
        objs, size = 0, 0
        pages = s3.client.get_paginator("list_objects_v2")
        for page in pages.paginate(Bucket="state"):
            for o in page.get("Contents", []):
                objs += 1
                size += o["Size"]
        print("%-22s in the bucket: %d objects, %.1f MB (%.1f bytes/unit)" %
              (label, objs, size / 1e6, size / n), flush=True)
        shutil.rmtree(os.path.join(work, "state"))
        s3.reset_stats()
        wall, rss, err = run(cfg, threads, verbose=True, env=env)
        gets = s3.stats()["counts"].get("get", 0)
        m = re.search(r"state \S+: restored \(.*\)", err)
        d = re.search(r"done: (\d+) units copied, (\d+) already done", err)
        print("%-22s empty disk  %9.2f s to restore, then %s units copied "
              "and %s skipped, %d GETs, %6.0f MiB RSS; %s" % (
                  label, wall, d.group(1) if d else "?",
                  d.group(2) if d else "?", gets, rss,
                  m.group(0) if m else "no restore logged"), flush=True)
    finally:
        s3.close()
        shutil.rmtree(work, ignore_errors=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--files", default="1000000")
    ap.add_argument("--synth", default="1000000,10000000")
    ap.add_argument("--restore", default="1000000")
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()
    setup()
    for n in [int(x) for x in args.files.split(",") if x]:
        work = tempfile.mkdtemp(prefix="skippr-units-")
        try:
            inp = os.path.join(work, "in")
            make_files(inp, 0, n)

            def add_files(m, inp=inp):
                make_files(inp, m, 1000)
                return m + 1000
            case("files %d" % n, n, work,
                 lambda m, inp=inp: "    File:\n      path: %s" % inp,
                 add_files, args.threads, by_name=True)
        finally:
            shutil.rmtree(work, ignore_errors=True)
    for n in [int(x) for x in args.synth.split(",") if x]:
        work = tempfile.mkdtemp(prefix="skippr-units-")
        try:
            case("synth %d" % n, n, work,
                 lambda m: "    Synth:\n      units: %d" % m,
                 lambda m: m + 1000, args.threads)
        finally:
            shutil.rmtree(work, ignore_errors=True)
    for n in [int(x) for x in args.restore.split(",") if x]:
        restore_case(n, args.threads)


if __name__ == "__main__":
    main()
