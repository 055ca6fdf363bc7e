#!/usr/bin/env python3
"""CSV through the seed's pipeline, file -> file.

Shows: a generated CSV archive (mixed event types; the tenant in one of two
columns, detail.tenant_id or truck.tenant_id; five time formats; quoted
cells with delimiters, quotes and line breaks; LF and CRLF; a BOM; gzip; objects
with and without a .csv extension; a schema change half-way) is copied
with every row byte-equal and under the folder its cells dictate; each
output object is a valid CSV document (Python's csv module) that starts
with the header of the rows in it, so rows under different headers never
share an object; bad rows are dead-lettered byte for byte with their
offset while the rest of their object copies; a crash in the middle of a
CSV object resumes with its header; csv_columns and csv_delimiter work.
Conversions are test_convert.py's.
"""
import collections
import csv
import gzip
import io
import os
import random

from skippr_test import (Workspace, check, dead_letters, expected_key,
                         kill_until_resumed, main,
                         SOURCE_PREFIX)

HEADER_A = ["event_type", "id", "timestamp", "detail.tenant_id",
            "truck.tenant_id", "note"]
HEADER_B = ["timestamp", "event_type", "truck.tenant_id", "detail.tenant_id",
            "id", "note", "extra"]
TYPES = ["login", "logout", "purchase", "truck_ping", "error"]
TENANTS = ["acme", "globex", "initech", "umbrella", "hooli"]
NOTES = ["", "plain", "with, comma", 'say "hi"', "two\nlines", "crlf\r\nin",
         "caf\u00e9 \u2603", " padded "]


def cell(v, delim=",", at_random=True):
    """v as one CSV cell: quoted when RFC 4180 needs it (or at random)."""
    if (any(c in v for c in (delim, '"', "\n", "\r")) or
            (at_random and random.random() < 0.1)):
        return '"' + v.replace('"', '""') + '"'
    return v


def timestamp(rng, sec):
    import time
    t = time.gmtime(sec)
    style = rng.randrange(5)
    if style == 0:
        return time.strftime("%Y-%m-%dT%H:%M:%SZ", t)
    if style == 1:
        return str(sec)
    if style == 2:
        return str(sec * 1000 + rng.randrange(1000))
    if style == 3:
        return time.strftime("%Y-%m-%d %H:%M:%S", t) + ".%03d" % rng.randrange(1000)
    lt = time.gmtime(sec + 7200)
    return time.strftime("%Y-%m-%dT%H:%M:%S", lt) + "+02:00"


def make_row(rng, i, header, delim):
    """(row bytes, dict for the routing oracle)."""
    et = rng.choice(TYPES)
    sec = 1633219200 + rng.randrange(4 * 86400)
    tenant = rng.choice(TENANTS) if rng.randrange(20) else ""
    vals = {"event_type": et, "id": str(i), "timestamp": timestamp(rng, sec),
            "detail.tenant_id": tenant if et != "truck_ping" else "",
            "truck.tenant_id": tenant if et == "truck_ping" else "",
            "note": rng.choice(NOTES), "extra": "x%d" % rng.randrange(9)}
    text = delim.join(cell(vals[c], delim) for c in header)
    # The oracle reads dotted names as paths: nest them.
    obj = {"event_type": et, "timestamp": vals["timestamp"]}
    for col in ("detail.tenant_id", "truck.tenant_id"):
        if vals[col]:
            obj.setdefault(col.split(".")[0], {})["tenant_id"] = vals[col]
    return text.encode(), obj


