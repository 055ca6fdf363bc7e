#!/usr/bin/env python3
"""Every .jsonl object skippr writes is JSON Lines, read back by DuckDB.

The demo's archive and config (scripts/demo.sh) mix every framing,
pretty-printed records included. With
multiline_records at its default (json), records that span lines go,
unchanged, to a .json object beside the partition's .jsonl one: DuckDB
reads each namespace's .jsonl objects with format='newline_delimited' and
its .json objects as concatenated JSON ('unstructured'), with
hive_partitioning, and the counts per tenant and day equal the input's.
With compact, those records lose their whitespace between tokens and join
the .jsonl objects; with dead_letter, they are dead-lettered. A
pretty-printed .jsonl file, as skippr wrote before, is refused by the same
reader: the check can fail.
"""
import collections
import json
import os
import subprocess

from skippr_test import (SKIPPRD, SOURCE_DIR, Workspace, assert_exact, check,
                         dead_letters, expected_key, expected_records, frame,
                         main)

READER = os.path.join(SOURCE_DIR, "bench", "duckdb", "count_json.mjs")


def duckdb_counts(folder, fmt, ext):
    """{partition path: records} of one namespace folder, read by DuckDB;
    and how many files it read."""
    p = subprocess.run(["node", READER, folder, fmt, ext],
                       capture_output=True, text=True, timeout=300)
    if p.returncode != 0:
        errs = [ln for ln in p.stderr.splitlines() if "Error" in ln]
        return None, errs or ["failed"]
    out = json.loads(p.stdout)
    counts = collections.Counter()
    for row in out["rows"]:
        n = int(row.pop("n"))
        counts[frozenset(row.items())] += n
    return counts, out["files"]


def partition(key):
    """The oracle's folder "ns/a=1/b=2" -> (ns, frozenset of pairs)."""
    ns, *segs = key.split("/")
    return ns, frozenset(tuple(s.split("=", 1)) for s in segs)


def read_back(ws):
    """(ns, partition) -> records, from DuckDB reading every namespace's
    .jsonl objects as JSON Lines and .json ones as concatenated JSON; and
    the numbers of files read."""
    got = collections.Counter()
    files = {"jsonl": 0, "json": 0}
    for ns in sorted(os.listdir(ws.sink_root)):
        if ns in ("_errors", "_skippr"):
            continue
        folder = os.path.join(ws.sink_root, ns)
        for fmt, ext in (("newline_delimited", "jsonl"),
                         ("unstructured", "json")):
            have = any(fn.endswith("." + ext) for _, _, fs in os.walk(folder)
                       for fn in fs)
            if not have:
                continue
            counts, n = duckdb_counts(folder, fmt, ext)
            check(counts is not None, "DuckDB cannot read %s/*.%s as %s: %s"
                  % (ns, ext, fmt, n))
            files[ext] += n
            for part, k in counts.items():
                got[(ns, part)] += k
    return got, files


def want_counts(ws, keep=lambda raw: True):
    want = collections.Counter()
    for (key, raw), k in expected_records(ws.inp).items():
        if keep(raw):
            want[partition(key)] += k
    return want


def spans_lines(raw):
    return b"\n" in raw


def compact(raw):
    """Whitespace between JSON tokens removed (an oracle of its own)."""
    out, in_str, esc = bytearray(), False, False
    for c in raw:
        if in_str:
            if esc:
                esc = False
            elif c == 0x5C:
                esc = True
            elif c == 0x22:
                in_str = False
        elif c in b" \t\r\n":
            continue
        elif c == 0x22:
            in_str = True
        out.append(c)
    return bytes(out)


def run(ws, mode=None):
    ws.generate(objects=40, records=150, seed=23)
    ws.write_config(pipeline_extra={"multiline_records": mode} if mode else None)
    return ws.sync("--once")


