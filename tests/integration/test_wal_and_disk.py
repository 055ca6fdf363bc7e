#!/usr/bin/env python3
"""WAL damage and disk faults.

- A torn WAL tail (the last frame cut short, or its bytes corrupted) is cut
  off at restart, and the run completes exactly once.
- A corrupted frame in the middle of a segment stops the run with an error
  naming the segment and offset; nothing is skipped silently.
- With wal_zstd_level set, blocks are written compressed (BLOCKZ frames);
  a run killed after sealing recovers from them exactly, and the WAL is
  smaller than the records it holds.
- When the sink fails to make a batch durable (the File sink's syncfs),
  the run stops and records none of the batch: the next run writes every
  object again, exactly once.
- A full disk (ENOSPC) and a failed fsync, injected through the I/O fault
  wrapper at call 1, 2, 3 ... until a run gets through, each stop the run
  with a clear error; a later run completes without loss.
"""
import glob
import csv
import os
import re

from skippr_test import Workspace, assert_exact, check, expected_records, main


def wal_files(ws):
    return sorted(glob.glob(os.path.join(ws.state, "test",
                                         "gdpr_compliant_migration", "wal",
                                         "wal-*.log")))


def frames_end(path):
    """Where the last whole frame of a WAL segment ends: a segment written
    with O_DIRECT may be followed by zero padding to a 4 KiB block."""
    with open(path, "rb") as f:
        data = f.read()
    off = 0
    while off + 24 <= len(data) and data[off:off + 4] == b"SKW1":
        n = int.from_bytes(data[off + 16:off + 20], "little")
        if off + 24 + n > len(data):
            break
        off += 24 + n
    check(not any(data[off:]), "bytes after the last frame are not padding")
    return off


def crashed_workspace(name, point):
    ws = Workspace(name)
    ws.generate(objects=10, records=300, seed=21)
    ws.write_config(pipeline_extra={"commit_interval_ms": 0,
                                    "max_object_bytes": "64KiB"})
    p = ws.sync("--once", env={"SKIPPR_CRASH": point}, check_rc=False)
    check(p.returncode == -9, "crash point %s not reached: %s" % (point, p.err))
    check(wal_files(ws), "no WAL left after the crash")
    return ws


def test_torn_tail_recovered():
    for how in ("cut", "corrupt", "garbage"):
        ws = crashed_workspace("torn-" + how, "commit:6")
        try:
            last = wal_files(ws)[-1]
            size = frames_end(last)
            check(size > 100, "last segment is empty")
            with open(last, "r+b") as f:
                f.truncate(size)  # any padding: it is not the torn part
                if how == "cut":
                    f.truncate(size - 7)
                elif how == "corrupt":
                    f.seek(size - 3)
                    f.write(b"\xde\xad\xbe")
                else:
                    f.seek(size)
                    f.write(os.urandom(100))
            p = ws.sync("--once")
            check("torn tail" in p.err, "no torn-tail notice: %s" % p.err)
            n = assert_exact(ws)
            print("  %s tail: recovered, %d records exactly once" % (how, n))
        finally:
            ws.cleanup()


