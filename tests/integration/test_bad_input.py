#!/usr/bin/env python3
"""Bad input goes to the dead-letter area byte for byte, with a reason, and
good records in the same object are unaffected: count in = count out +
count dead-lettered.

Cases: truncated JSON, garbage bytes, invalid UTF-8 inside a string, a
single 50 MiB record (over max_record_bytes), a record cut off at the end of
an object, and a truncated gzip stream. Then every file of JSONTestSuite's
test_parsing, each its own object: every byte ends up in a copied record, a
dead letter, or is whitespace or array punctuation. And hostile objects: a
100 MiB record, 100,000 levels of nesting, 1 MiB of binary garbage, NUL
bytes, a truncated zstd stream, and a gzip bomb, which stops the run with
an error naming it (max_inflate_ratio) instead of filling the disk.
"""
import concurrent.futures
import gzip
import json
import os
import random
import shutil
import subprocess

from skippr_test import (SKIPPRD, Workspace, assert_exact, check,
                         dead_letters, frame, main, output_records,
                         shared_path)

FOLDER = "ill-just-dump-this-here/2021/10/03"


def copy_one(ws, name, data):
    """A fresh copy of one object; returns (exit, stderr, output records
    [(partition, bytes)], dead letters [(meta, bytes)])."""
    for d in (ws.inp, ws.out, ws.state):
        shutil.rmtree(d, ignore_errors=True)
    os.makedirs(os.path.join(ws.inp, FOLDER))
    with open(os.path.join(ws.inp, FOLDER, name), "wb") as f:
        f.write(data)
    p = subprocess.run([SKIPPRD, "sync", "--pipeline",
                        "gdpr_compliant_migration", "--config", ws.config,
                        "--once"], capture_output=True, timeout=900)
    out = []
    if os.path.isdir(ws.sink_root):
        out = [k for k, n in output_records(ws.sink_root).items()
               for _ in range(n)]
    dl = dead_letters(ws.sink_root) if os.path.isdir(ws.sink_root) else []
    return p.returncode, p.stderr.decode("utf-8", "replace"), out, dl


def residue(data, out, dl):
    """What of data is in no copied record and no dead letter; checks that
    each dead letter is the bytes at its offset."""
    used = bytearray(len(data))
    for meta, b in dl:
        o = meta["offset"]
        check(data[o:o + meta["length"]] == b,
              "dead letter at %d is not the input's bytes" % o)
        used[o:o + len(b)] = b"\x01" * len(b)
    for _, rec in sorted(out, key=lambda r: -len(r[1])):
        at = data.find(rec)
        while at >= 0 and any(used[at:at + len(rec)]):
            at = data.find(rec, at + 1)
        check(at >= 0, "copied record %r is not in the input" % rec[:80])
        used[at:at + len(rec)] = b"\x01" * len(rec)
    start = 3 if data.startswith(b"\xef\xbb\xbf") else 0
    return bytes(c for i, c in enumerate(data[start:], start)
                 if not used[i])

GOOD = [b'{"event_type":"ok","timestamp":"2021-10-03","detail":{"tenant_id":'
        b'"acme"},"i":%d}' % i for i in range(40)]


