#!/usr/bin/env python3
"""Conversions on purpose: json -> csv and csv -> jsonl, file -> file.

Shows, for json -> csv on a generated Firehose-like archive (nested
detail, every framing, gzip): every record becomes exactly one row under
the folder its fields dictate; each object's header is the union of its
rows' top-level keys in first-seen order; a string cell is the decoded
string, a number keeps its lexeme, true/false stay, null and missing are
empty; a nested value's cell is compact JSON that parses to the source's
value. Python's csv module and DuckDB read every object back to the same
cells. For csv -> jsonl on a generated CSV archive (two headers): every
row becomes one JSON object of string values in header order, in the
right folder. A CSV row that is not UTF-8 is dead-lettered, and json ->
csv with validate: false is refused.
"""
import collections
import csv
import io
import json
import os
import subprocess

from skippr_test import (Workspace, check, dead_letters, expected_key, main,
                         SOURCE_PREFIX, frame, SOURCE_DIR)
from test_csv_files import generate

DUCKDB_READ = os.path.join(SOURCE_DIR, "bench", "duckdb", "read_csv.mjs")


def objects(root, ext):
    for dirpath, _, files in os.walk(root):
        rel = os.path.relpath(dirpath, root)
        if rel.split(os.sep)[0] in ("_errors", "_skippr"):
            continue
        for fn in files:
            check(fn.startswith("apply-") and fn.endswith(ext),
                  "bad object name %s/%s" % (rel, fn))
            yield rel, os.path.join(dirpath, fn)


def compact_outside_strings(s):
    in_str = esc = False
    for ch in s:
        if in_str:
            if esc:
                esc = False
            elif ch == "\\":
                esc = True
            elif ch == '"':
                in_str = False
        elif ch == '"':
            in_str = True
        elif ch in " \t\r\n":
            return False
    return True


def expected_cell(v):
    """The cell text for a lexeme-preserving parsed value (numbers are
    str already), or None for a nested value (checked separately)."""
    if v is None:
        return ""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, str):
        return v
    return None


def test_json_to_csv():
    ws = Workspace("json2csv")
    try:
        ws.generate(objects=10, records=300, seed=31)
        ws.write_config(sink_format="csv")
        p = ws.sync("--once")
        # The sources, by id: parsed plainly (for the key) and with every
        # number kept as its lexeme (for the cells).
        plain, lex = {}, {}
        for dirpath, _, files in os.walk(os.path.join(ws.inp, SOURCE_PREFIX)):
            for fn in files:
                with open(os.path.join(dirpath, fn), "rb") as f:
                    for raw, obj in frame(f.read()):
                        plain[obj["id"]] = obj
                        lex[obj["id"]] = json.loads(raw, parse_float=str,
                                                    parse_int=str)
        seen = collections.Counter()
        paths = []
        for rel, path in objects(ws.sink_root, ".csv"):
            paths.append(path)
            with open(path, newline="") as f:
                rows = list(csv.reader(f))
            header, body = rows[0], rows[1:]
            check(body, "%s has no rows" % path)
            first_seen = []
            for row in body:
                check(len(row) == len(header), "%s: ragged row" % path)
                cells = dict(zip(header, row))
                rid = int(cells["id"])
                seen[rid] += 1
                src, srcl = plain[rid], lex[rid]
                check(expected_key(src) == rel, "id %d in %s" % (rid, rel))
                for k in srcl:
                    if k not in first_seen:
                        first_seen.append(k)
                for k in header:
                    v = srcl.get(k)
                    want = expected_cell(v)
                    if want is None:
                        check(json.loads(cells[k]) == src[k],
                              "id %d %s: %r" % (rid, k, cells[k]))
                        check(compact_outside_strings(cells[k]),
                              "id %d %s not compact: %r" % (rid, k, cells[k]))
                    else:
                        check(cells[k] == want, "id %d %s: %r, expected %r" %
                              (rid, k, cells[k], want))
            check(header == first_seen,
                  "%s: header %r, first-seen keys %r" % (path, header,
                                                        first_seen))
        check(set(seen) == set(plain) and max(seen.values()) == 1,
              "%d of %d records written, some twice: %s" % (
                  len(seen), len(plain), max(seen.values())))
        check("%d records" % len(plain) in p.err, p.err)
        # DuckDB reads the same cells (an empty cell is NULL there).
        out = subprocess.run(["node", DUCKDB_READ] + paths, check=True,
                             capture_output=True, text=True).stdout
        duck = json.loads(out)
        for path in paths:
            with open(path, newline="") as f:
                rows = list(csv.DictReader(f))
            got = [{k: ("" if v is None else v) for k, v in r.items()}
                   for r in duck[path]]
            check(got == rows, "DuckDB reads %s differently" % path)
        print("  %d records in %d objects, cells checked by csv and DuckDB" %
              (len(plain), len(paths)))
    finally:
        ws.cleanup()


