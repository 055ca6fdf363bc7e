#!/usr/bin/env python3
"""State off the box (skipprd_el_storage_mode: s3), against s3rver behind
the test proxy, which enforces If-None-Match and If-Match as AWS does.

- Kills: 30 or more kill -9s of a bucket -> bucket copy, each followed by
  deleting the whole local state folder before the restart (a Spot box
  replaced with an empty disk): the output is exactly the input, nothing
  lost or duplicated, and no multipart upload is left open.
- A second process started while the first holds the lease exits 3 with a
  message naming the holder, and changes nothing.
- After the holder is killed, a new process takes the state over within
  the lease's length, and finishes the copy exactly.
- A pipeline that ran with local state keeps its progress when it moves to
  s3 mode: the first run stores the folder's state, and the next run,
  from an empty folder, skips every unit.
- The shard count changes with the state in the bucket: 2 shards, then 3
  on empty disks, which take over what the 2 finished (nothing copied
  twice); a run of the old count is then refused.
- A ledger run larger than part_size is stored by parts (a PutObject
  takes at most 5 GiB), and restored.
"""
import json
import os
import random
import re
import shutil
import signal
import subprocess
import time

from s3_test import S3Server, add_batch, random_crash
from skippr_test import (SKIPPRD, KillClock, Workspace, check,
                         expected_records, main, trials)

SINK_PREFIX = "out/"
KILLS = int(os.environ.get("SKIPPR_STATE_KILLS", trials(30)))
LEASE = 6  # seconds: short, so that takeovers are quick to show


def config(ws, mode="s3", extra=""):
    text = """skippr:
  workspace: w
  skipprd_el_storage_mode: %s
%s  state_dir: %s
pipelines:
  p:
    type: copy
    data_source: data_sources.a
    data_sink: data_sinks.b
    buffer_threshold_seconds: 86400
    max_object_bytes: 6MiB
    commit_interval_ms: 0
    wal_disk_budget: 2MiB
%s    transform:
      namespace_fields: none
      batch_time_fields: timestamp
      batch_time_unit: month
data_sources:
  a:
    S3:
      s3_bucket: src
      s3_prefix: ill-just-dump-this-here
      read_chunk_bytes: 256KiB
data_sinks:
  b:
    S3:
      s3_bucket: dst
      s3_prefix: out
      part_size: 5MiB
  state:
    S3:
      s3_bucket: state
      s3_prefix: skippr-state
""" % (mode, ("  state_store: data_sinks.state\n  state_lease_seconds: %d\n"
              % LEASE) if mode == "s3" else "", ws.state, extra)
    with open(ws.config, "w") as f:
        f.write(text)


def exact(ws, s3):
    want = expected_records(ws.inp, transform={
        "namespace_fields": "none", "batch_time_fields": "timestamp",
        "batch_time_unit": "month"})
    got = s3.records("dst", SINK_PREFIX)
    lost, extra = want - got, got - want
    check(not lost and not extra, "%d lost, %d extra of %d" % (
        sum(lost.values()), sum(extra.values()), sum(want.values())))
    return sum(want.values())


def start(ws, s3, env=None, once=True):
    e = dict(os.environ)
    e.update(s3.env())
    e.update(env or {})
    return subprocess.Popen([SKIPPRD, "sync", "-p", "p", "-c", ws.config] +
                            (["--once"] if once else []), env=e,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)


def lose_the_box(ws):
    """The replacement box starts with an empty disk."""
    shutil.rmtree(ws.state, ignore_errors=True)


def bucket_case(name, objects, records, seed, extra=""):
    """A workspace and s3rver with src, dst and state buckets; objects
    generated into src; the config in s3 mode. Returns (ws, s3)."""
    ws = Workspace(name)
    s3 = S3Server(["src", "dst", "state"])
    ws.generate(objects=objects, records=records, seed=seed,
                framing="lines")
    s3.upload_tree("src", ws.inp)
    config(ws, extra=extra)
    return ws, s3


