#!/usr/bin/env python3
"""Generate a date-ordered Firehose archive for backfill tests and the
bench: DAYS days of hourly objects under YYYY/MM/DD/HH/ prefixes, as
Firehose lands them. Each record's timestamp is up to 15 minutes before
its object's hour ends (Firehose buffers up to 900 s), so a day's last
records land in the next day's first objects. Records carry an event type
and a tenant (TENANTS of them, with names that need escaping), so one day
holds EVENT_TYPES x TENANTS partitions.

usage: gen_backfill.py OUT_DIR --days N --day-bytes B [--tenants T]
                       [--seed S] [--start YYYY-MM-DD]
Prints the number of records and partition-days made.
"""
import argparse
import datetime
import json
import os
import random

EVENT_TYPES = ["login", "logout", "purchase", "page_view", "truck_ping",
               "error", "signup"]


def tenant_name(i):
    # adversarial values: spaces, slashes, dots, non-ASCII, '=' and '%'
    odd = ["a/b", "..", "t%20x", "ümlaut", "k=v", " sp ace", "UPPER", "dot."]
    return "tenant-%03d-%s" % (i, odd[i % len(odd)])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--days", type=int, default=20)
    ap.add_argument("--day-bytes", type=int, default=4 << 20)
    ap.add_argument("--tenants", type=int, default=8)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--start", default="2021-03-01")
    ap.add_argument("--prefix", default="ill-just-dump-this-here")
    a = ap.parse_args()
    rng = random.Random(a.seed)
    start = datetime.datetime.strptime(a.start, "%Y-%m-%d").replace(
        tzinfo=datetime.timezone.utc)
    tenants = [tenant_name(i) for i in range(a.tenants)]
    per_hour = a.day_bytes // 24
    records = 0
    pdays = set()
    for h in range(a.days * 24):
        hour = start + datetime.timedelta(hours=h)
        folder = os.path.join(a.out, a.prefix, hour.strftime("%Y/%m/%d/%H"))
        os.makedirs(folder, exist_ok=True)
        lines, size, n = [], 0, 0
        end = int(hour.timestamp()) + 3600
        while size < per_hour:
            t = end - rng.randrange(1, 3600 + 900)
            if h == 0 and t < int(start.timestamp()):
                t = int(start.timestamp())  # nothing before the archive
            et = rng.choice(EVENT_TYPES)
            ten = rng.choice(tenants)
            rec = {"event_type": et, "timestamp": t,
                   "detail": {"tenant_id": ten, "n": records,
                              "pad": "x" * rng.randrange(40, 400)}}
            line = json.dumps(rec, separators=(",", ":"), ensure_ascii=False)
            lines.append(line)
            size += len(line.encode()) + 1
            records += 1
            n += 1
            day = datetime.datetime.fromtimestamp(
                t, datetime.timezone.utc).strftime("%Y-%m-%d")
            pdays.add((et, ten, day))
        name = "events-stream-1-%s-%08x" % (hour.strftime("%Y-%m-%d-%H-00-00"),
                                             rng.randrange(1 << 32))
        with open(os.path.join(folder, name), "w", encoding="utf-8") as f:
            f.write("\n".join(lines) + "\n")
    print("%d records %d partition-days" % (records, len(pdays)))


if __name__ == "__main__":
    main()