def generate(root, objects, rows, seed, delim=",", header_row=True):
    """Writes the archive; returns Counter((key, header, row bytes))."""
    rng = random.Random(seed)
    random.seed(seed)
    want = collections.Counter()
    rid = 0
    for o in range(objects):
        header = HEADER_A if o < objects // 2 else HEADER_B
        head = delim.join(cell(c, delim, False) for c in header).encode()
        eol = b"\r\n" if o % 3 == 1 else b"\n"
        body = [head] if header_row else []
        for _ in range(rows):
            raw, obj = make_row(rng, rid, header, delim)
            rid += 1
            body.append(raw)
            want[(expected_key(obj), head if header_row else None, raw)] += 1
        data = eol.join(body) + (eol if o % 4 else b"")
        if o % 6 == 3:
            data = b"\xef\xbb\xbf" + data  # a BOM is not the header's
        folder = os.path.join(root, SOURCE_PREFIX, "2021/10/0%d" % (3 + o % 4))
        os.makedirs(folder, exist_ok=True)
        name = "events-%04d" % o + (".csv" if o % 2 else "")
        if o % 5 == 2:
            data = gzip.compress(data)
            name += ".gz"
        with open(os.path.join(folder, name), "wb") as f:
            f.write(data)
    return want


def split_rows(data):
    """Row byte strings of a CSV document (RFC 4180 quoting), terminators
    dropped; an oracle independent of skippr's scanner."""
    rows, start, i, quoted, n = [], 0, 0, False, len(data)
    while i < n:
        c = data[i:i + 1]
        if c == b'"':
            quoted = not quoted
        elif not quoted and c in (b"\n", b"\r"):
            rows.append(data[start:i])
            if c == b"\r" and data[i + 1:i + 2] == b"\n":
                i += 1
            start = i + 1
        i += 1
    if start < n:
        rows.append(data[start:])
    return rows


def output(ws, delim=","):
    """Counter((folder, header, row bytes)) of the sink, each object
    checked to be valid CSV under its own first row."""
    got = collections.Counter()
    root = ws.sink_root
    for dirpath, _, files in os.walk(root):
        rel = os.path.relpath(dirpath, root)
        if rel.split(os.sep)[0] in ("_errors", "_skippr"):
            continue
        for fn in files:
            check(fn.startswith("apply-") and fn.endswith(".csv"),
                  "bad object name %s/%s" % (rel, fn))
            with open(os.path.join(dirpath, fn), "rb") as f:
                data = f.read()
            check(data.endswith(b"\n"), "%s does not end with a newline" % fn)
            parsed = list(csv.reader(io.StringIO(data.decode(), newline=""),
                                     delimiter=delim))
            rows = split_rows(data)
            check(len(parsed) == len(rows) >= 2,
                  "%s: %d rows by csv, %d by bytes" % (fn, len(parsed),
                                                        len(rows)))
            check(all(len(r) == len(parsed[0]) for r in parsed),
                  "%s: a row's cell count differs from its header's" % fn)
            for raw in rows[1:]:
                got[(rel, rows[0], raw)] += 1
    return got


def config(ws, source_extra=None, sink_format="csv", pipeline_extra=None):
    ws.write_config(sink_format=sink_format, source_extra=source_extra,
                    pipeline_extra=pipeline_extra)


def assert_csv_exact(ws, want, delim=","):
    got = output(ws, delim)
    exp = collections.Counter()
    for (key, head, raw), n in want.items():
        exp[(key, head, raw)] += n
    lost, extra = exp - got, got - exp
    for k in list(lost)[:3]:
        print("  lost: %r" % (k,))
    for k in list(extra)[:3]:
        print("  extra: %r" % (k,))
    check(not lost and not extra, "%d rows lost, %d unexpected (of %d)" % (
        sum(lost.values()), sum(extra.values()), sum(exp.values())))
    return sum(exp.values()), len({(k[0], k[1]) for k in got})


def test_csv_archive_byte_equal():
    ws = Workspace("csv")
    try:
        want = generate(ws.inp, objects=12, rows=400, seed=21)
        config(ws)
        p = ws.sync("--once")
        n, groups = assert_csv_exact(ws, want)
        check("%d records" % n in p.err, p.err)
        # Both headers reach the output, in objects of their own.
        heads = {k[1] for k in output(ws)}
        check(len(heads) == 2, "expected two headers, got %d" % len(heads))
        print("  %d rows exact, in %d (partition, header) groups" % (n, groups))
        # Nothing read again.
        p = ws.sync("--once")
        check("0 units copied, 12 already done" in p.err, p.err)
    finally:
        ws.cleanup()