def test_csv_to_jsonl():
    ws = Workspace("csv2jsonl")
    try:
        want = generate(ws.inp, objects=8, rows=300, seed=41)
        ws.write_config()  # the sink's format stays jsonl
        p = ws.sync("--once")
        expect = {}
        for (key, head, raw), n in want.items():
            names = next(csv.reader(io.StringIO(head.decode())))
            cells = next(csv.reader(io.StringIO(raw.decode(), newline="")))
            row = dict(zip(names, cells))
            expect[row["id"]] = (key, names, row)
        seen = 0
        for rel, path in objects(ws.sink_root, ".jsonl"):
            with open(path, encoding="utf-8") as f:
                for line in f:
                    obj = json.loads(line)
                    key, names, row = expect.pop(obj["id"])
                    check(rel == key, "id %s in %s, expected %s" % (
                        obj["id"], rel, key))
                    check(list(obj) == names and obj == row,
                          "id %s: %r, expected %r" % (obj["id"], obj, row))
                    seen += 1
        check(not expect, "%d rows not written" % len(expect))
        check("%d records" % seen in p.err, p.err)
        print("  %d rows as JSON objects, keys in header order" % seen)
    finally:
        ws.cleanup()


def test_refusals_and_bad_utf8():
    ws = Workspace("conv-bad")
    try:
        folder = os.path.join(ws.inp, SOURCE_PREFIX, "2021/10/03")
        os.makedirs(folder)
        bad = b"login,acme,caf\xe9"
        with open(os.path.join(folder, "x.csv"), "wb") as f:
            f.write(b"event_type,detail.tenant_id,note\nlogin,acme,ok\n" +
                    bad + b"\n")
        ws.write_config()
        p = ws.sync("--once")
        check("1 records" in p.err and "1 dead-lettered" in p.err, p.err)
        dl = dead_letters(ws.sink_root)
        check([b for _, b in dl] == [bad] and
              "UTF-8" in dl[0][0]["reason"], "dead letters %r" % dl)
        # Found by fuzz_convert: a header that is not UTF-8 cannot give
        # JSON names, so every row under it is dead-lettered.
        with open(os.path.join(folder, "y.csv"), "wb") as f:
            f.write(b"event_type,n\xe0\nlogin,1\nlogout,2\n")
        p = ws.sync("--once")
        check("0 records" in p.err and "2 dead-lettered" in p.err, p.err)
        dl = dead_letters(ws.sink_root)
        check(sum("header row is not valid UTF-8" in m["reason"]
                  for m, _ in dl) == 2, "dead letters %r" % dl)
        ws.write_config(sink_format="csv",
                        pipeline_extra={"validate": "false"},
                        source_extra={"format": "json"})
        from skippr_test import run
        p = run(["validate", "--config", ws.config], check_rc=False)
        check(p.returncode != 0 and "validate: true" in p.err, p.err)
    finally:
        ws.cleanup()


if __name__ == "__main__":
    main([test_json_to_csv, test_csv_to_jsonl, test_refusals_and_bad_utf8])
