#!/usr/bin/env python3
"""skippr next to its peers, on the same data, in one run, in one table.

    bench/peers.py [--mb MB] [--runs N]

A deterministic Firehose-like corpus (newline-delimited JSON, mixed event
types, nested detail or truck, several timestamp formats) is generated
once. Each row then does its job on it RUNS times; the table shows the
median of each figure:

  cat, cp -r + sync   the limits: read the bytes; copy the tree
  jq -c .             re-encode every record (no partitioning)
  naive Python        json.loads, group by type/tenant/day, json.dumps
  DuckDB              read_json_auto, COPY ... PARTITION_BY type/tenant/day
  skipprd -t 1, -t 2  the seed's migration, file -> file, --once; and
                      -t 2 with the source's format: jsonl and
                      validate: false (records end at their newline)

Before the table, the peek on one core with the corpus in memory: a
simdjson On-Demand program and skippr's peek+route each find event_type,
the tenant and the timestamp and each record's span (skippr also builds
the destination key), on the same file, for newline-delimited,
concatenated and pretty-printed framing; median of 7 passes.

GB/s is input bytes over wall time; CPU-s/GB is user + system time over
input bytes; RSS is the peak resident set (GNU time); byte-equal says
whether the records written are exactly the input's records (a multiset
hash of every output line against the input's). Figures only; it asserts
nothing. Needs jq, libsimdjson-dev, GNU time, g++ and DuckDB from npm;
it installs what is missing.
"""
import argparse
import hashlib
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
BUILD = os.path.join(ROOT, "build")
SKIPPRD = os.path.join(BUILD, "runtime", "skipprd")
BENCH_PEEK = os.path.join(BUILD, "bench", "bench_peek")
SIMDJSON_PEEK = os.path.join(BUILD, "bench", "simdjson_peek")
GEN = os.path.join(ROOT, "tests", "tools", "gen_firehose.py")
DUCKDB = os.path.join(HERE, "duckdb")
PACKAGES = ["jq", "libsimdjson-dev", "time", "g++"]


def setup():
    missing = [p for p in PACKAGES if subprocess.run(
        ["dpkg-query", "-W", "-f=${Status}", p], capture_output=True,
        text=True).stdout.find("ok installed") < 0]
    if missing:
        sudo = [] if os.geteuid() == 0 else ["sudo"]
        subprocess.run(sudo + ["apt-get", "install", "-y", "-qq"] + missing,
                       check=True, stdout=subprocess.DEVNULL)
    subprocess.run([os.path.join(ROOT, "scripts", "setup.sh"), "build"],
                   check=True, stdout=subprocess.DEVNULL)
    subprocess.run(["cmake", "--build", BUILD, "--target", "bench_peek"],
                   check=True, stdout=subprocess.DEVNULL)
    subprocess.run(["g++", "-O2", "-std=c++17", "-o", SIMDJSON_PEEK,
                    os.path.join(HERE, "simdjson_peek.cpp"), "-lsimdjson"],
                   check=True)
    if not os.path.isdir(os.path.join(DUCKDB, "node_modules", "@duckdb")):
        subprocess.run(["npm", "ci", "--no-audit", "--no-fund"], cwd=DUCKDB,
                       check=True, stdout=subprocess.DEVNULL)


def measure(cmd, cwd=None, stdout=subprocess.DEVNULL):
    """Run cmd under GNU time: (wall s, CPU s, peak RSS MB, stdout)."""
    with tempfile.NamedTemporaryFile("r") as t:
        p = subprocess.run(["/usr/bin/time", "-f", "%e %U %S %M", "-o",
                            t.name] + cmd, cwd=cwd, stdout=stdout,
                           stderr=subprocess.PIPE, text=True)
        if p.returncode != 0:
            sys.exit("%s failed:\n%s" % (" ".join(cmd), p.stderr[-2000:]))
        wall, user, sys_, rss = t.read().split()[-4:]
    return (float(wall), float(user) + float(sys_), int(rss) / 1024,
            p.stdout)


def line_digest(paths):
    """(count, sum of 64-bit hashes) of every non-empty line: equal for two
    trees exactly when their records are the same multiset (but for
    astronomically unlikely collisions)."""
    n = total = 0
    for path in paths:
        with open(path, "rb") as f:
            for line in f:
                line = line.rstrip(b"\r\n")
                if not line.strip():
                    continue
                h = hashlib.blake2b(line, digest_size=8).digest()
                total = (total + int.from_bytes(h, "little")) & (2**64 - 1)
                n += 1
    return n, total


