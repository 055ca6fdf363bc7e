#!/usr/bin/env python3
"""S3 under stress, against s3rver behind the fault proxy.

- Multipart: partitions of tens of MiB are written as multipart uploads
  with 5 MiB parts, byte-equal.
- Faults: 10% of requests fail (503 SlowDown, 500, connection reset, a body
  cut in half) and CompleteMultipartUpload answers 200 with an error body;
  the run still completes with 0 lost and 0 duplicated records.
- Kills: kill -9 at 50 or more points of an S3 -> S3 run (mid-multipart
  included), each followed by a restart, leaves exactly-once output, and no
  multipart upload is left unfinished.
- Lost answers: a PUT or CompleteMultipartUpload that succeeded but whose
  answer never arrived is retried with If-None-Match: *; the 412 that comes
  back is settled by HEAD, and nothing is written twice.
- A missing bucket, bad credentials and an unreachable endpoint are each
  one clear error line per endpoint concerned, from the preflight before
  anything is read: exit 1, nothing written.
"""
import collections
import os
import random
import re
import signal
import subprocess
import time

from s3_test import S3Server, add_batch, random_crash
from skippr_test import (SKIPPRD, KillClock, Workspace, check,
                         expected_records, frame, main, trials)

SINK_PREFIX = "out/"
KILLS = trials(50)  # per kill test


def config(ws, source, part_size="5MiB", extra="", src_extra="",
           namespace="event_type"):
    src = ("    S3:\n      s3_bucket: src\n      s3_prefix: ill-just-dump-this-here\n"
           + src_extra
           if source == "s3" else
           "    File:\n      path: %s\n      prefix: ill-just-dump-this-here\n" % ws.inp)
    text = """skippr:
  workspace: w
  skipprd_el_storage_mode: local
  state_dir: %s
pipelines:
  p:
    type: copy
    data_source: data_sources.a
    data_sink: data_sinks.b
    buffer_threshold_seconds: 86400
%s    transform:
      namespace_fields: %s
      batch_time_fields: timestamp
      batch_time_unit: month
data_sources:
  a:
%sdata_sinks:
  b:
    S3:
      s3_bucket: dst
      s3_prefix: out
      part_size: %s
""" % (ws.state, extra, namespace, src, part_size)
    with open(ws.config, "w") as f:
        f.write(text)


def run(ws, s3, env=None, check_rc=True):
    p = s3.sync(ws.config, env=env)
    if check_rc:
        check(p.returncode == 0, "skipprd failed: %s" % p.stderr[-3000:])
    return p


TRANSFORM = {"namespace_fields": "event_type", "batch_time_fields": "timestamp",
             "batch_time_unit": "month"}


def where_extra(s3, extra):
    """A line per sink object holding records counted in extra: its key,
    size, how many of its records are extra and which other objects hold
    the same records (at most 8 lines)."""
    holders = collections.defaultdict(set)
    objs = sorted(s3.objects("dst", SINK_PREFIX).items())
    for key, data in objs:
        folder = key[len(SINK_PREFIX):].rsplit("/", 1)[0]
        for raw, _ in frame(data):
            if (folder, raw) in extra:
                holders[(folder, raw)].add(key.rsplit("/", 1)[1])
    lines = []
    for key, data in objs:
        folder = key[len(SINK_PREFIX):].rsplit("/", 1)[0]
        mine = [r for r, _ in frame(data) if (folder, r) in extra]
        if mine:
            also = set().union(*(holders[(folder, r)] for r in mine))
            also.discard(key.rsplit("/", 1)[1])
            lines.append("    %s (%d bytes): %d of its records are extra; "
                         "also in %s" % (key, len(data), len(mine),
                                         ", ".join(sorted(also)) or "none"))
    return "\n".join(lines[:8])


def exact(ws, s3, transform=TRANSFORM, history=None):
    want = expected_records(ws.inp, transform=transform)
    got = s3.records("dst", SINK_PREFIX)
    lost, extra = want - got, got - want
    if lost or extra:
        if extra:
            print(where_extra(s3, extra))
        for h in history or []:
            print("    " + h)
    check(not lost and not extra, "%d lost, %d extra of %d" % (
        sum(lost.values()), sum(extra.values()), sum(want.values())))
    return sum(want.values())