def test_dead_letters_byte_for_byte():
    ws = Workspace("bad")
    try:
        folder = os.path.join(ws.inp, "ill-just-dump-this-here/2021/10/03")
        os.makedirs(folder)
        big = b'{"event_type":"big","pad":"' + b"x" * (50 << 20) + b'"}'
        bad = [
            (b'{"event_type":"trunc","a":', "expected"),
            (b'\x00\xff\xfe garbage \x01', "unexpected byte"),
            (b'{"event_type":"utf8","v":"caf\xc3\x28"}', "invalid UTF-8"),
            (big, "max_record_bytes"),
            (b'{"event_type":"ctl","v":"a\x01b"}', "control character"),
        ]
        parts = []
        for i, (b, _) in enumerate(bad):
            parts += GOOD[i * 8:(i + 1) * 8] + [b]
        body = b"\n".join(parts) + b'\n{"event_type":"cut","v":'
        unit = os.path.join(folder, "mixed-object")
        with open(unit, "wb") as f:
            f.write(body)
        # A gzip stream cut short: complete records before the cut survive.
        gz_plain = b"\n".join(GOOD) + b"\n"
        gz = gzip.compress(gz_plain)
        with open(os.path.join(folder, "cut-gzip"), "wb") as f:
            f.write(gz[: len(gz) * 2 // 3])
        ws.write_config()
        p = ws.sync("--once")

        dls = dead_letters(ws.sink_root)
        by_unit = {}
        for meta, data in dls:
            by_unit.setdefault(meta["unit"], []).append((meta, data))
        mixed = by_unit.get("ill-just-dump-this-here/2021/10/03/mixed-object", [])
        check(len(mixed) == len(bad) + 1, "expected %d dead letters, got %d" %
              (len(bad) + 1, len(mixed)))
        for (meta, data), (want, why) in zip(mixed, bad + [(b'{"event_type":"cut","v":', "truncated")]):
            check(data == want, "dead letter bytes differ at offset %d" %
                  meta["offset"])
            check(body[meta["offset"]:meta["offset"] + meta["length"]] == want,
                  "offset/length do not point at the bad bytes")
            check(why in meta["reason"], "reason %r lacks %r" % (meta["reason"], why))

        cut = by_unit.get("ill-just-dump-this-here/2021/10/03/cut-gzip", [])
        check(len(cut) == 1 and "truncated gzip" in cut[0][0]["reason"],
              "truncated gzip not reported: %s" % [m for m, _ in cut])
        m, data = cut[0]
        check(gz_plain[m["offset"]:m["offset"] + m["length"]] == data,
              "gzip dead letter is not the decompressed tail")

        # Good records: exactly once and byte-equal, in place.
        copied_gz = gz_plain[: cut[0][0]["offset"]]
        skip = {unit, os.path.join(folder, "cut-gzip")}
        good_in = GOOD + [r for r, _ in frame(copied_gz)]
        with open(os.path.join(ws.root, "good-only"), "wb") as f:
            f.write(b"\n".join(good_in))
        n_out = 0
        for dirpath, _, files in os.walk(ws.sink_root):
            if "_errors" in dirpath or "_skippr" in dirpath:
                continue
            for fn in files:
                with open(os.path.join(dirpath, fn), "rb") as f:
                    recs = [r for r, _ in frame(f.read())]
                check(all(r in good_in for r in recs), "a bad record was copied")
                n_out += len(recs)
        check(n_out == len(good_in), "good records: %d in, %d out" %
              (len(good_in), n_out))
        n_in = len(GOOD) + len(bad) + 1 + len(frame(copied_gz)) + 1
        check(n_in == n_out + len(dls), "in %d != out %d + dead %d" %
              (n_in, n_out, len(dls)))
        check("%d dead-lettered" % len(dls) in p.err, p.err)
        del skip
        print("  %d records in, %d out, %d dead-lettered (incl. a %d MiB "
              "record)" % (n_in, n_out, len(dls), len(big) >> 20))
    finally:
        ws.cleanup()


def test_empty_and_whitespace_objects():
    ws = Workspace("empty")
    try:
        folder = os.path.join(ws.inp, "ill-just-dump-this-here/2021/10/03")
        os.makedirs(folder)
        for name, data in [("empty", b""), ("spaces", b" \n\r\n\t "),
                           ("bom", b"\xef\xbb\xbf"),
                           ("empty-gz", gzip.compress(b""))]:
            with open(os.path.join(folder, name), "wb") as f:
                f.write(data)
        ws.write_config()
        p = ws.sync("--once")
        check("4 units copied" in p.err and "0 records, 0 dead" in p.err, p.err)
        assert_exact(ws)
    finally:
        ws.cleanup()


def test_json_test_suite_in_equals_out_plus_dead():
    suite = shared_path("testdata", "JSONTestSuite", "test_parsing",
                        env="SKIPPR_TESTDATA")
    names = sorted(os.listdir(suite))
    stats = {"y": [0, 0], "n": [0, 0], "i": [0, 0]}
    accepted_n = []

    def one(name):
        ws = Workspace("jts")
        try:
            ws.write_config()
            with open(os.path.join(suite, name), "rb") as f:
                data = f.read()
            rc, err, out, dl = copy_one(ws, "case.json", data)
            check(rc == 0, "%s: exit %d: %s" % (name, rc, err[-500:]))
            rest = residue(data, out, dl)
            check(all(c in b" \t\r\n[],:" for c in rest) or not rest,
                  "%s: bytes in no record and no dead letter: %r" % (
                      name, rest[:80]))
            if name.startswith("y_"):
                check(not dl, "%s: valid JSON dead-lettered: %r" % (
                    name, [m["reason"] for m, _ in dl]))
                for _, rec in out:
                    json.loads(rec)
            return name, len(out), len(dl)
        finally:
            ws.cleanup()
    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        for name, n_out, n_dl in pool.map(one, names):
            k = name[0]
            stats[k][0] += 1
            stats[k][1] += n_dl > 0
            if k == "n" and n_dl == 0:
                accepted_n.append(name)
    print("  %d cases: y %d (0 dead-lettered), n %d (%d with dead letters), "
          "i %d (%d with dead letters); every byte accounted for" % (
              len(names), stats["y"][0], stats["n"][0], stats["n"][1],
              stats["i"][0], stats["i"][1]))
    if accepted_n:
        # A stream of values (Firehose concatenation) makes a few of them
        # valid input here: e.g. "[1]]" is a record and a stray bracket.
        print("  n_ cases copied without a dead letter: %s" %
              ", ".join(accepted_n))


def test_hostile_objects():
    ws = Workspace("hostile")
    try:
        ws.write_config()
        rng = random.Random(99)
        good = b'{"event_type":"ok","timestamp":"2021-10-03","i":1}\n'
        cases = [
            ("big-100MiB", good + b'{"event_type":"big","pad":"' +
             b"x" * (100 << 20) + b'"}\n' + good, "max_record_bytes"),
            ("nested-100k", good + b"[" * 100000 + b"]" * 100000 + b"\n" +
             good, "nest"),
            ("garbage-1MiB", good + bytes(rng.randrange(256)
                                          for _ in range(1 << 20)) + b"\n" +
             good, None),
            ("nul-bytes", good + b"\x00" * 4096 + b"\n" + good, None),
        ]
        for name, data, why in cases:
            rc, err, out, dl = copy_one(ws, name, data)
            check(rc == 0, "%s: exit %d: %s" % (name, rc, err[-500:]))
            rest = residue(data, out, dl)
            check(all(c in b" \t\r\n[]," for c in rest),
                  "%s: %d bytes unaccounted: %r" % (name, len(rest),
                                                   rest[:40]))
            check(len(out) >= 2, "%s: the good records around it were "
                  "not copied (%d)" % (name, len(out)))
            check(dl, "%s: nothing dead-lettered" % name)
            if why:
                check(any(why in m["reason"] for m, _ in dl),
                      "%s: reasons %r" % (name, [m["reason"] for m, _ in dl]))
            print("  %s: %d records copied, %d dead letters (%d bytes)" % (
                name, len(out), len(dl), sum(len(b) for _, b in dl)))
        # A zstd stream cut short: the records before the cut are copied,
        # the cut one is dead-lettered with the reason.
        plain = b"".join(b'{"event_type":"z","timestamp":"2021-10-03",'
                         b'"i":%d}\n' % i for i in range(20000))
        z = subprocess.run(["zstd", "-q", "-c"], input=plain,
                           capture_output=True, check=True).stdout
        rc, err, out, dl = copy_one(ws, "cut.zst", z[:len(z) // 2])
        check(rc == 0, "cut zstd: %s" % err[-500:])
        check(len(dl) == 1 and "zstd" in dl[0][0]["reason"] and
              plain[dl[0][0]["offset"]:].startswith(dl[0][1]),
              "cut zstd: %r" % [m for m, _ in dl])
        check(all(r in plain for _, r in out) and out, "cut zstd: records")
        print("  truncated zstd: %d records before the cut copied, the cut "
              "one dead-lettered (%s)" % (len(out), dl[0][0]["reason"]))
        # A gzip bomb: 1 GiB of blank lines in ~1 MiB stops the run,
        # named. (Blank lines, not zeros: the cap is what is tested, and
        # 64 MiB of NULs dead-lettered window by window takes a quarter of
        # an hour under ASan's quarantine; NUL bytes have their own case.)
        bomb = subprocess.run(
            "head -c 1073741824 /dev/zero | tr '\\0' '\\n' | gzip -9",
            shell=True, capture_output=True, check=True).stdout
        rc, err, out, dl = copy_one(ws, "bomb.gz", bomb)
        check(rc != 0 and "bomb.gz" in err and "decompression bomb" in err,
              "gzip bomb: exit %d: %s" % (rc, err[-1000:]))
        check(sum(len(b) for _, b in dl) < (64 << 20),
              "the bomb filled the dead letters")
        print("  gzip bomb (%d KiB -> 1 GiB): the run stopped with: %s" % (
            len(bomb) >> 10, [ln for ln in err.splitlines()
                              if "bomb" in ln][0][:160]))
    finally:
        ws.cleanup()


if __name__ == "__main__":
    main([test_dead_letters_byte_for_byte, test_empty_and_whitespace_objects,
          test_json_test_suite_in_equals_out_plus_dead,
          test_hostile_objects])