def test_kills_with_the_state_folder_deleted():
    seed = int(os.environ.get("SKIPPR_CRASH_SEED", random.randrange(1 << 30)))
    rng = random.Random(seed)
    print("  seed %d" % seed)
    ws, s3 = bucket_case("s3state", 10, 5000, 41)
    try:
        kills, runs, next_id, restored = 0, 0, 10_000_000, 0
        clock = KillClock(1.0)
        while kills < KILLS and runs < 8 * KILLS:
            runs += 1
            if rng.random() < 0.8:  # new objects keep runs busy
                add_batch(ws, s3, rng, runs, next_id)
                next_id += 10_000_000
            env = {}
            t0 = time.monotonic()
            if rng.random() < 0.6:
                env["SKIPPR_CRASH"] = random_crash(rng)
                p = start(ws, s3, env)
                _, err = p.communicate(timeout=300)
                label = env["SKIPPR_CRASH"]
                if p.returncode == 0:
                    clock.ended(time.monotonic() - t0)
            else:
                p = start(ws, s3)
                err, delay = clock.kill(p, rng)
                label = "after %.2fs" % delay
            restored += "restored (" in err
            if p.returncode == -signal.SIGKILL:
                kills += 1
            elif p.returncode != 0:
                raise AssertionError("run %d (%s) failed (exit %d): %s" % (
                    runs, label, p.returncode, err[-2000:]))
            lose_the_box(ws)
            # The killed holder's lease must lapse before the next run can
            # take it: that wait is the takeover, 6 s each time. Mark it
            # released instead (as a clean stop would), to keep the test
            # short; test_takeover_after_a_kill shows the lapse itself.
            if p.returncode == -signal.SIGKILL:
                s3.client.put_object(Bucket="state",
                                     Key="skippr-state/w/p/lease",
                                     Body=b"skippr lease\nreleased by test\n")
        check(kills >= KILLS, "only %d kills in %d runs" % (kills, runs))
        p = start(ws, s3)
        _, err = p.communicate(timeout=600)
        check(p.returncode == 0, "final run failed: %s" % err[-2000:])
        n = exact(ws, s3)
        uploads = s3.client.list_multipart_uploads(Bucket="dst")
        check(not uploads.get("Uploads"), "orphaned uploads: %s" %
              uploads.get("Uploads"))
        check(restored > 0, "no run restored its state from the store")
        print("  %d kills over %d runs, the state folder deleted after "
              "each; %d runs restored from the store; %d records exactly "
              "once" % (kills, runs, restored, n))
    finally:
        s3.close()
        ws.cleanup()


def test_second_process_refused_then_takeover_after_a_kill():
    ws, s3 = bucket_case("s3lease", 10, 5000, 43,
                         extra="    poll_interval_seconds: 1\n")
    first = None
    try:
        # The holder runs continuously: it is alive until killed.
        first = start(ws, s3, once=False)
        time.sleep(3)
        if first.poll() is not None:
            check(False, "the holder ended early: %s" %
                  first.communicate()[1][-2000:])
        t0 = time.monotonic()
        second = start(ws, s3)
        _, err = second.communicate(timeout=60)
        waited = time.monotonic() - t0
        check(second.returncode == 3, "second process: exit %d, %s" % (
            second.returncode, err[-1500:]))
        line = [x for x in err.splitlines() if "leased to" in x and
                "renewed it just now" in x]
        check(line, "no clear message: %s" % err[-1500:])
        check(waited < LEASE, "the refusal took %.1f s" % waited)
        print("  refused in %.1f s: %s" % (waited, line[0][:200]))
        first.send_signal(signal.SIGKILL)
        first.communicate(timeout=60)
        killed_at = time.monotonic()
        third = start(ws, s3)
        _, err = third.communicate(timeout=600)
        check(third.returncode == 0, "takeover run failed: %s" % err[-2000:])
        took = [x for x in err.splitlines() if "took over the lease" in x]
        check(took, "no takeover logged: %s" % err[-1500:])
        m = re.search(r"not renewed for (\d+) s", took[0])
        check(m and int(m.group(1)) <= LEASE + 1,
              "takeover after %s s" % (m.group(1) if m else "?"))
        total = time.monotonic() - killed_at
        n = exact(ws, s3)
        print("  after the kill, taken over at %s s (lease %d s); the "
              "run finished %.1f s after the kill; %d records exactly once"
              % (m.group(1), LEASE, total, n))
    finally:
        if first and first.poll() is None:
            first.kill()
            first.communicate()
        s3.close()
        ws.cleanup()


