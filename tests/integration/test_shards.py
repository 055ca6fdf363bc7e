#!/usr/bin/env python3
"""Shards (--shard I/N): four processes on one box, each with its own
state, copy one archive at once and are SIGKILLed at random times and
started again; the union of their output is the input multiset, and no
record is in two shards' objects. Then the count changes (4 -> 2): the new
shards take over what the old ones finished and copy only what is new,
an old shard is refused from then on, and a change while an old shard is
unfinished is refused with what to do. --shards N takes the index from
JOB_COMPLETION_INDEX (a Kubernetes Indexed Job).
"""
import os
import random
import re
import signal
import subprocess
import sys
import time

from skippr_test import (GEN, SKIPPRD, Workspace, assert_exact, check,
                         expected_records, frame, main, run, run_seed)

PIPE = "gdpr_compliant_migration"


def shard_args(ws, spec):
    return [SKIPPRD, "sync", "--pipeline", PIPE, "--config", ws.config,
            "--once", "-q", "--shard", spec]


def add(ws, seed, first_id, n=6, records=300):
    subprocess.run([sys.executable, GEN, ws.inp, "--objects", str(n),
                    "--records", str(records), "--seed", str(seed),
                    "--first-id", str(first_id)], check=True,
                   stdout=subprocess.DEVNULL)


def objects_by_state(ws):
    """Output records per state id (each shard's objects carry its own)."""
    by = {}
    for dirpath, _, files in os.walk(ws.sink_root):
        for fn in files:
            m = re.search(r"-([0-9a-f]{16})-\d+\.jsonl?$", fn)
            if not m:
                continue
            with open(os.path.join(dirpath, fn), "rb") as f:
                by.setdefault(m.group(1), []).append(f.read())
    return by


def test_four_shards_under_kills():
    seed = run_seed()
    rng = random.Random(seed)
    print("  seed %d (--seed %d reproduces)" % (seed, seed))
    ws = Workspace("shards")
    try:
        add(ws, rng.randrange(1 << 30), 0, n=40, records=1500)
        ws.write_config(pipeline_extra={"max_object_bytes": "32KiB",
                                        "commit_interval_ms": 0})
        kills, rnd = 0, 0
        while (kills < 12 or rnd < 8) and rnd < 40:
            rnd += 1
            add(ws, rng.randrange(1 << 30), rnd * 1000000, n=12, records=800)
            procs = [subprocess.Popen(shard_args(ws, "%d/4" % i),
                                      stdout=subprocess.DEVNULL,
                                      stderr=subprocess.PIPE)
                     for i in range(4)]
            time.sleep(rng.uniform(0.02, 0.4))
            for p in procs:
                if p.poll() is None and rng.random() < 0.7:
                    p.send_signal(signal.SIGKILL)
            for p in procs:
                _, err = p.communicate(timeout=300)
                if p.returncode == -signal.SIGKILL:
                    kills += 1
                else:
                    check(p.returncode == 0, "shard failed: %s" %
                          err.decode()[-2000:])
        check(kills >= 12, "only %d kills in %d rounds" % (kills, rnd))
        for i in range(4):
            p = subprocess.run(shard_args(ws, "%d/4" % i),
                               stderr=subprocess.PIPE, timeout=300)
            check(p.returncode == 0, p.stderr.decode()[-2000:])
        n = assert_exact(ws)
        # Each shard's objects hold its folders only: a record that is
        # once in the input is in one shard's objects, four state ids in
        # all.
        states = sorted(os.listdir(os.path.join(ws.state, "test")))
        check(states == ["%s.shard-%d-of-4" % (PIPE, i) for i in range(4)],
              "state folders: %s" % states)
        by = objects_by_state(ws)
        check(len(by) == 4, "objects from %d state ids, not 4" % len(by))
        unique = {raw for (_, raw), c in expected_records(ws.inp).items()
                  if c == 1}
        owner = {}
        for sid, blobs in by.items():
            for b in blobs:
                for raw, _ in frame(b):
                    check(raw not in unique or
                          owner.setdefault(raw, sid) == sid,
                          "a record in two shards' objects")
        check(len(owner) == len(unique), "unique records not all seen")
        print("  4 shards, %d kills: %d records exactly once" % (kills, n))

        # 4 -> 2: the new count takes over; nothing is copied twice.
        add(ws, rng.randrange(1 << 30), 90000000, n=4)
        for i in range(2):
            p = run(["sync", "--pipeline", PIPE, "--config", ws.config,
                     "--once", "--shards", "2"],
                    env={"JOB_COMPLETION_INDEX": str(i)})
            check("took over" in p.err, p.err)
        assert_exact(ws)
        p = run(["sync", "--pipeline", PIPE, "--config", ws.config,
                 "--once", "--shard", "1/4"], check_rc=False)
        check(p.returncode != 0 and "taken over" in p.err,
              "an old shard ran again: %d %s" % (p.returncode, p.err))
        assert_exact(ws)
        print("  4 -> 2 shards: exact; the old count refused afterwards")
    finally:
        ws.cleanup()