def test_multipart_file_to_bucket():
    ws = Workspace("s3mp")
    s3 = S3Server(["dst"])
    try:
        ws.generate(objects=8, records=40000, seed=31, plain="")
        config(ws, "file")
        s3.reset_stats()
        run(ws, s3)
        st = s3.stats()
        c = st["counts"]
        # Every PUT, part and Complete carried a CRC32C the proxy checked
        # (Complete against the parts' bytes, as S3's FULL_OBJECT does).
        writes = c.get("put", 0) + c.get("upload_part", 0) + \
            c.get("complete_multipart", 0)
        check(st["checksums"] == {"verified": writes, "mismatched": 0,
                                  "absent": 0},
              "checksums %s for %d writes" % (st["checksums"], writes))
        # Over plain HTTP the signature covers each body's SHA-256.
        check(st["payloads"] == {"signed": writes, "unsigned": 0,
                                 "mismatched": 0},
              "payload hashes %s for %d writes" % (st["payloads"], writes))
        check(c.get("create_multipart", 0) >= 3 and
              c.get("upload_part", 0) > c.get("create_multipart", 0) and
              c.get("complete_multipart", 0) == c.get("create_multipart", 0),
              "no multipart uploads: %s" % c)
        n = exact(ws, s3)
        print("  %d records; requests %s; CRC32C checked on %d writes" % (
            n, dict(sorted(c.items())), writes))
    finally:
        s3.close()
        ws.cleanup()


def test_lost_answers_are_not_written_twice():
    ws = Workspace("s3lost")
    s3 = S3Server(["dst"])
    try:
        ws.generate(objects=8, records=40000, seed=41, plain="")
        # Small partitions too, each written by a single PUT.
        with open(os.path.join(ws.inp, "ill-just-dump-this-here", "small"),
                  "wb") as f:
            for i in range(12):
                f.write(b'{"event_type":"rare-%d","timestamp":'
                        b'"2021-10-01T00:00:00Z"}\n' % (i % 4))
        config(ws, "file")
        s3.faults(0.5, ["lost_reply"], seed=9,
                  only=["put", "complete_multipart"])
        p = run(ws, s3)
        st = s3.stats()
        s3.faults(0, [])
        c = st["counts"]
        check(c.get("put", 0) > 0 and c.get("complete_multipart", 0) > 0,
              "wanted single PUTs and multipart uploads: %s" % st)
        check(st["injected"].get("lost_reply", 0) >= 2,
              "too few lost answers: %s" % st["injected"])
        check(st["precondition_failed"] >= 1,
              "no retried write met If-None-Match: %s" % st)
        # (the phrase of the settled write, not the summary's "late
        # records ... already written": this input mixes dated keys with
        # an undated file, whose arrival is its mtime, today)
        check(p.stderr.count("is already written (an earlier attempt") ==
              st["precondition_failed"],
              "each 412 should be settled by HEAD:\n%s" % p.stderr[-3000:])
        check(st["open_uploads"] == 0, "unfinished uploads: %s" % st)
        n = exact(ws, s3)
        print("  %d records exactly once; %d answers lost, %d writes met "
              "If-None-Match" % (n, st["injected"]["lost_reply"],
                                 st["precondition_failed"]))
    finally:
        s3.close()
        ws.cleanup()


def test_faults_bucket_to_bucket():
    ws = Workspace("s3faults")
    s3 = S3Server(["src", "dst"])
    try:
        ws.generate(objects=40, records=9000, seed=37)
        s3.upload_tree("src", ws.inp)
        config(ws, "s3", extra="    max_object_bytes: 12MiB\n",
               src_extra="      read_chunk_bytes: 64KiB\n")
        s3.faults(0.10, ["503", "500", "reset", "truncate"], seed=5,
                  complete_error_rate=0.3)
        p = run(ws, s3)
        st = s3.stats()
        s3.faults(0, [])
        inj = st["injected"]
        check(sum(inj.values()) >= 15 and len(inj) == 5,
              "too few faults injected: %s (requests %s)" % (inj,
                                                              st["counts"]))
        n = exact(ws, s3)
        print("  %d records exactly once through faults %s; retries logged: "
              "%d" % (n, inj, p.stderr.count("retrying") +
                      p.stderr.count("HTTP 5")))
    finally:
        s3.close()
        ws.cleanup()


def last_line(err):
    """The last log line of a run, for the history a failure prints."""
    lines = [x for x in err.splitlines() if x.strip()]
    return lines[-1][:300] if lines else "(no output)"