def test_local_state_moves_to_the_store():
    ws, s3 = bucket_case("s3move", 6, 2000, 45)
    try:
        config(ws, mode="local")
        p = start(ws, s3)
        _, err = p.communicate(timeout=300)
        check(p.returncode == 0, "local run failed: %s" % err[-2000:])
        config(ws)
        p = start(ws, s3)
        _, err = p.communicate(timeout=300)
        check(p.returncode == 0, "first s3 run failed: %s" % err[-2000:])
        check("stored for the first time" in err, "not stored: %s" %
              err[-1500:])
        lose_the_box(ws)
        p = start(ws, s3)
        _, err = p.communicate(timeout=300)
        check(p.returncode == 0, "run from the store failed: %s" %
              err[-2000:])
        m = re.search(r"done: (\d+) units copied, (\d+) already done", err)
        check(m and m.group(1) == "0" and int(m.group(2)) >= 6,
              "units copied again: %s" % (m.group(0) if m else err[-1500:]))
        n = exact(ws, s3)
        keys = sorted(s3.objects("state", "skippr-state/w/p/"))
        print("  %s; %d records exactly once; the store holds %s" % (
            m.group(0), n, ", ".join(k.split("/p/", 1)[1] for k in keys)))
    finally:
        s3.close()
        ws.cleanup()


def sync_shard(ws, s3, shard):
    e = dict(os.environ)
    e.update(s3.env())
    p = subprocess.run([SKIPPRD, "sync", "-p", "p", "--once", "-c",
                        ws.config, "--shard", shard], env=e,
                       capture_output=True, text=True, timeout=300)
    return p


def test_shard_count_changes_with_the_state_in_the_bucket():
    ws, s3 = bucket_case("s3reshard", 12, 2000, 47)
    try:
        for i in range(2):
            p = sync_shard(ws, s3, "%d/2" % i)
            check(p.returncode == 0, "shard %d/2: %s" % (i, p.stderr[-2000:]))
        add_batch(ws, s3, random.Random(5), 1, 10_000_000)
        lose_the_box(ws)
        took, copied = 0, 0
        for i in range(3):
            p = sync_shard(ws, s3, "%d/3" % i)
            check(p.returncode == 0, "shard %d/3: %s" % (i, p.stderr[-2000:]))
            m = re.search(r"took over (\d+) finished units", p.stderr)
            check(m, "shard %d/3 took nothing over: %s" % (i,
                                                          p.stderr[-1500:]))
            took += int(m.group(1))
            copied += int(re.search(r"done: (\d+) units copied",
                                    p.stderr).group(1))
        check(took == 12, "took over %d units of the 12 done" % took)
        check(copied == 2, "copied %d units, not the 2 new ones" % copied)
        n = exact(ws, s3)
        lose_the_box(ws)
        p = sync_shard(ws, s3, "0/2")
        check(p.returncode == 1 and "was taken over" in p.stderr,
              "the old count ran again: exit %d, %s" % (p.returncode,
                                                       p.stderr[-1500:]))
        print("  2 shards, then 3 on empty disks: %d finished units taken "
              "over, %d new copied, %d records exactly once; the old "
              "count refused" % (took, copied, n))
    finally:
        s3.close()
        ws.cleanup()


def verify(ws, s3, *args):
    e = dict(os.environ)
    e.update(s3.env())
    return subprocess.run([SKIPPRD, "verify", "-p", "p", "-c", ws.config,
                           *args], env=e, capture_output=True, text=True,
                          timeout=300)


def verify_shards(ws, s3, n):
    """Each shard's verify on a box of its own (an empty disk): its
    digests go to the state's bucket."""
    for i in range(n):
        lose_the_box(ws)
        p = verify(ws, s3, "--shard", "%d/%d" % (i, n))
        check(p.returncode == 0 and "stored" in p.stdout,
              "verify shard %d/%d: %s%s" % (i, n, p.stdout, p.stderr[-1500:]))