def test_bad_rows_dead_lettered():
    ws = Workspace("csv-bad")
    try:
        folder = os.path.join(ws.inp, SOURCE_PREFIX, "2021/10/03")
        os.makedirs(folder)
        good1 = b"login,acme,2021-10-03T01:00:00Z"
        short = b"login,acme"
        good2 = b'logout,"glo,bex",1633219200'
        unclosed = b'error,"never closed,1633219200'
        data = (b"event_type,detail.tenant_id,timestamp\n" + good1 + b"\n" +
                short + b"\n" + good2 + b"\n" + unclosed + b"\n")
        with open(os.path.join(folder, "x.csv"), "wb") as f:
            f.write(data)
        config(ws)
        p = ws.sync("--once")
        check("2 records" in p.err and "2 dead-lettered" in p.err, p.err)
        dl = dead_letters(ws.sink_root)
        check(sorted(b for _, b in dl) == sorted([short, unclosed]),
              "dead letters: %r" % dl)
        for meta, raw in dl:
            check(meta["offset"] == data.index(b"\n" + raw + b"\n") + 1,
                  "offset %r" % meta)
            check(meta["unit"].endswith("x.csv"), "unit %r" % meta)
        got = output(ws)
        check(sorted(k[2] for k in got) == sorted([good1, good2]),
              "rows %r" % got)
        check(any("p_tenant_id=glo,bex" in k[0] for k in got),
              "a quoted cell was not decoded for the key: %r" % list(got))
    finally:
        ws.cleanup()


def test_crash_mid_object_resumes_with_header():
    """A kill after a commit inside a big CSV object: the next run resumes
    after the durable rows and reads the object's header again. Objects
    of about 9 MB span two 8 MiB windows; a commit follows every window
    (commit_interval_ms: 0: otherwise commits of slices growing in the
    sink wait for 128 KiB of input per open slice, more than a window
    here), and kills come at the Nth source read for growing N until a
    run resumes an object part-way."""
    ws = Workspace("csv-crash")
    try:
        want = generate(ws.inp, objects=2, rows=170000, seed=5)
        config(ws, pipeline_extra={"commit_interval_ms": 0})
        resumed = kill_until_resumed(ws)
        check(resumed > 0, "no run resumed an object part-way")
        n, _ = assert_csv_exact(ws, want)
        print("  %d rows exact after kills mid-object (%d resumed)" %
              (n, resumed))
    finally:
        ws.cleanup()


def test_columns_and_delimiter():
    ws = Workspace("csv-opts")
    try:
        want = generate(ws.inp, objects=4, rows=200, seed=9, delim=";",
                        header_row=False)
        # Without a header row every object is HEADER_A or HEADER_B's
        # columns; name them: take the objects of the first half only.
        for dirpath, _, files in os.walk(ws.inp):
            for fn in files:
                if int(fn.split("-")[1].split(".")[0]) >= 2:
                    os.unlink(os.path.join(dirpath, fn))
        cols = ",".join(HEADER_A)
        config(ws, source_extra={"csv_delimiter": "';'",
                                 "csv_columns": cols, "format": "csv"})
        ws.sync("--once")
        got = output(ws, ";")
        head = ";".join(HEADER_A).encode()
        check(got and all(k[1] == head for k in got),
              "objects do not start with the configured columns")
        n = sum(got.values())
        check(n == 400, "expected 400 rows, got %d" % n)
        exp = collections.Counter()
        for (key, _, raw), c in want.items():
            exp[(key, raw)] += c
        have = collections.Counter()
        for (folder, _, raw), c in got.items():
            have[(folder, raw)] += c
        check(not (have - exp), "rows outside the expected partitions")
    finally:
        ws.cleanup()


if __name__ == "__main__":
    main([test_csv_archive_byte_equal, test_bad_rows_dead_lettered,
          test_crash_mid_object_resumes_with_header,
          test_columns_and_delimiter])
