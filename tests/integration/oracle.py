"""The obligation oracle: what a copy owes, and whether it paid.

Every record it makes has a unique id and a payload that follows from the
id alone, so any record found anywhere can be checked byte for byte. A
test tells it which ids it tried to put into the source (attempted), which
the source side confirmed as durable (acknowledged: a file written, a 200,
a PUBACK, a produced offset) and, at the end, what the sink holds
(delivered, with the partition each copy landed in). From these:

- lost: acknowledged ids never delivered;
- duplicated: copies beyond the first of a delivered id;
- unexpected: delivered bytes that are no record it made, a record that
  was never attempted, or one in the wrong partition.

verdict() returns the counts; check() asserts them against a guarantee:
exactly once (0, 0, 0), or at least once (0 lost, 0 unexpected, repeats
allowed). Every result is also appended, one JSON line, to the file named
by SKIPPR_RELIABILITY_LOG when it is set, for docs/RELIABILITY.md.
"""
import collections
import hashlib
import json
import os

from skippr_test import check, expected_key

EVENT_TYPES = ["login", "logout", "purchase", "refund", "signup", "error",
               "click"]


class Oracle:
    def __init__(self, name, seed, n, days=3, log=True):
        self.name = name
        self.log = log
        self.seed = seed
        self.n = n
        self.days = days
        self.attempted = set()
        self.acknowledged = set()
        self.delivered = collections.Counter()  # id -> copies
        self.unexpected = 0
        self.examples = []

    def record_id(self, i):
        return "r%d-%d" % (self.seed, i)

    def record(self, i):
        """The bytes of record i: a function of (seed, i) only."""
        h = hashlib.sha256(b"%d:%d" % (self.seed, i)).digest()
        return json.dumps({
            "event_type": EVENT_TYPES[h[0] % len(EVENT_TYPES)],
            "id": self.record_id(i),
            "detail": {"tenant_id": "t%d" % (h[1] % 6)},
            "timestamp": "2024-03-%02dT%02d:%02d:00Z" % (
                1 + h[2] % self.days, h[3] % 24, h[4] % 60),
            "pad": h.hex()[:16 + h[5] % 48]}, separators=(",", ":")).encode()

    def records(self, ids=None):
        return [self.record(i) for i in (range(self.n) if ids is None
                                         else ids)]

    def attempt(self, indexes):
        self.attempted.update(self.record_id(i) for i in indexes)

    def acknowledge(self, indexes):
        self.acknowledged.update(self.record_id(i) for i in indexes)

    def deliver(self, raw, partition=None):
        """One copy found at the sink; partition (when the sink keeps it)
        must be where routing puts the record."""
        try:
            obj = json.loads(raw)
            rid = obj["id"]
            i = int(rid.split("-")[1])
            ok = (rid.startswith("r%d-" % self.seed) and 0 <= i < self.n and
                  self.record(i) == raw and rid in self.attempted and
                  (partition is None or partition == expected_key(obj)))
        except (ValueError, KeyError, IndexError, TypeError, AttributeError):
            ok = False
        if not ok:
            self.unexpected += 1
            if len(self.examples) < 3:
                self.examples.append((partition, raw[:200]))
            return
        self.delivered[rid] += 1

    def verdict(self):
        lost = len(self.acknowledged - set(self.delivered))
        dup = sum(c - 1 for c in self.delivered.values() if c > 1)
        return {"pair": self.name, "seed": self.seed,
                "attempted": len(self.attempted),
                "acknowledged": len(self.acknowledged),
                "delivered": sum(self.delivered.values()),
                "lost": lost, "duplicated": dup,
                "unexpected": self.unexpected}

    def check(self, guarantee, kills, note=""):
        """Assert the verdict for `guarantee` ("exactly once" or "at least
        once"), print it and log it. Returns the verdict."""
        v = self.verdict()
        v.update({"kills": kills, "guarantee": guarantee, "note": note})
        path = os.environ.get("SKIPPR_RELIABILITY_LOG")
        if path and self.log:
            with open(path, "a") as f:
                f.write(json.dumps(v) + "\n")
        print("  %-16s %3d kills: attempted %d, acknowledged %d, delivered "
              "%d; lost %d, duplicated %d, unexpected %d (%s)%s" % (
                  v["pair"], kills, v["attempted"], v["acknowledged"],
                  v["delivered"], v["lost"], v["duplicated"],
                  v["unexpected"], guarantee, note and "; " + note))
        check(v["lost"] == 0 and v["unexpected"] == 0,
              "%s: %d lost, %d unexpected, e.g. %r" % (
                  self.name, v["lost"], v["unexpected"], self.examples))
        check(v["acknowledged"] > 0, "%s: nothing was acknowledged" %
              self.name)
        if guarantee == "exactly once":
            check(v["duplicated"] == 0, "%s: %d duplicated" % (
                self.name, v["duplicated"]))
        return v
