#!/usr/bin/env python3
"""S3 -> S3 against s3rver: skipprd next to `rclone copy`, same objects,
same server, same run. Prints CPU-seconds per GB of source data (user +
system of the copying process, from wait4), wall time, minor page faults
and peak RSS, the median of RUNS runs each, and the ratio of each run's
pair (one skipprd, then one rclone). Then `skipprd verify` of the last
copy, full and `--since-state`. Figures only; it asserts nothing.

    bench/s3_vs_rclone.py [--tls] [--plain] [OBJECTS] [RECORDS_PER_OBJECT]
                          [RUNS]

--tls serves s3rver over HTTPS (a certificate made for the run, which
both tools are told to trust), as S3 is reached in production: both then
pay for TLS, and skipprd, like the AWS SDKs, no longer hashes bodies into
the request signature.

--plain stores every object uncompressed; by default some are gzip or
zstd, which skipprd inflates and rclone copies as they are (so skipprd
also uploads more bytes than it read).

rclone copies bytes without looking inside; skipprd reads every record,
routes it by tenant, type and day, and writes new objects, exactly once.
The two do different work; the figure says what skipprd's extra work
costs. rclone is told not to copy server-side (two remotes, --disable
Copy), so both move every byte through the client.
"""
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(ROOT, "tests", "integration"))
os.environ.setdefault("SKIPPR_SOURCE_DIR", ROOT)

from s3_test import (ACCESS_KEY, SECRET_KEY, S3Server,  # noqa: E402
                     make_cert)

SKIPPRD = os.path.join(ROOT, "build", "runtime", "skipprd")
GEN = os.path.join(ROOT, "tests", "tools", "gen_firehose.py")


