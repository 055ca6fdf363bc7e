#!/usr/bin/env python3
"""skipprd verify next to the copy it checks: wall time and peak RSS of
`sync --once` and of `verify` on the same data, file -> file, the seed's
layout. Figures only; asserts nothing.

    bench/verify.py [--mb 1024] [--threads 2] [--runs 3]

A Firehose-like corpus of about --mb MB (plain JSON lines, 3,000 records
an object) is copied once; then verify reads the source and the sink
back --runs times (the median is printed), on a clean copy. Then
`verify --since-state`: the first, one with nothing new, and one after a
tenth more objects are copied, next to the full verify. Last, one
record is deleted from one object and verify runs again: the cost of a
copy that is not clean (both sides read twice: the digests, then the
records of the partitions that differ). Needs about twice --mb of disk.
"""
import argparse
import os
import subprocess
import sys
import tempfile
import shutil

from scale import GEN, ROOT, SKIPPRD, setup, tree_bytes


def timed(args):
    """(wall s, peak RSS MiB, exit code) of skipprd args."""
    with tempfile.NamedTemporaryFile("r") as t:
        p = subprocess.run(["/usr/bin/time", "-f", "%e %M", "-o", t.name,
                            SKIPPRD] + args, stdout=subprocess.DEVNULL,
                           stderr=subprocess.PIPE, text=True)
        if p.returncode not in (0, 6):
            sys.exit("skipprd %s failed:\n%s" % (args[0], p.stderr[-2000:]))
        wall, rss = t.read().split()[-2:]
    return float(wall), int(rss) / 1024, p.returncode


def since(work, inp, objects, common, copy_wall, verify_wall):
    """verify --since-state: the first (everything the copy finished),
    one with nothing new, and one after a tenth more objects are copied;
    next to the full verify's time."""
    first = timed(["verify", "--since-state"] + common)
    again = timed(["verify", "--since-state"] + common)
    for label, (w, r, rc) in (("verify --since-state, first", first),
                              ("verify --since-state, nothing new", again)):
        print("%-34s %7.2f s %15.0f MiB RSS (%s; %.2f x the full verify)"
              % (label, w, r, "clean" if rc == 0 else "NOT CLEAN",
                 w / verify_wall), flush=True)
    more = max(1, objects // 10)
    subprocess.run([sys.executable, GEN, inp, "--objects", str(more),
                    "--records", "3000", "--plain", "--framing", "lines",
                    "--seed", "2", "--first-id", "900000000"], check=True,
                   stdout=subprocess.DEVNULL)
    cwall, _, _ = timed(["sync", "--once"] + common)
    w, r, rc = timed(["verify", "--since-state"] + common)
    fw, _, _ = timed(["verify"] + common)
    print("%-34s %7.2f s %15.0f MiB RSS (%s; %d objects more, copied in "
          "%.2f s; %.2f x the full verify of all, %.2f s)" % (
              "verify --since-state, a tenth new", w, r,
              "clean" if rc == 0 else "NOT CLEAN", more, cwall, w / fw, fw),
          flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mb", type=int, default=1024)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()
    setup()
    work = tempfile.mkdtemp(prefix="skippr-verify-")
    try:
        inp = os.path.join(work, "in")
        objects = max(1, args.mb * 300 // 127)  # 127 MB a 300 objects
        subprocess.run([sys.executable, GEN, inp, "--objects", str(objects),
                        "--records", "3000", "--plain", "--framing",
                        "lines"], check=True, stdout=subprocess.DEVNULL)
        mb = tree_bytes(inp) / 1e6
        cfg = os.path.join(work, "skippr.yml")
        with open(os.path.join(ROOT, "examples", "gdpr-files",
                               "skippr.yml")) as f:
            text = f.read().replace("${SKIPPR_DEMO_DIR}", work)
        with open(cfg, "w") as f:
            f.write(text)
        common = ["-p", "gdpr_compliant_migration", "-q", "-t",
                  str(args.threads), "-c", cfg]
        print("%.0f MB in %d objects, %d threads" % (mb, objects,
                                                      args.threads))
        wall, rss, _ = timed(["sync", "--once"] + common)
        print("%-34s %7.2f s %6.0f MB/s %6.0f MiB RSS" % (
            "sync --once", wall, mb / wall, rss), flush=True)
        runs = sorted(timed(["verify"] + common) for _ in range(args.runs))
        vwall, vrss, rc = runs[len(runs) // 2]
        print("%-34s %7.2f s %6.0f MB/s %6.0f MiB RSS (%s; median of %d; "
              "%.2f x the copy's time)" % (
                  "verify, clean", vwall, mb / vwall, vrss,
                  "clean" if rc == 0 else "NOT CLEAN", len(runs),
                  vwall / wall), flush=True)
        since(work, inp, objects, common, wall, vwall)
        victim = None
        for d, _, fs in sorted(os.walk(os.path.join(work, "out"))):
            fs = sorted(x for x in fs if x.endswith(".jsonl"))
            if fs and "_skippr" not in d:
                victim = os.path.join(d, fs[0])
                break
        with open(victim, "rb") as f:
            lines = f.read().split(b"\n")
        with open(victim, "wb") as f:
            f.write(b"\n".join(lines[1:]))
        dwall, drss, rc = timed(["verify"] + common)
        print("%-34s %7.2f s %6.0f MB/s %6.0f MiB RSS (%s; %.2f x the "
              "copy's time)" % ("verify, one record deleted", dwall,
                                mb / dwall, drss,
                                "clean" if rc == 0 else "NOT CLEAN",
                                dwall / wall), flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
