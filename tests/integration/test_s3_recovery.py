#!/usr/bin/env python3
"""Recovery that identifies its own objects, against s3rver behind the
fault proxy.

- A crash right after a Complete is sent: the proxy carries the Complete
  out, then kills skipprd before the answer reaches it. The next run finds
  the object complete (its slice id and S3's full-object CRC32C), writes
  nothing again, exits 0, and the output is exact.
- A write carried out late, with its object visible before its metadata:
  the proxy cuts the connection of the first Complete (then of the first
  PutObject), carries it out 50 ms later, and hides the object's
  x-amz-meta-* for 1.5 s after, so that the retry meets it bare. The run looks again instead of
  replacing, finds its own object, exits 0, exact.
- An object without skippr's metadata that stays so (someone else's, or a
  store that never shows it): replaced only with If-Match on the ETag
  seen, never blindly; exact, exit 0.

In every case the proxy lists each PutObject or Complete of the sink that
carried no condition (neither If-None-Match nor If-Match): none may.
"""
import os
import signal
import subprocess

from s3_test import S3Server
from skippr_test import (SKIPPRD, Workspace, check, expected_records, main)

TRANSFORM = {"namespace_fields": "none", "batch_time_fields": "timestamp",
             "batch_time_unit": "month"}


def config(ws, max_object, wal_budget):
    with open(ws.config, "w") as f:
        f.write(
            "skippr:\n  workspace: w\n  skipprd_el_storage_mode: local\n"
            "  state_dir: %s\n"
            "pipelines:\n  p:\n    type: copy\n"
            "    data_source: data_sources.a\n    data_sink: data_sinks.b\n"
            "    buffer_threshold_seconds: 86400\n"
            "    max_object_bytes: %s\n    commit_interval_ms: 0\n"
            "    wal_disk_budget: %s\n"
            "    transform:\n      namespace_fields: none\n"
            "      batch_time_fields: timestamp\n"
            "      batch_time_unit: month\n"
            "data_sources:\n  a:\n    File:\n      path: %s\n"
            "      prefix: ill-just-dump-this-here\n"
            "data_sinks:\n  b:\n    S3:\n      s3_bucket: dst\n"
            "      s3_prefix: %s\n      part_size: 5MiB\n"
            % (ws.state, max_object, wal_budget, ws.inp, ws.prefix))


def start(ws, s3):
    return subprocess.Popen([SKIPPRD, "sync", "-p", "p", "--once", "-c",
                             ws.config], env=dict(os.environ, **s3.env()),
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            text=True)


def finish(ws, s3, what):
    """A run to the end: exit 0, output exact, no blind write. Returns
    its log."""
    p = start(ws, s3)
    _, err = p.communicate(timeout=300)
    check(p.returncode == 0, "%s: exit %d\n%s" % (what, p.returncode,
                                                  err[-3000:]))
    want = expected_records(ws.inp, transform=TRANSFORM)
    got = s3.records("dst", ws.prefix + "/")
    lost, extra = want - got, got - want
    check(not lost and not extra, "%s: %d lost, %d extra of %d" % (
        what, sum(lost.values()), sum(extra.values()), sum(want.values())))
    blind = [k for k in s3.stats()["unconditional"]
             if k.startswith("dst/" + ws.prefix + "/")]
    check(not blind, "%s: written without a condition: %s" % (what, blind))
    return err


def case(name, objects, max_object):
    """A workspace writing to its own prefix. Objects over a part grow as
    multipart uploads under a 2 MiB WAL budget; small ones are PutObjects
    (the default budget: no staging pieces, which are PutObjects too)."""
    ws = Workspace(name)
    ws.prefix = "out-" + name
    ws.generate(objects=objects, records=20000, seed=41, framing="lines")
    config(ws, max_object, "2MiB" if max_object == "6MiB" else "8GiB")
    return ws


def test_crash_right_after_a_complete_is_sent():
    s3 = S3Server(["dst"])
    ws = case("s3killcomplete", 8, "6MiB")
    try:
        p = start(ws, s3)
        s3.faults(0, ["kill_after"], only=["complete_multipart"], nth=1,
                  kill_pid=p.pid)
        _, err = p.communicate(timeout=300)
        check(p.returncode == -signal.SIGKILL,
              "not killed after the Complete (exit %d)\n%s" % (
                  p.returncode, err[-2000:]))
        check(s3.stats()["injected"].get("kill_after") == 1, "no kill")
        s3.faults(0, [])
        err = finish(ws, s3, "the run after the kill")
        check("already complete" in err,
              "the completed object was not recognised:\n" + err[-2000:])
        print("  killed right after its Complete was carried out; the next "
              "run found the object whole (slice id and CRC32C), exact")
    finally:
        s3.close()
        ws.cleanup()


def test_write_carried_out_late_before_its_metadata():
    s3 = S3Server(["dst"])
    try:
        for kind, objects, max_object in (("complete_multipart", 8, "6MiB"),
                                          ("put", 2, "64KiB")):
            ws = case("s3late-" + kind, objects, max_object)
            try:
                s3.reset_stats()
                s3.faults(0, ["late_write"], only=[kind], nth=1, late_ms=50,
                          meta_lag_ms=1500)
                err = finish(ws, s3, "a late %s" % kind)
                check(s3.stats()["injected"].get("late_write") == 1,
                      "no late %s" % kind)
                print("  %s carried out late, metadata 1.5 s later: "
                      "exact, exit 0%s" % (kind, "; looked again at a bare "
                                           "object" if "without skippr's "
                                           "metadata" in err else ""))
            finally:
                ws.cleanup()
    finally:
        s3.close()


def test_bare_object_is_replaced_only_by_if_match():
    s3 = S3Server(["dst"])
    ws = case("s3bare", 2, "64KiB")
    try:
        # The late PutObject's object never shows metadata: not ours as far
        # as anyone can tell. The run looks again, then replaces it with
        # If-Match on the ETag it saw.
        s3.faults(0, ["late_write"], only=["put"], nth=1, late_ms=50,
                  meta_lag_ms=3600000)
        err = finish(ws, s3, "a bare object")
        check("If-Match" in err and "without skippr's metadata" in err,
              "the bare object was not replaced by If-Match:\n" + err[-2000:])
        print("  an object without metadata at our key: looked at again, "
              "then replaced by If-Match only; exact")
    finally:
        s3.close()
        ws.cleanup()


if __name__ == "__main__":
    main([test_crash_right_after_a_complete_is_sent,
          test_write_carried_out_late_before_its_metadata,
          test_bare_object_is_replaced_only_by_if_match])