def test_default_json_lines_and_json_siblings():
    """The demo itself: scripts/demo.sh's archive (200 objects of about 500
    records) and its config, examples/gdpr-files/skippr.yml."""
    ws = Workspace("jsonl-default")
    try:
        ws.generate(objects=200, records=500, seed=1)
        env = dict(os.environ, SKIPPR_DEMO_DIR=ws.root)
        p = subprocess.run([SKIPPRD, "sync", "--pipeline",
                            "gdpr_compliant_migration", "--once", "-c",
                            os.path.join(SOURCE_DIR, "examples", "gdpr-files",
                                         "skippr.yml")],
                           env=env, capture_output=True, text=True,
                           timeout=600)
        check(p.returncode == 0, p.stderr[-2000:])
        p.err = p.stderr
        multi = sum(k for (_, raw), k in expected_records(ws.inp).items()
                    if spans_lines(raw))
        check(multi > 100, "the archive has only %d multi-line records" %
              multi)
        check("records spanning lines: %d in .json objects" % multi in p.err,
              "summary: %s" % p.err[-600:])
        assert_exact(ws)  # byte for byte; .jsonl records one per line
        got, files = read_back(ws)
        want = want_counts(ws)
        check(got == want, "DuckDB's counts per partition differ: %d "
              "partitions expected, %d read; first differences %s" % (
                  len(want), len(got), list((want - got).items())[:3]))
        print("  %d records (%d spanning lines) in %d .jsonl and %d .json "
              "objects; DuckDB's counts per tenant and day equal the "
              "input's over %d partitions" % (sum(want.values()), multi,
                                                files["jsonl"], files["json"],
                                                len(want)))
    finally:
        ws.cleanup()


def test_compact():
    ws = Workspace("jsonl-compact")
    try:
        p = run(ws, "compact")
        check("0 in .json objects" in p.err and " compacted" in p.err, p.err)
        want = collections.Counter()
        for (key, raw), k in expected_records(ws.inp).items():
            want[(key, compact(raw) if spans_lines(raw) else raw)] += k
        from skippr_test import output_records
        got = output_records(ws.sink_root)
        check(got == want, "compacted output differs: %d lost, %d extra" % (
            sum((want - got).values()), sum((got - want).values())))
        counts, files = read_back(ws)
        check(files["json"] == 0 and counts == want_counts(ws),
              "compact: files %s" % files)
        print("  every record in %d .jsonl objects; multi-line ones "
              "compacted exactly as the oracle does" % files["jsonl"])
    finally:
        ws.cleanup()


def test_dead_letter():
    ws = Workspace("jsonl-dead")
    try:
        run(ws, "dead_letter")
        dead = dead_letters(ws.sink_root)
        multi = [raw for (_, raw), k in expected_records(ws.inp).items()
                 for _ in range(k) if spans_lines(raw)]
        check(len(dead) == len(multi) and all(
            "spans lines" in d[0]["reason"] for d in dead),
            "%d dead letters for %d multi-line records" % (len(dead),
                                                           len(multi)))
        counts, files = read_back(ws)
        check(files["json"] == 0 and
              counts == want_counts(ws, lambda r: not spans_lines(r)),
              "dead_letter: counts differ")
        print("  %d multi-line records dead-lettered; the rest in %d .jsonl "
              "objects" % (len(dead), files["jsonl"]))
    finally:
        ws.cleanup()


def test_reader_refuses_multiline_jsonl():
    """The negative control: what skippr wrote before this fix."""
    ws = Workspace("jsonl-control")
    try:
        folder = os.path.join(ws.root, "ns", "p_day=01")
        os.makedirs(folder)
        with open(os.path.join(folder, "a.jsonl"), "w") as f:
            f.write('{\n  "a": 1\n}\n{"a": 2}\n')
        counts, why = duckdb_counts(os.path.join(ws.root, "ns"),
                                    "newline_delimited", "jsonl")
        check(counts is None, "DuckDB read a pretty-printed .jsonl: %s" %
              counts)
        print("  DuckDB refuses a pretty-printed .jsonl: %s" % why[0][:100])
    finally:
        ws.cleanup()


if __name__ == "__main__":
    main([test_reader_refuses_multiline_jsonl,
          test_default_json_lines_and_json_siblings, test_compact,
          test_dead_letter])