def test_middle_corruption_reported():
    ws = crashed_workspace("midcorrupt", "commit:6")
    try:
        seg = wal_files(ws)[0]
        size = os.path.getsize(seg)
        with open(seg, "r+b") as f:
            f.seek(size // 2)
            b = f.read(1)
            f.seek(size // 2)
            f.write(bytes([b[0] ^ 0xFF]))
        before = sorted(glob.glob(ws.out + "/**", recursive=True))
        p = ws.sync("--once", check_rc=False)
        check(p.returncode == 1, "corruption did not fail the run")
        check("WAL corrupt" in p.err and os.path.basename(seg) in p.err and
              "offset" in p.err, "error does not name segment/offset: %s" %
              p.err)
        check(sorted(glob.glob(ws.out + "/**", recursive=True)) == before,
              "output changed despite the corrupt WAL")
        print("  reported: %s" % [l for l in p.err.splitlines()
                                  if "WAL corrupt" in l][0][:160])
    finally:
        ws.cleanup()


def frame_types(path):
    """Count of frames by type in one WAL segment (format: wal.c)."""
    counts = {}
    with open(path, "rb") as f:
        data = f.read()
    off = 0
    while off + 24 <= len(data):
        plen = int.from_bytes(data[off + 16:off + 20], "little")
        counts[data[off + 4]] = counts.get(data[off + 4], 0) + 1
        off += 24 + plen
    return counts


def test_compressed_wal_recovers():
    ws = Workspace("walzstd")
    try:
        ws.generate(objects=20, records=2000, seed=23, plain="")
        # json -> csv: converted slices live in the WAL until sealed (data
        # slices a File sink can grow in place never enter it).
        ws.write_config(pipeline_extra={"wal_zstd_level": 3},
                        sink_format="csv")
        p = ws.sync("--once", env={"SKIPPR_CRASH": "seal:1"}, check_rc=False)
        check(p.returncode == -9, "crash point not reached: %s" % p.err)
        types = {}
        for seg in wal_files(ws):
            for t, n in frame_types(seg).items():
                types[t] = types.get(t, 0) + n
        check(types.get(6, 0) > 0, "no BLOCKZ frames: %s" % types)
        wal = sum(os.path.getsize(f) for f in wal_files(ws))
        raw = sum(os.path.getsize(os.path.join(d, f))
                  for d, _, fs in os.walk(ws.inp) for f in fs)
        check(wal < raw / 2, "WAL %d bytes for %d bytes of input" % (wal, raw))
        ws.sync("--once")
        n = sum(expected_records(ws.inp).values())
        rows = 0
        for d, _, fs in os.walk(ws.sink_root):
            if "_skippr" in d:
                continue  # the state's claim on the sink
            for f in fs:
                with open(os.path.join(d, f), newline="") as fh:
                    rows += sum(1 for _ in csv.reader(fh)) - 1  # header
        check(rows == n, "%d rows for %d records" % (rows, n))
        print("  %d records recovered from %d BLOCKZ frames; WAL %.1f MB for "
              "%.1f MB of input" % (n, types[6], wal / 1e6, raw / 1e6))
    finally:
        ws.cleanup()


def test_failed_sink_sync_records_nothing():
    ws = Workspace("syncfail")
    try:
        ws.generate(objects=10, records=300, seed=29)
        ws.write_config()
        p = ws.sync("--once", env={"SKIPPR_TEST_FILE_SYNC_FAIL": "1"},
                    check_rc=False)
        errors = [ln for ln in p.err.splitlines() if " error: " in ln]
        check(p.returncode == 1 and len(errors) == 1 and
              "syncfs" in errors[0], "want one syncfs error: %s" % p.err)
        # The first commit's sync failed: the objects growing in place were
        # never recorded, so the next run removes every one and writes
        # them again.
        files = [f for d, _, fs in os.walk(ws.sink_root) for f in fs
                 if "_skippr" not in d]  # not the state's claim
        growing = [f for f in files if f.startswith(".")]
        check(growing and len(growing) == len(files),
              "the failed run should leave only unrecorded growing objects: "
              "%s" % files[:5])
        p = ws.sync("--once")
        removed = re.search(r"removed (\d+) unfinished objects", p.err)
        check(removed and int(removed.group(1)) == len(growing),
              "the next run should remove all %d: %s" % (len(growing), p.err))
        n = assert_exact(ws)
        print("  %d growing objects not recorded after the failed sync; "
              "removed and rewritten, %d records exact" % (len(growing), n))
    finally:
        ws.cleanup()


def test_disk_full_and_fsync_failure():
    for kind, words in (("nospc", "No space left on device"),
                        ("fsync", "fsync")):
        ws = Workspace("fault-" + kind)
        try:
            ws.generate(objects=8, records=300, seed=9)
            ws.write_config(pipeline_extra={"commit_interval_ms": 0,
                                            "max_object_bytes": "64KiB"})
            # Fail the 1st call, then (after that run stopped) the 2nd, the
            # 3rd ... until a run gets through without reaching the fault.
            stops = 0
            for n in range(1, 200):
                p = ws.sync("--once", env={"SKIPPR_FAULT": "%s:%d" % (kind, n)},
                            check_rc=False)
                if p.returncode == 0:
                    break  # the Nth call never came: the work is done
                check(p.returncode == 1, "%s:%d: exit %d" % (kind, n,
                                                              p.returncode))
                check(words in p.err and "error" in p.err,
                      "%s:%d: unclear error: %s" % (kind, n, p.err[-500:]))
                stops += 1
            check(stops >= 5, "%s: only %d runs hit the fault" % (kind, stops))
            ws.sync("--once")
            total = assert_exact(ws)
            print("  %s: %d runs stopped cleanly; final run exact (%d records)"
                  % (kind, stops, total))
        finally:
            ws.cleanup()


if __name__ == "__main__":
    main([test_torn_tail_recovered, test_middle_corruption_reported,
          test_compressed_wal_recovers, test_failed_sink_sync_records_nothing,
          test_disk_full_and_fsync_failure])
