#!/usr/bin/env python3
"""Bad input goes to the dead-letter area byte for byte, with a reason, and
good records in the same object are unaffected: count in = count out +
count dead-lettered.

Cases: truncated JSON, garbage bytes, invalid UTF-8 inside a string, a
single 50 MiB record (over max_record_bytes), a record cut off at the end of
an object, and a truncated gzip stream.
"""
import gzip
import os

from skippr_test import (Workspace, assert_exact, check, dead_letters, frame,
                         main)

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
            if "_errors" in dirpath:
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


if __name__ == "__main__":
    main([test_dead_letters_byte_for_byte, test_empty_and_whitespace_objects])
