#!/usr/bin/env python3
"""How skipprd's time and memory grow: with total bytes, with the number of
objects and with the number of open slices. Figures only; asserts nothing.

    bench/scale.py [--memory-gib 1,4] [--objects 1000,10000,100000]
                   [--partitions 10,1000,10000] [--threads 2]

1. Bounded memory: corpora of each size in --memory-gib (one generated
   64 MiB block of Firehose-like records, copied under new names until the
   size is reached) copied file -> file --once with memory_budget 256MiB and
   buffer_threshold_seconds 86400, so nothing is written before the end
   and everything passes through the WAL. Peak RSS from GNU time.
2. Objects: N small objects (about 1 KiB each, 5 records) into 10
   partitions.
3. Open slices: 64 MiB of records spread over P partitions (P event types),
   all open at once until the end of the run.

Each line gives wall time, MB/s, CPU-s and peak RSS. Needs about three
times the largest corpus in free disk (input, WAL, output).
"""
import argparse
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
SKIPPRD = os.path.join(ROOT, "build", "runtime", "skipprd")
GEN = os.path.join(ROOT, "tests", "tools", "gen_firehose.py")


def setup():
    if not os.path.exists("/usr/bin/time"):
        sudo = [] if os.geteuid() == 0 else ["sudo"]
        subprocess.run(sudo + ["apt-get", "install", "-y", "-qq", "time"],
                       check=True, stdout=subprocess.DEVNULL)
    subprocess.run([os.path.join(ROOT, "scripts", "setup.sh"), "build"],
                   check=True, stdout=subprocess.DEVNULL)


def tree_bytes(root):
    return sum(os.path.getsize(os.path.join(d, f))
               for d, _, fs in os.walk(root) for f in fs)


def run(work, inp, threads, extra=""):
    """skipprd file -> file --once over inp; (wall, cpu, rss MB)."""
    out = os.path.join(work, "out")
    state = os.path.join(work, "state")
    for p in (out, state):
        shutil.rmtree(p, ignore_errors=True)
    cfg = os.path.join(work, "skippr.yml")
    with open(cfg, "w") as f:
        f.write("""skippr:
  state_dir: %s
pipelines:
  p:
    data_source: data_sources.a
    data_sink: data_sinks.b
    buffer_threshold_seconds: 86400
    memory_budget: 256MiB
%s    transform:
      namespace_fields: event_type
      batch_partition_fields: detail.tenant_id,truck.tenant_id
      batch_time_fields: timestamp
      batch_time_unit: month
data_sources:
  a:
    File:
      path: %s
data_sinks:
  b:
    File:
      path: %s
""" % (state, extra, inp, out))
    with tempfile.NamedTemporaryFile("r") as t:
        p = subprocess.run(["/usr/bin/time", "-f", "%e %U %S %M", "-o", t.name,
                            SKIPPRD, "sync", "-p", "p", "--once", "-q", "-t",
                            str(threads), "-c", cfg],
                           stderr=subprocess.PIPE, text=True)
        if p.returncode != 0:
            sys.exit("skipprd failed:\n" + p.stderr[-2000:])
        wall, user, sys_, rss = t.read().split()[-4:]
    for p in (out, state):
        shutil.rmtree(p, ignore_errors=True)
    return float(wall), float(user) + float(sys_), int(rss) / 1024


def report(label, size, r):
    wall, cpu, rss = r
    print("%-34s %9.1f MB %8.2f s %7.0f MB/s %7.2f CPU-s %7.0f MB RSS" % (
        label, size / 1e6, wall, size / 1e6 / wall, cpu, rss), flush=True)


def small_objects(root, n, per=5):
    """n objects of `per` records each, in 100 folders, 10 partitions."""
    for i in range(n):
        d = os.path.join(root, "%03d" % (i % 100))
        os.makedirs(d, exist_ok=True)
        with open(os.path.join(d, "o%07d" % i), "wb") as f:
            for k in range(per):
                f.write(b'{"event_type":"e%d","timestamp":"2021-10-05T01:02:03Z"'
                        b',"detail":{"tenant_id":"t1","n":%d,"pad":"%s"}}\n'
                        % ((i + k) % 10, k, b"x" * 130))


def many_partitions(root, parts, mb=64):
    os.makedirs(root)
    rec = 0
    for fi in range(16):
        lines = []
        for _ in range(mb * 10**6 // 16 // 200):
            lines.append(b'{"event_type":"p%05d","timestamp":"2021-10-05T01:02'
                         b':03Z","detail":{"tenant_id":"t1","n":%d,"pad":"%s"}}'
                         b'\n' % (rec % parts, rec, b"y" * 100))
            rec += 1
        with open(os.path.join(root, "f%02d" % fi), "wb") as f:
            f.write(b"".join(lines))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--memory-gib", default="1,4")
    ap.add_argument("--objects", default="1000,10000,100000")
    ap.add_argument("--partitions", default="10,1000,10000")
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()
    setup()
    work = tempfile.mkdtemp(prefix="skippr-scale-")
    try:
        print("== bounded memory: memory_budget 256MiB, "
              "buffer_threshold_seconds 86400")
        block = os.path.join(work, "block")
        subprocess.run([sys.executable, GEN, block, "--objects", "100",
                        "--records", "3300", "--seed", "7", "--plain"],
                       check=True, stdout=subprocess.DEVNULL)
        bsize = tree_bytes(block)
        for gib in [float(x) for x in args.memory_gib.split(",") if x]:
            inp = os.path.join(work, "big")
            shutil.rmtree(inp, ignore_errors=True)
            copies = max(1, int(gib * 2**30 // bsize))
            for c in range(copies):
                shutil.copytree(block, os.path.join(inp, "c%04d" % c))
            size = tree_bytes(inp)
            report("%g GiB corpus" % gib, size, run(work, inp, args.threads))
            shutil.rmtree(inp)

        def case(label, name, build, n):
            inp = os.path.join(work, name)
            build(inp, n)
            report(label % n, tree_bytes(inp), run(work, inp, args.threads))
            shutil.rmtree(inp)

        print("== objects: small objects (5 records each), 10 partitions")
        for n in [int(x) for x in args.objects.split(",") if x]:
            case("%d objects", "small", small_objects, n)

        print("== open slices: 64 MB over P partitions, all open to the end")
        for parts in [int(x) for x in args.partitions.split(",") if x]:
            case("%d partitions", "parts", many_partitions, parts)
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