def test_sharded_verify_meets_in_the_bucket():
    """An Indexed Job's verify: each shard reads its share on its own box
    and stores its digests in the state's bucket; the merge, on yet
    another box, compares them as one verify would."""
    ws, s3 = bucket_case("s3verifyshards", 12, 500, 48)
    try:
        for i in range(3):
            p = sync_shard(ws, s3, "%d/3" % i)
            check(p.returncode == 0, "shard %d/3: %s" % (i, p.stderr[-2000:]))
        n = exact(ws, s3)
        lose_the_box(ws)
        p = verify(ws, s3, "--merge-shards", "3")
        check(p.returncode == 1 and "(0, 1, 2)" in p.stderr,
              "merge before the shards: %d %s" % (p.returncode, p.stderr))
        verify_shards(ws, s3, 3)
        stored = sorted(s3.objects("state", "skippr-state/w/p.verify-shards/"))
        check(len(stored) == 3, "stored: %s" % stored)
        lose_the_box(ws)
        p = verify(ws, s3, "--merge-shards", "3", "--json")
        j = json.loads(p.stdout)
        check(p.returncode == 0 and j["clean"] and
              j["source"]["records"]["records"] == n ==
              j["sink"]["records"]["records"] and
              j["source"]["units"] == 12, "merge: %s%s" % (p.stdout,
                                                            p.stderr))
        key = sorted(k for k in s3.objects("dst", "out/")
                     if k.endswith(".jsonl"))[0]
        s3.client.delete_object(Bucket="dst", Key=key)
        verify_shards(ws, s3, 3)
        p = verify(ws, s3, "--merge-shards", "3")
        part = key[len("out/"):].rsplit("/", 1)[0]
        check(p.returncode == 6 and part in p.stdout and
              "not named by a merge" in p.stdout, "after a deletion: %s"
              % p.stdout)
        print("  3 shards' verifies, each on an empty disk, merged: clean "
              "with %d records; a deleted object found in %s" % (n, part))
    finally:
        s3.close()
        ws.cleanup()


def test_big_ledger_runs_stored_by_parts():
    """A ledger run larger than part_size is stored as a multipart
    upload (one PutObject takes at most 5 GiB, and a billion units make
    runs of tens of GB): here 300,000 units of the bench's Synth source
    against a proxy that refuses a PutObject over 6 MiB. The next run,
    from an empty folder, restores the state and skips every unit."""
    synth = os.path.join(os.path.dirname(os.path.dirname(
        os.path.abspath(SKIPPRD))), "bench", "plugins")
    ws = Workspace("s3bigrun")
    s3 = S3Server(["state"])
    try:
        with open(ws.config, "w") as f:
            f.write("""skippr:
  workspace: w
  skipprd_el_storage_mode: s3
  state_store: data_sinks.state
  state_dir: %s
  plugin_dirs: [%s]
pipelines:
  p:
    data_source: data_sources.a
    data_sink: data_sinks.b
data_sources:
  a:
    Synth:
      units: 300000
data_sinks:
  b:
    File:
      path: %s
  state:
    S3:
      s3_bucket: state
      part_size: 5MiB
""" % (ws.state, synth, ws.out))
        s3.faults(0, [], max_put_bytes=6 << 20)
        s3.reset_stats()
        p = start(ws, s3)
        _, err = p.communicate(timeout=600)
        check(p.returncode == 0, "first run: exit %d: %s" % (p.returncode,
                                                              err[-2000:]))
        st = s3.stats()["counts"]
        runs = {k: len(v) for k, v in s3.objects("state").items()
                if "/ledger.d/" in k}
        big = max(runs.values())
        check(big > 6 << 20 and st.get("create_multipart", 0) >= 1 and
              st.get("complete_multipart") == st.get("create_multipart"),
              "no run stored by parts: runs %s, requests %s" % (runs, st))
        lose_the_box(ws)
        p = start(ws, s3)
        _, err = p.communicate(timeout=600)
        check(p.returncode == 0 and
              "0 units copied, 300000 already done" in err,
              "the restored state did not skip every unit: %s" % err[-2000:])
        print("  300,000 units; the largest ledger run, %.1f MB, stored in "
              "%d parts under a 6 MiB PutObject limit; restored on an empty "
              "disk, every unit skipped" % (big / 1e6, st["upload_part"]))
    finally:
        s3.faults(0, [])
        s3.close()
        ws.cleanup()


if __name__ == "__main__":
    main([test_kills_with_the_state_folder_deleted,
          test_second_process_refused_then_takeover_after_a_kill,
          test_local_state_moves_to_the_store,
          test_shard_count_changes_with_the_state_in_the_bucket,
          test_sharded_verify_meets_in_the_bucket,
          test_big_ledger_runs_stored_by_parts])
