#!/usr/bin/env python3
"""Generate a deterministic Firehose-like archive of JSON events.

Objects sit under date-only prefixes (YYYY/MM/DD/HH/), carry no extension,
mix event types, and use every framing skippr accepts: newline-delimited,
concatenated with no separator (as Firehose writes), pretty-printed, CRLF,
and a top-level array. Some objects are gzipped, a few zstd-compressed
(python3-zstandard, else the zstd command). Tenants sit in
detail.tenant_id or, for trucks, in truck.tenant_id; timestamps come as
RFC 3339 with and without offsets, epoch seconds, epoch milliseconds and
strings of digits.

usage: gen_firehose.py OUT_DIR [--objects N] [--records N] [--seed S]
                       [--prefix P] [--time-fields a,b,c]
"""
import argparse
import gzip
import json
import os
import random
import subprocess

try:
    import zstandard  # python3-zstandard, which scripts/setup.sh installs
except ImportError:  # another python3 first in PATH: the zstd command
    zstandard = None

EVENT_TYPES = ["login", "logout", "purchase", "page_view", "truck_ping",
               "error", "signup"]
TENANTS = ["acme", "globex", "initech", "umbrella", "hooli", "stark",
           "wayne", "tyrell"]


def make_record(rng, i, day, time_fields=("timestamp",)):
    et = rng.choice(EVENT_TYPES)
    sec = day + rng.randrange(86400)
    style = rng.randrange(6)
    if style == 0:
        ts = "%04d-%02d-%02dT%02d:%02d:%02dZ" % ts_parts(sec)
    elif style == 1:
        off = rng.choice([-5, -2, 1, 2, 9])
        local = ts_parts(sec + off * 3600)
        ts = "%04d-%02d-%02dT%02d:%02d:%02d" % local + "%+03d:00" % off
    elif style == 2:
        ts = sec
    elif style == 3:
        ts = sec * 1000 + rng.randrange(1000)
    elif style == 4:
        ts = str(sec)
    else:
        ts = "%04d-%02d-%02d %02d:%02d:%02d.%03d" % (ts_parts(sec) +
                                                   (rng.randrange(1000),))
    tf = time_fields[0] if len(time_fields) == 1 else rng.choice(time_fields)
    rec = {"event_type": et, "id": i, tf: ts}
    tenant = rng.choice(TENANTS)
    if et == "truck_ping":
        rec["truck"] = {"tenant_id": tenant, "lat": rng.uniform(-90, 90),
                        "speed": rng.randrange(130)}
    else:
        rec["detail"] = {"tenant_id": tenant, "user": "u%05d" % rng.randrange(99999),
                         "tags": ["a", "b"][: rng.randrange(3)],
                         "amount": round(rng.uniform(0, 500), 2)}
    if rng.randrange(10) == 0:
        rec["note"] = "caf\u00e9 \u2603 \"quoted\" \\ slash/ tab\t"
    return rec


def ts_parts(sec):
    import time
    t = time.gmtime(sec)
    return (t.tm_year, t.tm_mon, t.tm_mday, t.tm_hour, t.tm_min, t.tm_sec)


def encode(rng, recs, framing):
    compact = [json.dumps(r, separators=(",", ":"), ensure_ascii=rng.random() < 0.5)
               for r in recs]
    if framing == "lines":
        return ("\n".join(compact) + "\n").encode()
    if framing == "concat":
        return "".join(compact).encode()
    if framing == "crlf":
        return ("\r\n".join(compact) + "\r\n").encode()
    if framing == "pretty":
        return ("\n".join(json.dumps(r, indent=2) for r in recs) + "\n").encode()
    if framing == "array":
        return ("[\n" + ",\n".join(compact) + "\n]\n").encode()
    raise ValueError(framing)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--objects", type=int, default=40)
    ap.add_argument("--records", type=int, default=250, help="per object")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--prefix", default="ill-just-dump-this-here")
    ap.add_argument("--first-id", type=int, default=0)
    ap.add_argument("--framing", choices=["mixed", "lines", "concat", "crlf",
                                          "pretty", "array"], default="mixed")
    ap.add_argument("--plain", action="store_true",
                    help="never compress")
    ap.add_argument("--time-fields", default="timestamp",
                    help="comma-separated names; each record carries its "
                         "time under one of them, at random")
    a = ap.parse_args()
    time_fields = tuple(f.strip() for f in a.time_fields.split(","))
    rng = random.Random(a.seed)
    # One frame per object with its content size and checksum, as the zstd
    # command writes (in-process: a command per object cost seconds).
    if zstandard:
        zstd = zstandard.ZstdCompressor(write_checksum=True).compress
    else:
        def zstd(data):
            return subprocess.run(["zstd", "-q", "-c"], input=data,
                                  stdout=subprocess.PIPE, check=True).stdout
    base_day = 1633219200  # 2021-10-03
    rid = a.first_id
    total = 0
    for o in range(a.objects):
        day = base_day + 86400 * rng.randrange(5)
        hour = rng.randrange(24)
        t = ts_parts(day + hour * 3600)
        folder = os.path.join(a.out, a.prefix, "%04d/%02d/%02d/%02d" % t[:4])
        os.makedirs(folder, exist_ok=True)
        n = max(1, a.records + rng.randrange(-a.records // 4 - 1, a.records // 4 + 1))
        recs = []
        for _ in range(n):
            recs.append(make_record(rng, rid, day, time_fields))
            rid += 1
        framing = rng.choice(["lines", "lines", "concat", "concat", "crlf",
                              "pretty", "array"])
        if a.framing != "mixed":
            framing = a.framing
        data = encode(rng, recs, framing)
        name = "events-stream-1-%04d-%02d-%02d-%02d-00-00-%08x" % (t[:4] + (rng.getrandbits(32),))
        path = os.path.join(folder, name)
        kind = 10 if a.plain else rng.randrange(10)
        if kind < 3:
            data = gzip.compress(data)
        elif kind == 3:
            data = zstd(data)
        with open(path, "wb") as f:
            f.write(data)
        total += n
    print("%d records in %d objects under %s" % (total, a.objects,
                                                 os.path.join(a.out, a.prefix)))


if __name__ == "__main__":
    main()
