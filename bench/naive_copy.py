#!/usr/bin/env python3
"""The naive peer for bench/peers.py: what one would write in an afternoon.
Reads every newline-delimited JSON file under IN with json.loads, groups the
records by event type, tenant and day, and writes each group with
json.dumps under OUT (so records are re-encoded, not copied).

    naive_copy.py IN OUT
"""
import collections
import datetime
import json
import os
import sys


def day(ts):
    if isinstance(ts, (int, float)) or (isinstance(ts, str) and ts.isdigit()):
        n = int(ts)
        if n > 10**11:
            n //= 1000
        return datetime.datetime.fromtimestamp(
            n, datetime.timezone.utc).strftime("%Y-%m-%d")
    t = datetime.datetime.fromisoformat(ts.replace("Z", "+00:00"))
    if t.tzinfo:
        t = t.astimezone(datetime.timezone.utc)
    return t.strftime("%Y-%m-%d")


def main():
    src, dst = sys.argv[1], sys.argv[2]
    groups = collections.defaultdict(list)
    for d, _, files in os.walk(src):
        for fn in sorted(files):
            with open(os.path.join(d, fn), encoding="utf-8") as f:
                for line in f:
                    if not line.strip():
                        continue
                    rec = json.loads(line)
                    tenant = (rec.get("detail") or rec.get("truck") or
                              {}).get("tenant_id", "none")
                    groups[(rec.get("event_type"), tenant,
                            day(rec["timestamp"]))].append(rec)
    for (etype, tenant, d), recs in groups.items():
        folder = os.path.join(dst, str(etype), str(tenant), d)
        os.makedirs(folder, exist_ok=True)
        with open(os.path.join(folder, "part.jsonl"), "w",
                  encoding="utf-8") as f:
            for rec in recs:
                f.write(json.dumps(rec) + "\n")


if __name__ == "__main__":
    main()