def test_change_refused_while_unfinished():
    ws = Workspace("shards-unfinished")
    try:
        add(ws, 5, 0, n=20)
        ws.write_config(pipeline_extra={"commit_interval_ms": 0})
        # A shard of 2 killed part-way (at its Nth read): unfinished.
        unfinished = None
        for i in range(2):
            for n in range(2, 40):
                p = subprocess.run(
                    shard_args(ws, "%d/2" % i), stderr=subprocess.PIPE,
                    env=dict(os.environ, SKIPPR_CRASH="read:%d" % n))
                if p.returncode != -signal.SIGKILL:
                    break
                st = run(["status", "--pipeline", PIPE, "--config",
                          ws.config, "--shard", "%d/2" % i]).out
                if "units partial:   0" not in st or \
                        "slices open:     0" not in st:
                    unfinished = i
                    break
            if unfinished is not None:
                break
        check(unfinished is not None, "no shard of 2 was left unfinished")
        p = run(["sync", "--pipeline", PIPE, "--config", ws.config,
                 "--once", "--shard", "0/3"], check_rc=False)
        check(p.returncode != 0 and "run every old shard to the end" in
              p.err, "change of count not refused: %s" % p.err)
        # Finished, the same change goes through and is exact.
        for i in range(2):
            run(["sync", "--pipeline", PIPE, "--config", ws.config, "--once",
                 "--shard", "%d/2" % i])
        for i in range(3):
            run(["sync", "--pipeline", PIPE, "--config", ws.config, "--once",
                 "--shard", "%d/3" % i])
        assert_exact(ws)
        p = run(["sync", "--pipeline", PIPE, "--config", ws.config, "--once",
                 "--shards", "3"], check_rc=False)
        check(p.returncode == 2 and "JOB_COMPLETION_INDEX" in p.err, p.err)
    finally:
        ws.cleanup()


def test_kubernetes_example_validates():
    """examples/kubernetes: the ConfigMap's skippr.yml passes `skipprd
    validate`, and the Job's arguments are ones skipprd takes."""
    import yaml
    here = os.path.dirname(os.path.abspath(__file__))
    path = os.path.join(here, "..", "..", "examples", "kubernetes",
                        "indexed-job.yaml")
    with open(path) as f:
        docs = list(yaml.safe_load_all(f))
    cm = [d for d in docs if d["kind"] == "ConfigMap"][0]
    job = [d for d in docs if d["kind"] == "Job"][0]
    check(job["spec"]["completionMode"] == "Indexed", "not an Indexed Job")
    args = job["spec"]["template"]["spec"]["containers"][0]["args"]
    n = args[args.index("--shards") + 1]
    check(n == str(job["spec"]["completions"]), "--shards %s for %s pods" %
          (n, job["spec"]["completions"]))
    ws = Workspace("k8s")
    try:
        with open(ws.config, "w") as f:
            f.write(cm["data"]["skippr.yml"])
        run(["validate", "--pipeline", args[args.index("--pipeline") + 1],
             "--config", ws.config])
    finally:
        ws.cleanup()


if __name__ == "__main__":
    main([test_four_shards_under_kills, test_change_refused_while_unfinished,
          test_kubernetes_example_validates])
