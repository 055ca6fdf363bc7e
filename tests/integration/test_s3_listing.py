#!/usr/bin/env python3
"""Listing past a batch boundary, one page after another and wide.

The engine lists `list_batch` units, copies them, then lists on after the
last one. Here the batch is small (37 units) against a few hundred objects
spread over Firehose's year/month/day/hour folders, with loose objects next
to the folders at two levels, and a start_after in the middle. Both listing
modes (list_concurrency 1, and wide with a Delimiter) must copy exactly the
objects after start_after, each read once, and a second run must read
nothing.
"""
import concurrent.futures
import os
import re

from s3_test import S3Server
from skippr_test import (SOURCE_PREFIX, Workspace, check, expected_records,
                         main)

TRANSFORM = {"namespace_fields": "event_type"}
BATCH = 37


def loose_objects(inp):
    """Objects beside the hour folders, where a Delimiter listing returns
    Contents and CommonPrefixes in one answer."""
    root = os.path.join(inp, SOURCE_PREFIX)
    days = sorted(os.listdir(os.path.join(root, "2021", "10")))
    spots = [root, os.path.join(root, "2021", "10", days[len(days) // 2])]
    for i, d in enumerate(spots):
        with open(os.path.join(d, "loose-%d" % i), "wb") as f:
            for n in range(3):
                f.write(b'{"event_type":"loose","id":"%d-%d"}\n' % (i, n))


def run(ws, s3, mode, start_after, batch=BATCH, args=(), check_rc=True):
    config = os.path.join(ws.root, "skippr-%s.yml" % mode["name"])
    with open(config, "w") as f:
        f.write("""skippr:
  state_dir: %s/%s
pipelines:
  p:
    data_source: data_sources.a
    data_sink: data_sinks.b
    list_batch: %d
    transform:
      namespace_fields: event_type
data_sources:
  a:
    S3:
      s3_bucket: src
      s3_prefix: %s
      start_after: "%s"
      list_concurrency: %d
      concurrency: 4
data_sinks:
  b:
    S3:
      s3_bucket: dst
      s3_prefix: %s
""" % (ws.state, mode["name"], batch, SOURCE_PREFIX, start_after,
            mode["list_concurrency"], mode["name"]))
    s3.reset_stats()
    p = s3.sync(config, timeout=300, args=args)
    check(p.returncode == 0 or not check_rc, p.stderr[-2000:])
    stats = s3.stats()
    stats["counts"]["connections"] = stats["connections"]
    stats["counts"]["log"] = p.stderr
    stats["counts"]["rc"] = p.returncode
    return stats["counts"]


def test_listing_in_batches():
    ws = Workspace("s3list")
    s3 = S3Server(["src", "dst"])
    try:
        ws.generate(objects=300, records=3, seed=11)
        loose_objects(ws.inp)
        s3.upload_tree("src", ws.inp)
        keys = sorted(os.path.relpath(os.path.join(d, f), ws.inp)
                      for d, _, fs in os.walk(ws.inp) for f in fs)
        start_after = keys[len(keys) // 3]
        skip = {os.path.join(ws.inp, k) for k in keys if k <= start_after}
        wanted = len(keys) - len(skip)
        check(wanted > 4 * BATCH, "the test needs several batches")
        want = expected_records(ws.inp, transform=TRANSFORM, skip=skip)
        for mode in ({"name": "serial", "list_concurrency": 1},
                     {"name": "wide", "list_concurrency": 32}):
            counts = run(ws, s3, mode, start_after)
            check(counts.get("get") == wanted,
                  "%s: %d objects after start_after, %s GETs" %
                  (mode["name"], wanted, counts.get("get")))
            # One listing round per batch at least: the batches were real.
            check(counts.get("list", 0) > wanted // BATCH,
                  "%s: %s" % (mode["name"], counts))
            got = dict(s3.records("dst", mode["name"] + "/"))
            check(dict(want) == got, "%s: output differs from the %d "
                  "objects after start_after" % (mode["name"], wanted))
            again = run(ws, s3, mode, start_after)
            check(not again.get("get") and not again.get("put") and
                  not again.get("upload_part"),
                  "%s: the second run read or wrote: %s" %
                  (mode["name"], again))
            print("  %s: %d objects in %d batches, %d list requests, %d "
                  "connections" % (mode["name"], wanted, -(-wanted // BATCH),
                                   counts.get("list", 0),
                                   counts["connections"]))
    finally:
        s3.close()
        ws.cleanup()


def test_empty_listings():
    """A prefix with nothing under it lists nothing, in both listing
    modes, for S3 and File sources: 0 units, exit 0. (The soak under UBSan
    found qsort given the NULL of an empty listing, in both plugins.)"""
    ws = Workspace("s3empty")
    s3 = S3Server(["src", "dst"])
    try:
        for mode in ({"name": "serial", "list_concurrency": 1},
                     {"name": "wide", "list_concurrency": 8}):
            counts = run(ws, s3, mode, "")
            check(counts.get("list", 0) >= 1, "no listing: %r" % counts)
        os.makedirs(os.path.join(ws.inp, SOURCE_PREFIX))
        ws.write_config()
        p = ws.sync("--once")
        check("0 units copied" in p.err, p.err)
        print("  empty S3 prefix (serial and wide listing) and empty "
              "folder: 0 units, exit 0")
    finally:
        s3.close()
        ws.cleanup()


def test_object_listed_before_its_bytes():
    """An object listed with its final ETag at 0 bytes (s3rver listed one
    so while its PUT was still writing; S3 never does): the run stops with
    an error line naming the object and records nothing of it, so the next
    run, with the listing right, copies every record once."""
    ws = Workspace("s3early")
    s3 = S3Server(["src", "dst"])
    try:
        ws.generate(objects=6, records=20, seed=13)
        s3.upload_tree("src", ws.inp)
        mode = {"name": "wide", "list_concurrency": 8}
        s3.faults(0, [], listed_empty=True)
        counts = run(ws, s3, mode, "", check_rc=False)
        errors = [ln for ln in counts["log"].splitlines()
                  if " error: " in ln and "but was listed with 0 under "
                  "the same ETag" in ln]
        check(counts["rc"] == 1 and errors, "exit %d:\n%s" % (
            counts["rc"], counts["log"][-2000:]))
        s3.faults(0, [])
        run(ws, s3, mode, "")
        want = expected_records(ws.inp, transform=TRANSFORM)
        check(dict(want) == dict(s3.records("dst", "wide/")),
              "the rerun's output is not the records, once each")
        print("  %s; the rerun: %d records exact" % (
            errors[0].split(" error: ")[1][:150], sum(want.values())))
    finally:
        s3.close()
        ws.cleanup()


def test_big_sub_prefixes():
    """Sub-prefixes of more than a page each, listed wide two at a time:
    the sub-prefix ahead of the one being reported holds at most one page
    (S3 and s3rver answer 1,000 keys a page), so the listing never holds
    more than two pages of keys, though the prefix has three. Every key is
    copied once, and the batches (list_batch 700) resume inside a
    sub-prefix with start-after."""
    ws = Workspace("s3big")
    s3 = S3Server(["src", "dst"])
    folders, per = 2, 1500
    try:
        body = b'{"event_type":"e","id":%d}\n'

        def put(k):
            s3.client.put_object(
                Bucket="src", Key="%s/2024/03/%02d/obj-%05d.json" % (
                    SOURCE_PREFIX, 1 + k // per, k), Body=body % k)
        with concurrent.futures.ThreadPoolExecutor(8) as pool:
            list(pool.map(put, range(folders * per)))
        mode = {"name": "big", "list_concurrency": 2}
        counts = run(ws, s3, mode, "", batch=700, args=("-vv",))
        check(counts.get("get") == folders * per,
              "%d objects, %s GETs" % (folders * per, counts.get("get")))
        got = s3.records("dst", "big/")
        check(len(got) == folders * per and set(got.values()) == {1},
              "%d distinct records copied, want %d once each" %
              (len(got), folders * per))
        held = [int(m) for m in re.findall(r"at most (\d+) held at once",
                                           counts["log"])]
        check(held, "no listing figures in the debug log")
        check(max(held) <= 2 * 1000,
              "a listing held %d keys; two pages are 2000" % max(held))
        print("  %d keys in %d sub-prefixes, %d batches: %d list requests, "
              "at most %d keys held by a listing" % (
                  folders * per, folders, len(held), counts.get("list", 0),
                  max(held)))
    finally:
        s3.close()
        ws.cleanup()


AWKWARD_KEYS = [
    "2021/10/03/a&b.json",
    "2021/10/03/<tag>.json",
    "2021/10/03/quote\"s'.json",
    "2021/10/03/\u00fc \u00f1 \u65e5\u672c.json",
    "2021/10/03/ /in-a-space-folder.json",
    "2021/10/04/%2Fencoded.json",
    "2021/10/04/  leading-spaces.json",
    "2021/10/04/]]>cdata-end.json",
]


def test_awkward_keys():
    """Keys that XML must escape (& < > " '), non-ASCII, a folder named
    by one space, %2F and ]]> come back from the listing whole: each
    object is read once and its record copied, in both listing modes."""
    ws = Workspace("s3keys")
    s3 = S3Server(["src", "dst"])
    try:
        sent = set()
        for i, k in enumerate(AWKWARD_KEYS):
            rec = b'{"event_type":"odd","id":%d}' % i
            sent.add(rec)
            s3.client.put_object(Bucket="src", Key=SOURCE_PREFIX + "/" + k,
                                 Body=rec + b"\n")
        for mode in ({"name": "serial", "list_concurrency": 1},
                     {"name": "wide", "list_concurrency": 8}):
            counts = run(ws, s3, mode, "")
            check(counts.get("get") == len(AWKWARD_KEYS),
                  "%s: %d keys, %s GETs" % (mode["name"], len(AWKWARD_KEYS),
                                             counts.get("get")))
            got = s3.records("dst", mode["name"] + "/")
            check(set(raw for _, raw in got) == sent and
                  sum(got.values()) == len(sent),
                  "%s: records differ: %r" % (mode["name"], got))
        print("  %d awkward keys listed and copied once, serial and wide" %
              len(AWKWARD_KEYS))
    finally:
        s3.close()
        ws.cleanup()


if __name__ == "__main__":
    main([test_listing_in_batches, test_empty_listings, test_awkward_keys,
          test_object_listed_before_its_bytes,
          test_big_sub_prefixes])
