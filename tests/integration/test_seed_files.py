#!/usr/bin/env python3
"""The seed's pipeline on local files (S3 sections replaced by File).

Shows: every record byte-equal and under the folder its fields dictate; a
record with only truck.tenant_id lands under p_tenant_id=... like one with
detail.tenant_id (one folder per tenant);
Firehose-style input (no extensions, gzip and zstd by magic, date-only
prefixes, mixed types, every framing); a second --once reads and writes
nothing; a new file dropped in is the only one copied.
"""
import gzip
import os
import re

from skippr_test import (Workspace, assert_exact, check, files_snapshot,
                         frame, main, output_records, expected_key, run)


def test_seed_layout_byte_equal():
    ws = Workspace("seed")
    try:
        ws.generate(objects=60, records=200, seed=7)
        ws.write_config()
        p = ws.sync("--once")
        n = assert_exact(ws)
        check(n > 10000, "corpus too small: %d" % n)
        check("%d records" % n in p.err, "summary does not count %d: %s" %
              (n, p.err))
        # Plugin counters reach the log: one per object written.
        nfiles = sum(len(f) for d, _, f in os.walk(ws.sink_root)
                     if "_skippr" not in d)  # not the state's claim
        check("files_written=%d" % nfiles in p.err and
              "files_opened=60" in p.err, "counters: %s" % p.err)
        # Durability came from syncfs, once per commit or batch (event-time
        # sealing and growing objects make a few), not an fsync per file.
        syncs = re.search(r"syncs=(\d+)", p.err)
        check(syncs and 1 <= int(syncs.group(1)) <= nfiles // 20,
              "the File sink did not sync in batches (%d files): %s" % (
                  nfiles, p.err))
        # Trucks only carry truck.tenant_id; its values go under the same
        # column name as detail.tenant_id's: one folder name per tenant.
        keys = set(k[0] for k in output_records(ws.sink_root))
        trucks = sorted(k for k in keys if k.startswith("truck_ping/"))
        check(trucks, "no truck_ping output")
        check(all(k.split("/")[1].startswith("p_tenant_id=") for k in keys),
              "a record is not under p_tenant_id=: %s" % sorted(keys)[:5])
        sample = trucks[0]
        check(re.match(r"truck_ping/p_tenant_id=[^/]+/p_year=2021/p_month=10"
                       r"/p_day=", sample), "unexpected layout %s" % sample)
        by_truck = set(k.split("/")[1] for k in trucks)
        by_detail = set(k.split("/")[1] for k in keys
                        if not k.startswith("truck_ping/"))
        check(by_truck & by_detail, "no tenant folder holds records of both "
              "paths: %s / %s" % (sorted(by_truck), sorted(by_detail)))
        print("  %d records, %d objects; e.g. %s" % (
            n, sum(len(f) for _, _, f in os.walk(ws.sink_root)), sample))
    finally:
        ws.cleanup()


def test_rerun_reads_nothing_and_new_file_only():
    ws = Workspace("rerun")
    try:
        ws.generate(objects=20, records=100, seed=3)
        ws.write_config()
        ws.sync("--once")
        before = files_snapshot(ws.out)
        p = ws.sync("--once")
        check("0 units copied, 20 already done" in p.err, p.err)
        check("0 records" in p.err and "0 objects written" in p.err, p.err)
        check(files_snapshot(ws.out) == before, "second run changed output")
        # One new object, gzipped and without an extension.
        new_dir = os.path.join(ws.inp, "ill-just-dump-this-here/2021/10/09/00")
        os.makedirs(new_dir)
        recs = [b'{"event_type":"late","timestamp":"2021-10-09T01:02:03Z",'
                b'"detail":{"tenant_id":"acme"},"n":%d}' % i for i in range(50)]
        with open(os.path.join(new_dir, "late-object"), "wb") as f:
            f.write(gzip.compress(b"".join(recs)))
        p = ws.sync("--once")
        check("1 units copied, 20 already done" in p.err, p.err)
        check("50 records" in p.err, p.err)
        after = files_snapshot(ws.out)
        added = [k for k in after if k not in before]
        check(all(before[k] == after[k] for k in before),
              "old objects were rewritten")
        check(len(added) == 1, "expected one new object, got %s" % added)
        with open(added[0], "rb") as f:
            got = [r for r, _ in frame(f.read())]
        check(got == recs, "new object does not hold exactly the new records")
        check("late/p_tenant_id=acme/p_year=2021/p_month=10/p_day=09/"
              in added[0], added[0])
        assert_exact(ws)
    finally:
        ws.cleanup()