def files(root):
    return sorted(os.path.join(d, f) for d, _, fs in os.walk(root)
                  for f in fs if not f.startswith("."))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mb", type=int, default=128)
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()
    setup()
    work = tempfile.mkdtemp(prefix="skippr-peers-")
    try:
        inp = os.path.join(work, "in")
        per_obj = 4000  # records per object, about 0.6 MB
        objects = max(1, args.mb * 10**6 // (per_obj * 160))
        subprocess.run([sys.executable, GEN, inp, "--objects", str(objects),
                        "--records", str(per_obj), "--seed", "42", "--plain",
                        "--framing", "lines"], check=True,
                       stdout=subprocess.DEVNULL)
        in_files = files(inp)
        size = sum(os.path.getsize(f) for f in in_files)
        one = os.path.join(work, "all.jsonl")
        with open(one, "wb") as out:
            for f in in_files:
                with open(f, "rb") as src:
                    shutil.copyfileobj(src, out)
        want = line_digest(in_files)
        subprocess.run(["cat"] + in_files, stdout=subprocess.DEVNULL)
        print("corpus: %d objects, %.1f MB, %d records; %d runs each, "
              "medians\n" % (len(in_files), size / 1e6, want[0], args.runs))

        print("peek, one core, in memory, median of 7:")
        for framing in ("lines", "concat", "pretty"):
            path = os.path.join(work, "peek-%s.json" % framing)
            subprocess.run([BENCH_PEEK, "--dump", path, str(args.mb),
                            framing], check=True)
            theirs = subprocess.run([SIMDJSON_PEEK, path, "7", framing],
                                    check=True, capture_output=True,
                                    text=True).stdout.strip()
            ours = subprocess.run([BENCH_PEEK, "--file", path, "7", framing],
                                  check=True, capture_output=True,
                                  text=True).stdout.strip()
            skim = subprocess.run([BENCH_PEEK, "--file", path, "7", framing],
                                  check=True, capture_output=True, text=True,
                                  env=dict(os.environ, SKIPPR_BENCH_SKIM="1")
                                  ).stdout.strip()
            mb = [float(x.split(" MB/s")[0].rsplit(" ", 1)[1])
                  for x in (theirs, ours, skim)]
            print("  " + theirs + "\n  " + ours + "\n  " + skim)
            print("  %s: skippr / simdjson = %.2fx (validate: true), %.2fx "
                  "(validate: false)" % (framing, mb[1] / mb[0],
                                         mb[2] / mb[0]))
            os.unlink(path)
        print()

        config = os.path.join(work, "skippr.yml")

        def skipprd(threads, validate=True):
            # One thread runs pinned to one CPU: skipprd's upload threads
            # would otherwise use the second core, and "1 -> 2 threads"
            # would not measure what a second core gives.
            def run(out):
                with open(os.path.join(ROOT, "examples", "gdpr-files",
                                       "skippr.yml")) as f:
                    text = f.read()
                text = (text.replace("${SKIPPR_DEMO_DIR}/in", inp)
                        .replace("${SKIPPR_DEMO_DIR}/out", out)
                        .replace("${SKIPPR_DEMO_DIR}/.skippr", out + ".state"))
                if not validate:
                    # The corpus is newline-delimited: say so, and skip
                    # validation (the peek then ends a record at its
                    # newline once routing is settled).
                    text = text.replace(
                        "    buffer_threshold_seconds: 86400\n",
                        "    buffer_threshold_seconds: 86400\n"
                        "    validate: false\n")
                    src = "      prefix: ill-just-dump-this-here\n"
                    assert src in text
                    text = text.replace(src, src + "      format: jsonl\n")
                with open(config, "w") as f:
                    f.write(text)
                pin = ["taskset", "-c", "0"] if threads == 1 else []
                return pin + [SKIPPRD, "sync", "-p",
                              "gdpr_compliant_migration", "--once", "-q",
                              "-t", str(threads), "-c", config]
            return run

        rows = [
            ("cat (read limit)", lambda out: ["cat"] + in_files, None),
            ("cp -r + sync", lambda out: ["sh", "-c", 'cp -r "$0" "$1" && '
                                          'sync -f "$1"', inp, out], "tree"),
            ("jq -c .", lambda out: ["sh", "-c", 'jq -c . "$@" > "$0"',
                                     out] + in_files, "file"),
            ("naive Python", lambda out: [sys.executable,
                                          os.path.join(HERE, "naive_copy.py"),
                                          inp, out], "tree"),
            ("DuckDB COPY PARTITION_BY", lambda out: [
                "node", os.path.join(DUCKDB, "copy.mjs"), inp, out, "2"],
             "tree"),
            ("skipprd, 1 thread, 1 CPU", skipprd(1), "tree"),
            ("skipprd, 2 threads", skipprd(2), "tree"),
            ("skipprd, 2 thr, jsonl, no val.", skipprd(2, False), "tree"),
        ]
        print("%-28s %8s %10s %9s  %s" % ("", "GB/s", "CPU-s/GB", "RSS MB",
                                          "byte-equal"))
        results = {}
        for name, cmd, output in rows:
            walls, cpus, rsss = [], [], []
            equal = "n/a"
            for r in range(args.runs):
                out = os.path.join(work, "out-%d" % r)
                wall, cpu, rss, _ = measure(cmd(out))
                walls.append(wall)
                cpus.append(cpu)
                rsss.append(rss)
                if output and r == 0:
                    got = line_digest([out] if output == "file"
                                      else files(out))
                    equal = "yes" if got == want else (
                        "no (%d of %d lines match the count)" %
                        (got[0], want[0]) if got[0] != want[0] else "no")
                for p in (out, out + ".state"):
                    if os.path.isdir(p):
                        shutil.rmtree(p)
                    elif os.path.exists(p):
                        os.unlink(p)
            wall = statistics.median(walls)
            cpu = statistics.median(cpus)
            results[name] = size / 1e9 / wall
            print("%-28s %8.3f %10.1f %9.0f  %s" % (
                name, size / 1e9 / wall, cpu / (size / 1e9),
                statistics.median(rsss), equal), flush=True)
        for label in ("skipprd, 2 threads", "skipprd, 2 thr, jsonl, no val."):
            s2 = results[label]
            print("\n%s vs cp -r: %.2fx; vs DuckDB: %.1fx; vs naive "
                  "Python: %.1fx; vs 1 thread on 1 CPU: %.2fx" % (
                      label, s2 / results["cp -r + sync"],
                      s2 / results["DuckDB COPY PARTITION_BY"],
                      s2 / results["naive Python"],
                      s2 / results["skipprd, 1 thread, 1 CPU"]))
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