def keep_log(ws, n, err):
    """With SKIPPR_KEEP set, run n's log is kept in the workspace."""
    if os.environ.get("SKIPPR_KEEP"):
        with open(os.path.join(ws.root, "run%03d.log" % n), "w") as f:
            f.write(err)


def kill_test(source):
    seed = int(os.environ.get("SKIPPR_CRASH_SEED", random.randrange(1 << 30)))
    rng = random.Random(seed)
    print("  %s -> bucket, seed %d" % (source, seed))
    ws = Workspace("s3kill")
    s3 = S3Server(["src", "dst"])
    try:
        # One record per line: no record spans lines, so none goes to a
        # .json object beside the partition's .jsonl ones.
        ws.generate(objects=10, records=5000, seed=41, framing="lines")
        s3.upload_tree("src", ws.inp)
        # One partition (no record has 'none'), cut into 6 MiB objects:
        # every object is a two-part multipart upload.
        # A WAL budget of 2 MiB holds 1 MiB of tails: the rest of each
        # growing object's bytes that no part holds go to staging pieces.
        config(ws, source, extra="    max_object_bytes: 6MiB\n"
                                 "    commit_interval_ms: 0\n"
                                 "    wal_disk_budget: 2MiB\n",
               src_extra="      read_chunk_bytes: 256KiB\n", namespace="none")
        # Objects grow as multipart uploads while their slice is open; the
        # kills come at s3_test.KILL_POINTS.
        # First a kill certainly mid-multipart: after the first 5 MiB
        # part was uploaded, before anything recorded it.
        s3.reset_stats()
        p = run(ws, s3, env={"SKIPPR_CRASH": "part_put:1"}, check_rc=False)
        check(p.returncode == -signal.SIGKILL, "no mid-multipart kill")
        check(s3.stats()["open_uploads"] == 1, "no upload left open: %s" %
              s3.stats())
        kills, runs, next_id, staged = 1, 1, 10_000_000, 0
        clock = KillClock(1.5)
        history = []
        while kills < KILLS and runs < 10 * KILLS:
            runs += 1
            if rng.random() < 0.7:
                add_batch(ws, s3, rng, runs, next_id)
                next_id += 10_000_000
            if rng.random() < 0.7:
                env = {"SKIPPR_CRASH": random_crash(rng)}
                t0 = time.monotonic()
                p = run(ws, s3, env=env, check_rc=False)
                rc, label = p.returncode, env["SKIPPR_CRASH"]
                if rc == 0:
                    clock.ended(time.monotonic() - t0)
            else:
                e = dict(os.environ)
                e.update(s3.env())
                proc = subprocess.Popen([SKIPPRD, "sync", "-p", "p", "--once",
                                         "-c", ws.config], env=e,
                                        stdout=subprocess.PIPE,
                                        stderr=subprocess.PIPE)
                err, delay = clock.kill(proc, rng)
                rc, label = proc.returncode, "after %.2fs" % delay
                p = subprocess.CompletedProcess([], rc, "", err.decode())
            history.append("run %d (%s): exit %d; %s" % (
                runs, label, rc, last_line(p.stderr)))
            keep_log(ws, runs, p.stderr)
            m = re.search(r"pieces_staged=(\d+)", p.stderr)
            staged += int(m.group(1)) if m else 0
            if rc == -signal.SIGKILL:
                kills += 1
            elif rc != 0:
                raise AssertionError("run %d (%s) failed (exit %d): %s" % (
                    runs, label, rc, p.stderr[-2000:]))
        check(kills >= KILLS, "only %d kills" % kills)
        keep_log(ws, runs + 1, run(ws, s3).stderr)
        n = exact(ws, s3, dict(TRANSFORM, namespace_fields="none"),
                  history)
        uploads = s3.client.list_multipart_uploads(Bucket="dst")
        check(not uploads.get("Uploads"), "orphaned uploads: %s" %
              uploads.get("Uploads"))
        left = s3.objects("dst", "skippr-staging/")
        check(not left, "staging pieces left: %s" % sorted(left)[:5])
        check(staged > 0, "no tail went to a staging piece")
        aborted = s3.stats()["counts"].get("abort_multipart", 0)
        check(aborted >= 1, "the orphaned upload was never aborted")
        print("  %d kills over %d runs; %d records exactly once; %d "
              "orphaned uploads aborted, none left; %d staging pieces in "
              "the runs that ended, none left" % (kills, runs, n, aborted,
                                                  staged))
    finally:
        s3.close()
        ws.cleanup()