def test_threads_one_and_two_agree():
    outs = []
    for threads in (1, 2):
        ws = Workspace("threads%d" % threads)
        try:
            ws.generate(objects=8, records=3000, seed=11)
            ws.write_config(threads=threads)
            ws.sync("--once")
            assert_exact(ws)
            outs.append(output_records(ws.sink_root))
        finally:
            ws.cleanup()
    check(outs[0] == outs[1], "1 and 2 threads give different output")


def test_big_units_split_across_workers():
    """Objects of several MiB are cut into tasks at line starts; with
    pretty-printed records most cuts fall inside a record and must be
    detected and re-framed. Nothing may be dead-lettered."""
    for framing in ("pretty", "lines", "concat", "array", "crlf"):
        ws = Workspace("split-" + framing)
        try:
            ws.generate(objects=2, records=12000, seed=13, framing=framing,
                        plain="")
            ws.write_config(threads=2)
            p = ws.sync("--once")
            check(", 0 dead-lettered" in p.err, "%s: %s" % (framing, p.err))
            n = assert_exact(ws)
            print("  %s: %d records in 2 objects, exact" % (framing, n))
        finally:
            ws.cleanup()


def test_jsonl_source_with_validate_false():
    """format: jsonl on the source and validate: false: once routing is
    settled, a record's end is its line's end (memchr, no structural scan).
    Both lines and CRLF input copy exactly, on 1 and 2 threads, with big
    objects cut into tasks."""
    for framing in ("lines", "crlf"):
        for threads in (1, 2):
            ws = Workspace("jsonl-%s-%d" % (framing, threads))
            try:
                ws.generate(objects=3, records=6000, seed=17,
                            framing=framing)
                ws.write_config(threads=threads,
                                pipeline_extra={"validate": "false"},
                                source_extra={"format": "jsonl"})
                p = ws.sync("--once")
                check(", 0 dead-lettered" in p.err, "%s: %s" % (framing,
                                                                p.err))
                n = assert_exact(ws)
                print("  %s, %d threads: %d records exact" % (framing,
                                                              threads, n))
            finally:
                ws.cleanup()


def test_status_and_validate():
    ws = Workspace("status")
    try:
        ws.generate(objects=3, records=10, seed=5)
        ws.write_config()
        p = run(["status", "--pipeline", "gdpr_compliant_migration",
                 "--config", ws.config])
        check("never run" in p.out, p.out)
        ws.sync("--once")
        p = run(["status", "--pipeline", "gdpr_compliant_migration",
                 "--config", ws.config])
        check("running:         no" in p.out, p.out)
        check("slices pending:  0" in p.out, p.out)
        check("units done:" in p.out and "3" in p.out, p.out)
        p = run(["validate", "--config", ws.config])
        check("pipeline gdpr_compliant_migration: ok (File -> File)" in p.out,
              p.out)
    finally:
        ws.cleanup()


if __name__ == "__main__":
    main([test_seed_layout_byte_equal,
          test_rerun_reads_nothing_and_new_file_only,
          test_threads_one_and_two_agree, test_big_units_split_across_workers,
          test_jsonl_source_with_validate_false,
          test_status_and_validate])