def timed(args, env):
    """Run args; return (wall seconds, CPU seconds of the process, minor
    page faults, peak RSS in MiB)."""
    start = time.monotonic()
    proc = subprocess.Popen(args, env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.monotonic() - start
    err = proc.stderr.read().decode(errors="replace")
    proc.stderr.close()
    if os.waitstatus_to_exitcode(status) != 0:
        sys.exit("%s failed:\n%s" % (args[0], err[-2000:]))
    return (wall, usage.ru_utime + usage.ru_stime, usage.ru_minflt,
            usage.ru_maxrss / 1024)


def setup():
    """rclone from Debian, and skippr built."""
    if not shutil.which("rclone"):
        sudo = [] if os.geteuid() == 0 else ["sudo"]
        subprocess.run(sudo + ["apt-get", "install", "-y", "-qq", "rclone"],
                       check=True, stdout=subprocess.DEVNULL)
    subprocess.run([os.path.join(ROOT, "scripts", "setup.sh"), "build"],
                   check=True, stdout=subprocess.DEVNULL)


def verify_figures(cfg, env, copies):
    """skipprd verify of the last run's copy (both buckets read back), and
    verify --since-state: the first (everything), then one with nothing
    new; next to the copy's median wall time and peak RSS."""
    wall = statistics.median(r[0] for r in copies)
    rss = statistics.median(r[3] for r in copies)
    for label, extra in (("verify", []),
                         ("verify --since-state, first", ["--since-state"]),
                         ("verify --since-state, nothing new",
                          ["--since-state"])):
        w, cpu, _, r = timed([SKIPPRD, "verify", "-p", "p", "-q", "-c", cfg]
                             + extra, env)
        print("%-34s %.2f s wall (%.2fx the copy's), %.2f CPU-s, peak RSS "
              "%.0f MiB (the copy's %.0f), clean" % (label, w, w / wall,
                                                     cpu, r, rss))


def main():
    setup()
    args = [a for a in sys.argv[1:] if a not in ("--tls", "--plain")]
    tls = "--tls" in sys.argv[1:]
    plain = ["--plain"] if "--plain" in sys.argv[1:] else []
    objects = int(args[0]) if len(args) > 0 else 300
    records = int(args[1]) if len(args) > 1 else 2000
    runs = int(args[2]) if len(args) > 2 else 3
    work = tempfile.mkdtemp(prefix="skippr-bench-s3-")
    cert = make_cert(work) if tls else None
    s3 = S3Server(["src", "dst"], tls=cert)
    try:
        inp = os.path.join(work, "in")
        subprocess.run([sys.executable, GEN, inp, "--objects", str(objects),
                        "--records", str(records), "--seed", "42"] + plain,
                       check=True, stdout=subprocess.DEVNULL)
        n = s3.upload_tree("src", inp)
        size = sum(os.path.getsize(os.path.join(d, f))
                   for d, _, fs in os.walk(inp) for f in fs)
        print("corpus: %d objects, %.1f MB as stored (%s), s3rver at %s"
              % (n, size / 1e6, "uncompressed" if plain else
                 "some gzip/zstd", s3.endpoint))

        env = dict(os.environ)
        env.pop("AWS_CA_BUNDLE", None)  # rclone refuses it on plain HTTP
        env.update(s3.env())
        sk_env = dict(env)
        if tls:
            sk_env["AWS_CA_BUNDLE"] = cert[0]
        for name in ("A", "B"):
            for k, v in (("TYPE", "s3"), ("PROVIDER", "Other"),
                         ("ENDPOINT", s3.endpoint),
                         ("ACCESS_KEY_ID", ACCESS_KEY),
                         ("SECRET_ACCESS_KEY", SECRET_KEY),
                         ("FORCE_PATH_STYLE", "true"),
                         ("NO_CHECK_BUCKET", "true"),
                         # the proxy emulates Delimiter on ListObjectsV2 only
                         ("LIST_VERSION", "2")):
                env["RCLONE_CONFIG_%s_%s" % (name, k)] = v

        results = {"skipprd": [], "rclone": []}
        for i in range(runs):
            cfg = os.path.join(work, "skippr-%d.yml" % i)
            with open(cfg, "w") as f:
                f.write("""skippr:
  state_dir: %s/state-%d
pipelines:
  p:
    data_source: data_sources.a
    data_sink: data_sinks.b
    buffer_threshold_seconds: 86400
    transform:
      namespace_fields: event_type
      batch_partition_fields: detail.tenant_id,truck.tenant_id
      batch_time_fields: timestamp
      batch_time_unit: day
      time_partition_prefix: p_
data_sources:
  a:
    S3:
      s3_bucket: src
      s3_prefix: ill-just-dump-this-here
      concurrency: 64
data_sinks:
  b:
    S3:
      s3_bucket: dst
      s3_prefix: skippr-%d
""" % (work, i, i))
            results["skipprd"].append(timed(
                [SKIPPRD, "sync", "-p", "p", "--once", "-q", "-c", cfg],
                sk_env))
            results["rclone"].append(timed(
                ["rclone", "copy", "A:src/ill-just-dump-this-here",
                 "B:dst/rclone-%d" % i, "--transfers", "64", "--checkers",
                 "64", "--disable", "Copy", "--config", "/dev/null"] +
                (["--ca-cert", cert[0]] if tls else []), env))

        for tool in ("skippr", "rclone"):
            keys = sum(len(p.get("Contents", [])) for p in
                       s3.client.get_paginator("list_objects_v2").paginate(
                           Bucket="dst", Prefix="%s-0/" % tool))
            print("%s wrote %d objects in run 1" % (tool, keys))
        gb = size / 1e9
        med = {}
        for tool, rs in results.items():
            wall, cpu, faults, rss = (statistics.median(r[i] for r in rs)
                                      for i in range(4))
            med[tool] = cpu / gb
            print("%-8s median of %d: %.2f s wall, %.2f CPU-s -> %.1f "
                  "CPU-s/GB, %.1f MB/s; %d minor faults, peak RSS %.0f MiB"
                  % (tool, runs, wall, cpu, cpu / gb, size / 1e6 / wall,
                     faults, rss))
        print("skipprd / rclone CPU per GB: %.2fx" %
              (med["skipprd"] / med["rclone"]))
        # Each run is one skipprd and one rclone back to back: their ratio
        # is the figure the machine's drift moves least.
        pairs = sorted(a[1] / b[1] for a, b in zip(results["skipprd"],
                                                    results["rclone"]))
        print("paired, run by run: median %.2fx (%.2fx to %.2fx)" %
              (statistics.median(pairs), pairs[0], pairs[-1]))
        verify_figures(cfg, sk_env, results["skipprd"])
    finally:
        s3.close()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