def test_kill_nine_bucket_to_bucket():
    kill_test("s3")


def test_kill_nine_file_to_bucket():
    kill_test("file")


def copy_case(name, objects=10, memory="256MiB"):
    """A workspace whose one partition grows in 16 MiB parts under a 2 MiB
    WAL budget: the tail that no part holds goes to a staging piece of
    several MiB, which becomes a part with UploadPartCopy (at the finish;
    and, when the memory budget is below a part, while the object grows:
    memory lets go of the tail, and the next part starts with the
    piece)."""
    ws = Workspace(name)
    ws.generate(objects=objects, records=20000, seed=41, framing="lines")
    # Commits by input bytes only (every 16 MB), not by the clock: how
    # big a tail is at a commit must not depend on the machine's speed.
    config(ws, "file", part_size="16MiB", namespace="none",
           extra="    max_object_bytes: 40MiB\n    wal_disk_budget: 2MiB\n"
                 "    commit_interval_ms: 3600000\n"
                 "    memory_budget: %s\n" % memory)
    return ws


def counter(p, name):
    m = re.findall(r"\b%s=(\d+)" % name, p.stderr)
    return int(m[-1]) if m else 0


def nothing_left(ws, s3):
    """The output is exact and nothing else is left; then the bucket is
    emptied and the workspace goes, for the next case."""
    n = exact(ws, s3, dict(TRANSFORM, namespace_fields="none"))
    left = s3.objects("dst", "skippr-staging/")
    check(not left, "staging pieces left: %s" % sorted(left)[:5])
    check(s3.stats()["open_uploads"] == 0, "unfinished uploads: %s" %
          s3.stats())
    for key in s3.objects("dst"):
        s3.client.delete_object(Bucket="dst", Key=key)
    ws.cleanup()
    return n


def test_late_part_is_uploaded_again():
    """A request of a crashed run can land after the run that took over
    has uploaded the same part number: the part then holds other bytes.
    The Complete's CRC32C catches it (400 BadDigest, as S3 answers); the
    parts past the recorded ones (here the last part, written when the
    slice was sealed) are uploaded again and the Complete goes through,
    with nothing written wrong."""
    s3 = S3Server(["dst"])
    try:
        for late in (False, True):
            ws = Workspace("s3late")
            ws.generate(objects=4, records=20000, seed=31, plain="")
            config(ws, "file", namespace="none")
            s3.reset_stats()
            if late:
                # The last part is written again with other bytes once
                # it has been answered.
                s3.faults(0, ["late_part"], only=["upload_part"], nth=parts)
            p = run(ws, s3)
            st = s3.stats()
            s3.faults(0, [])
            if not late:
                parts = st["counts"]["upload_part"]
            n = nothing_left(ws, s3)
        check(st["injected"].get("late_part") == 1, "no late part: %s" % st)
        check(st["checksums"]["mismatched"] == 1 and
              "BadDigest" in p.stderr and
              st["counts"]["upload_part"] == parts + 1,
              "the late part was not caught and uploaded again: %s\n%s" %
              (st, p.stderr[-2000:]))
        print("  %d records exactly once; a part overwritten after its "
              "answer was refused at the Complete and uploaded again" % n)
    finally:
        s3.close()


def test_staged_pieces_become_parts_by_copy():
    """A staging piece of 5 MiB or more becomes its object's part inside
    S3 (UploadPartCopy): its bytes are not read back. A copy that fails
    once is retried; a kill just before the copy and one after it (before
    the Complete) resume exactly; a server without UploadPartCopy (501)
    gets the piece read back and uploaded, with one warning."""
    s3 = S3Server(["dst"])
    try:
        ws = copy_case("s3copy")
        s3.faults(0, ["500"], only=["upload_part_copy"], nth=1)
        p = run(ws, s3)
        st = s3.stats()
        s3.faults(0, [])
        check(st["injected"].get("500") == 1, "no copy failed: %s" % st)
        check(st["copied"]["parts"] >= 1 and counter(p, "parts_copied") ==
              st["copied"]["parts"] and
              st["counts"]["upload_part_copy"] == st["copied"]["parts"] + 1,
              "no piece was copied: %s\n%s" % (st, p.stderr[-1500:]))
        check(counter(p, "pieces_staged") >= 1, p.stderr[-1500:])
        check(st["counts"].get("get", 0) == 0,
              "pieces were read back: %s" % st["counts"])
        n = nothing_left(ws, s3)
        print("  %d records exactly once; %d pieces staged, %d copied "
              "(%.1f MB), none read back, one copy failure retried" % (
                  n, counter(p, "pieces_staged"), counter(p, "parts_copied"),
                  st["copied"]["bytes"] / 1e6))

        ws = copy_case("s3copykill", objects=20, memory="8MiB")
        for point in ("stage_copy:1", "stage_copy:3", "grow_commit:1"):
            p = run(ws, s3, env={"SKIPPR_CRASH": point}, check_rc=False)
            check(p.returncode == -signal.SIGKILL, "no kill at %s: %s" % (
                point, p.stderr[-1500:]))
        check(s3.stats()["open_uploads"] >= 1, "no upload left open")
        p = run(ws, s3)
        n = nothing_left(ws, s3)
        print("  killed before copies and before a Complete: %d records "
              "exactly once" % n)

        ws = copy_case("s3nocopy")
        s3.reset_stats()
        s3.faults(0, ["501"], only=["upload_part_copy"], nth=1, persist=True)
        p = run(ws, s3)
        st = s3.stats()
        s3.faults(0, [])
        check(st["copied"]["parts"] == 0 and st["counts"].get("get", 0) >= 1,
              "the piece was not read back: %s" % st)
        warned = [ln for ln in p.stderr.splitlines()
                  if "does not copy parts" in ln]
        check(len(warned) == 1, p.stderr[-1500:])
        n = nothing_left(ws, s3)
        print("  without UploadPartCopy: %d records exactly once; %s" % (
            n, warned[0].split("warning: ", 1)[-1]))
    finally:
        s3.close()


def test_errors_are_one_clear_line():
    """A missing bucket, bad credentials and an unreachable endpoint: each
    stops the run with exit 1 and one error line that names the cause,
    and nothing is written."""
    ws = Workspace("s3errors")
    s3 = S3Server(["dst"])
    try:
        ws.generate(objects=1, records=10, seed=1)
        config(ws, "s3", src_extra="      max_attempts: 3\n")
        # One line per problem, each naming the endpoint and what to do:
        # the preflight reaches the source and the sink before anything
        # is read.
        cases = [
            ("missing bucket", {},
             [["S3 source (data_sources.a)", "NoSuchBucket", "s3://src/",
               "create it, or fix s3_bucket"]]),
            # s3rver checks the key id, not the signature's secret.
            ("bad credentials", {"AWS_ACCESS_KEY_ID": "AKIANOTAKEY"},
             [["S3 source (data_sources.a)", "InvalidAccessKeyId",
               "fix the credentials"],
              ["S3 sink (data_sinks.b)", "InvalidAccessKeyId",
               "fix the credentials"]]),
            ("unreachable endpoint",
             {"AWS_ENDPOINT_URL": "http://127.0.0.1:9"},
             [["S3 source (data_sources.a)", "giving up after", "127.0.0.1:9"],
              ["S3 sink (data_sinks.b)", "giving up after", "127.0.0.1:9"]]),
        ]
        for name, env, wants in cases:
            if name == "bad credentials":
                s3.client.create_bucket(Bucket="src")
                s3.upload_tree("src", ws.inp)
            start = time.time()
            p = run(ws, s3, env=env, check_rc=False)
            errors = [ln for ln in p.stderr.splitlines() if " error: " in ln]
            check(p.returncode == 1, "%s: exit %d" % (name, p.returncode))
            check(len(errors) == len(wants) and
                  all(all(w in e for w in want)
                      for e, want in zip(errors, wants)),
                  "%s: want %d error lines with %s:\n%s" % (
                      name, len(wants), wants, p.stderr))
            check(time.time() - start < 30, "%s: not at once" % name)
            check(not s3.objects("dst"), "%s: something was written" % name)
            print("  %s: %s" % (name, errors[0].split(" error: ", 1)[1]))
    finally:
        s3.close()
        ws.cleanup()


if __name__ == "__main__":
    main([test_faults_bucket_to_bucket, test_multipart_file_to_bucket,
          test_lost_answers_are_not_written_twice,
          test_kill_nine_bucket_to_bucket, test_kill_nine_file_to_bucket,
          test_staged_pieces_become_parts_by_copy,
          test_late_part_is_uploaded_again,
          test_errors_are_one_clear_line])
