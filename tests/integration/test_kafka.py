"""Kafka source and sink against a real protocol server (librdkafka's mock
cluster behind tests/tools/kafka_broker), read back with kcat.

- file -> Kafka: every record exactly once in its namespace's topic, keyed
  by its partition key, across 20 kill -9s at random moments.
- Kafka -> file: the seed's layout exactly once across 20 kill -9s; a
  second --once reads nothing new. The same through a consumer group,
  whose offsets are committed only once durable.
- Errors: brokers down, a missing topic.
"""
import collections
import json
import os
import random
import re
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from skippr_test import (SKIPPRD, SINK_PREFIX, SOURCE_PREFIX, Workspace,  # noqa: E402
                         check, compare, expected_key, main, output_records,
                         run)
from kafka_test import Broker, committed_view, consume, produce  # noqa: E402
from s3_test import S3Server  # noqa: E402

EVENT_TYPES = ["login", "logout", "purchase", "page_view", "truck_ping",
               "error", "signup"]
KILLS = 20


def kafka_config(ws, source, sink, pipeline_extra=None):
    """ws's config with the given source and sink sections (dicts)."""
    ws.write_config(pipeline_extra=pipeline_extra)
    with open(ws.config) as f:
        text = f.read()
    head = text[:text.index("data_sources:")]
    lines = [head.rstrip("\n"), "data_sources:", "  firehose_archive:"]
    for plugin, opts in [source]:
        lines.append("    %s:" % plugin)
        lines += ["      %s: %s" % kv for kv in opts.items()]
    lines += ["data_sinks:", "  tenant_layout:"]
    for plugin, opts in [sink]:
        lines.append("    %s:" % plugin)
        lines += ["      %s: %s" % kv for kv in opts.items()]
    with open(ws.config, "w") as f:
        f.write("\n".join(lines) + "\n")


def make_records(n, seed=1, days=28):
    """n JSON records (bytes) of 7 event types, 8 tenants and `days` days,
    100-250 bytes each."""
    rng = random.Random(seed)
    out = []
    for i in range(n):
        out.append(json.dumps({
            "event_type": rng.choice(EVENT_TYPES), "id": i,
            "detail": {"tenant_id": "t%d" % rng.randrange(8)},
            "timestamp": "2024-01-%02dT%02d:00:00Z" % (rng.randrange(1, days + 1),
                                                      rng.randrange(24)),
            "pad": "x" * rng.randrange(50, 200)}).encode())
    return out


def expected(records):
    return collections.Counter((expected_key(json.loads(r)), r)
                               for r in records)


def kill_runs(ws, kills, low, high, progress, env=None):
    """Run `sync` (continuously, so a run never ends by itself) `kills`
    times, each killed with SIGKILL after a random delay in [low, high) s;
    then `sync --once` to the end. The delays stretch while kills land
    before any progress (a sanitizer build starts slower), up to 4 times,
    and shrink back after: once everything is delivered nothing moves, and
    unbounded they grew past 15 s a kill. Fails if a run dies by itself,
    or if the kills did not spread over the copy: progress() (records
    delivered or durable so far) must take at least 4 values. Returns the
    progress seen after each kill."""
    rng = random.Random(7)
    seen = [progress()]
    scale = 1.0
    log = os.path.join(ws.root, "run.log")
    while len(seen) <= kills:
        with open(log, "wb") as f:
            p = subprocess.Popen([SKIPPRD, "sync", "--pipeline",
                                  "gdpr_compliant_migration", "--config",
                                  ws.config],
                                 stdout=subprocess.DEVNULL, stderr=f, env=env)
        try:
            p.wait(rng.uniform(low, high) * scale)
            with open(log, "rb") as f:
                err = f.read().decode("utf-8", "replace")[-3000:]
            check(False, "run %d ended (%d) by itself; progress %s\n%s" %
                  (len(seen), p.returncode, seen, err))
        except subprocess.TimeoutExpired:
            p.send_signal(signal.SIGKILL)
            p.wait()
        seen.append(progress())
        scale = (min(4.0, scale * 1.4) if seen[-1] == seen[-2]
                 else max(1.0, scale / 1.2))
    check(len(set(seen)) >= 4, "the kills did not spread over the copy: "
          "progress %s" % seen)
    ws.sync("--once", timeout=600, env=env)
    return seen


def kafka_out_broker():
    return Broker(dict([("out." + t, 3) for t in EVENT_TYPES] +
                       [("skippr.markers", 1)]))


def copy_to_kafka_across_kills(ws, broker, s3=None):
    """Copy 200,000 records from ws.inp on File (or, with s3, from its
    bucket my-source-bucket, where they are uploaded first) to Kafka,
    killed 20 times at random, then check what a read_committed consumer
    sees: every record once, byte-equal, in its namespace's topic, keyed
    by its partition key, each slice committed by one attempt with its
    records numbered 0..n-1. A further run writes nothing."""
    recs = make_records(200000)
    folder = os.path.join(ws.inp, SOURCE_PREFIX)
    os.makedirs(folder)
    for k in range(20):
        with open(os.path.join(folder, "part-%02d.jsonl" % k), "wb") as f:
            f.write(b"\n".join(recs[k::20]) + b"\n")
    if s3:
        s3.upload_tree("my-source-bucket", ws.inp)
    exp = expected(recs)
    source = ("File", {"path": ws.inp, "prefix": SOURCE_PREFIX})
    env = None
    if s3:
        source = ("S3", {"s3_bucket": "my-source-bucket",
                         "s3_prefix": SOURCE_PREFIX})
        env = dict(os.environ, **s3.env())
    kafka_config(ws, source, ("Kafka", {"brokers": broker.bootstrap,
                                        "topic": "out.{namespace}"}),
                 pipeline_extra={"upload_concurrency": 2,
                                 "buffer_threshold_seconds": 1})

    def delivered():
        """Transactions committed so far: their markers."""
        return len(consume(broker.bootstrap, "skippr.markers"))
    seen = kill_runs(ws, KILLS, 0.4, 1.2, delivered, env=env)
    msgs, aborted = committed_view(broker.bootstrap,
                                   ["out." + t for t in EVENT_TYPES])
    got = collections.Counter()
    for m in msgs:
        part = m["key"]
        check(m["topic"] == "out." + part.split("/")[0],
              "record of %s in topic %s" % (part, m["topic"]))
        got[(part, m["payload"])] += 1
    lost, dup, unexpected = compare(exp, got)
    check((lost, dup, unexpected) == (0, 0, 0),
          "Kafka differs: %d lost, %d duplicated, %d unexpected of %d" %
          (lost, dup, unexpected, sum(exp.values())))
    per_slice = collections.defaultdict(set)
    for m in msgs:
        per_slice[m["headers"]["skippr-slice"]].add(
            (m["headers"]["skippr-attempt"],
             int(m["headers"]["skippr-record"])))
    for sl, recs in per_slice.items():
        check(len({a for a, _ in recs}) == 1,
              "slice %s committed by several attempts" % sl)
        check(sorted(r for _, r in recs) == list(range(len(recs))),
              "slice %s records are not numbered 0..n-1" % sl)
    print("  %d records exactly once after %d kills (%d distinct progress "
          "points); %d slices; %d messages of aborted transactions hidden" %
          (sum(exp.values()), len(seen) - 1, len(set(seen)), len(per_slice),
           aborted))
    p = ws.sync("--once", env=env)
    check(" 0 records" in p.err and "0 objects written" in p.err,
          "a further run did work:\n" + p.err)


def test_file_to_kafka_exactly_once_across_kills():
    ws = Workspace("f2k")
    broker = kafka_out_broker()
    try:
        copy_to_kafka_across_kills(ws, broker)
    finally:
        broker.stop()
        ws.cleanup()


def test_s3_to_kafka_exactly_once_across_kills():
    ws = Workspace("s2k")
    broker = kafka_out_broker()
    s3 = S3Server(["my-source-bucket"])
    try:
        copy_to_kafka_across_kills(ws, broker, s3)
    finally:
        broker.stop()
        s3.close()
        ws.cleanup()


def test_kafka_to_file_exactly_once_across_kills():
    ws = Workspace("k2f")
    broker = Broker({"events": 64})
    try:
        recs = make_records(400000, seed=2)
        produce(broker.bootstrap, "events", recs)
        exp = expected(recs)
        kafka_config(ws, ("Kafka", {"brokers": broker.bootstrap,
                                    "topic": "events", "group_id": '""'}),
                     ("File", {"path": ws.out, "prefix": SINK_PREFIX}),
                     pipeline_extra={"commit_interval_ms": 20,
                                     "buffer_threshold_seconds": 1})

        def durable():
            """(records durable so far: in the WAL's open slices, as
            `skipprd status` reads them, and in written objects; records
            in written objects). The second part keeps moving while the
            WAL is written out after everything was read."""
            p = run(["status", "--pipeline", "gdpr_compliant_migration",
                     "--config", ws.config], check_rc=False)
            m = re.search(r"slices open: +\d+ \((\d+) records", p.out)
            written = 0
            for d, _, files in os.walk(ws.sink_root):
                for fn in files:
                    if not fn.startswith("."):  # a killed run's temp file
                        with open(os.path.join(d, fn), "rb") as f:
                            written += f.read().count(b"\n")
            return ((int(m.group(1)) if m else 0) + written, written)
        check(len(consume(broker.bootstrap, "events")) == len(recs),
              "the broker dropped input (its 5 MB per partition limit)")
        seen = kill_runs(ws, KILLS, 0.15, 0.5, durable)
        got = output_records(ws.sink_root)
        lost, dup, unexpected = compare(exp, got)
        check((lost, dup, unexpected) == (0, 0, 0),
              "output differs: %d lost, %d duplicated, %d unexpected of %d" %
              (lost, dup, unexpected, sum(exp.values())))
        p = ws.sync("--once")
        check(" 0 records" in p.err, "a second --once read again:\n" + p.err)
        print("  %d records exactly once after %d kills (%d distinct "
              "progress points)" % (sum(exp.values()), len(seen) - 1,
                                    len(set(seen))))
    finally:
        broker.stop()
        ws.cleanup()


def test_kafka_group_commits_durable_offsets():
    """Through a consumer group: the routing fields $key, $topic and
    $header.NAME, offsets committed to the group only for what is durable,
    and a second run that reads nothing twice."""
    ws = Workspace("kgroup")
    broker = Broker({"events": 2})
    try:
        recs = [json.dumps({"event_type": "login", "n": i,
                            "timestamp": "2024-03-0%dT10:00:00Z" % (i % 3 + 1)
                            }).encode() for i in range(3000)]
        produce(broker.bootstrap, "events", recs[:2000], key="tenant-a")
        produce(broker.bootstrap, "events", recs[2000:], key="tenant-b",
                headers=["tenant=hooli"])
        kafka_config(ws, ("Kafka", {"brokers": broker.bootstrap,
                                    "topic": "[events]", "group_id": "g1",
                                    "kafka.session.timeout.ms": 6000}),
                     ("File", {"path": ws.out, "prefix": SINK_PREFIX}))
        with open(ws.config) as f:
            text = f.read()
        text = text.replace("batch_partition_fields: detail.tenant_id,"
                            "truck.tenant_id",
                            "batch_partition_fields: $header.tenant,$key")
        text = text.replace("namespace_fields: event_type",
                            "namespace_fields: $topic")
        with open(ws.config, "w") as f:
            f.write(text)
        p = ws.sync("--once", timeout=120)
        got = collections.Counter()
        for (part, raw), n in output_records(ws.sink_root).items():
            got[raw] += n
            # One column, named after the first path's last segment.
            want = ("events/p_tenant=tenant-a/" if raw in recs[:2000] else
                    "events/p_tenant=hooli/")
            check(part.startswith(want + "p_year=2024/"),
                  "%s in partition %s" % (raw[:40], part))
        check(got == collections.Counter(recs),
              "group run: %d records out of %d" % (sum(got.values()),
                                                   len(recs)))
        # The group's committed offsets reach the end of each partition.
        out = subprocess.run(["kcat", "-b", broker.bootstrap, "-G", "g1",
                              "-C", "-e", "-q", "-f", "%o\n", "events"],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             timeout=60)
        check(out.stdout.strip() == b"",
              "a group consumer after skippr still got messages: %r" %
              out.stdout[:200])
        p = ws.sync("--once", timeout=120)
        check(" 0 records" in p.err, "a second --once read again:\n" + p.err)
    finally:
        broker.stop()
        ws.cleanup()


def group_members(broker, workspaces):
    """Configure each workspace (its own state folder) as a member of
    consumer group g reading topic events, File sink, 1 s slices."""
    for ws in workspaces:
        kafka_config(ws, ("Kafka", {"brokers": broker.bootstrap,
                                    "topic": "events", "group_id": "g",
                                    "kafka.session.timeout.ms": 6000}),
                     ("File", {"path": ws.out, "prefix": SINK_PREFIX}),
                     pipeline_extra={"buffer_threshold_seconds": 1})


def start_member(ws):
    """skipprd in continuous mode on ws's config; stderr piped."""
    return subprocess.Popen([SKIPPRD, "sync", "--pipeline",
                             "gdpr_compliant_migration", "--config",
                             ws.config], stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE)


def test_kafka_rebalance_hands_over_exactly_once():
    """Two skipprd pipelines (own state folders) in one consumer group. The
    first copies half the records and commits their offsets once durable;
    the second joins, half the partitions move to it, and it starts where
    the first left off, not at the beginning; then the rest is produced and
    the two copy it between them: every record exactly once.

    The mock cluster refuses offset commits while a rebalance is in
    progress (a real broker takes them from the current generation), so
    the handover happens while the first member is idle; a commit refused
    during a revoke is logged as such."""
    wa, wb = Workspace("kra"), Workspace("krb")
    broker = Broker({"events": 8})
    procs = []
    try:
        recs = make_records(160000, seed=8, days=2)
        half = len(recs) // 2
        produce(broker.bootstrap, "events", recs[:half])
        group_members(broker, (wa, wb))
        procs.append(start_member(wa))
        end = time.time() + 60
        while time.time() < end and \
                sum(output_records(wa.sink_root, live=True).values()) < half:
            time.sleep(0.5)
        time.sleep(3)  # its offsets reach the group
        procs.append(start_member(wb))
        time.sleep(8)  # b joins; the partitions are split
        produce(broker.bootstrap, "events", recs[half:])
        exp = expected(recs)
        end = time.time() + 90
        got = collections.Counter()
        while time.time() < end:
            time.sleep(2)
            got = (output_records(wa.sink_root, live=True) +
                   output_records(wb.sink_root, live=True))
            if sum(got.values()) >= len(recs):
                break
        for p in procs:
            p.send_signal(signal.SIGTERM)
        errs = [p.communicate(timeout=60)[1].decode() for p in procs]
        for ws in (wa, wb):  # what SIGTERM left open
            ws.sync("--once", timeout=120)
        got = output_records(wa.sink_root) + output_records(wb.sink_root)
        lost, dup, unexpected = compare(exp, got)
        check((lost, dup, unexpected) == (0, 0, 0),
              "two members: %d lost, %d duplicated, %d unexpected\n"
              "first:\n%s\nsecond:\n%s" % (lost, dup, unexpected,
                                             errs[0][-1500:], errs[1][-1500:]))
        a = sum(output_records(wa.sink_root).values())
        check(0 < a < len(recs), "one member copied everything (%d of %d): "
              "no rebalance happened\n%s" % (a, len(recs), errs[0][-1500:]))
        print("  %d records exactly once across a rebalance: %d by the "
              "first member, %d by the second" % (len(recs), a,
                                                  len(recs) - a))
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
        broker.stop()
        wa.cleanup()
        wb.cleanup()


def test_kafka_failed_commits_are_sent_again():
    """The group's offsets are how a member with another state folder
    learns what is durable, so a refused offset commit must not be left
    behind. The broker refuses every commit while member A copies:
    - A's --once ends with a warning that it leaves without its offsets;
      run again once the broker takes commits, it reads nothing and
      commits what its WAL holds, so member B (own state, same group)
      then reads nothing either;
    - A, polling, copies new records while commits are refused; once they
      are taken again its next polls commit, so after a kill -9 (no
      goodbye commit) B still reads nothing.
    Without the retries B would copy everything A did a second time."""
    wa, wb = Workspace("kca"), Workspace("kcb")
    broker = Broker({"events": 4})
    try:
        recs = make_records(6000, seed=12, days=2)
        group_members(broker, (wa, wb))
        produce(broker.bootstrap, "events", recs[:3000])
        broker.command("fail-commits 100000")
        p = wa.sync("--once", timeout=120)
        check("leaving the group without the latest offsets" in p.err,
              "no warning for offsets the group refused:\n" + p.err[-1500:])
        broker.command("clear-commits")
        p = wa.sync("--once", timeout=120)
        check(" 0 records" in p.err, "A's second run read again:\n" + p.err)
        p = wb.sync("--once", timeout=120)
        check(" 0 records" in p.err, "B read what A had copied:\n" + p.err)

        broker.command("fail-commits 100000")
        produce(broker.bootstrap, "events", recs[3000:])
        a = start_member(wa)
        try:
            end = time.time() + 90
            while time.time() < end and sum(output_records(
                    wa.sink_root, live=True).values()) < len(recs):
                time.sleep(0.5)
            time.sleep(2)  # the last records' commits are refused too
            broker.command("clear-commits")
            time.sleep(4)  # polls send them again, at most once a second
        finally:
            a.kill()
            err = a.communicate(timeout=60)[1].decode()
        check("offset commit failed (sent again later)" in err,
              "the broker refused no commit:\n" + err[-1500:])
        wa.sync("--once", timeout=120)  # what the kill left open
        p = wb.sync("--once", timeout=120)
        check(" 0 records" in p.err, "B read what A had copied while its "
              "commits were refused:\n" + p.err)
        got = output_records(wa.sink_root) + output_records(wb.sink_root)
        lost, dup, unexpected = compare(expected(recs), got)
        check((lost, dup, unexpected) == (0, 0, 0),
              "%d lost, %d duplicated, %d unexpected" % (lost, dup,
                                                         unexpected))
        print("  %d records exactly once across two members while the "
              "broker refused commits" % len(recs))
    finally:
        broker.stop()
        wa.cleanup()
        wb.cleanup()


def test_kafka_key_field():
    """The sink keys messages by key_field when the record has it, else by
    the partition key."""
    ws = Workspace("kkey")
    broker = Broker({"k.login": 2, "skippr.markers": 1})
    try:
        recs = [json.dumps({"event_type": "login", "user": {"id": "u%d" % i},
                            "timestamp": "2024-05-01T00:00:00Z"}).encode()
                for i in range(50)]
        recs.append(b'{"event_type":"login","timestamp":"2024-05-01"}')
        with open(os.path.join(ws.inp, "a.jsonl"), "wb") as f:
            f.write(b"\n".join(recs) + b"\n")
        kafka_config(ws, ("File", {"path": ws.inp}),
                     ("Kafka", {"brokers": broker.bootstrap,
                                "topic": "k.{namespace}",
                                "key_field": "user.id"}))
        ws.sync("--once")
        keys = {m["payload"]: m["key"] for m in consume(broker.bootstrap,
                                                        "k.login")}
        check(len(keys) == len(recs), "%d of %d messages" % (len(keys),
                                                             len(recs)))
        for i in range(50):
            check(keys[recs[i]] == "u%d" % i, "key %r" % keys[recs[i]])
        check(keys[recs[50]].startswith("login/"),
              "no key_field: key %r" % keys[recs[50]])
    finally:
        broker.stop()
        ws.cleanup()


def test_kafka_errors_are_clear():
    ws = Workspace("kerr")
    broker = Broker({"events": 1, "skippr.markers": 1})
    try:
        ws.generate(objects=1, records=10, framing="lines")
        # A missing topic, on either side.
        kafka_config(ws, ("Kafka", {"brokers": broker.bootstrap,
                                    "topic": "nope", "group_id": '""'}),
                     ("File", {"path": ws.out}))
        p = ws.sync("--once", check_rc=False, timeout=60)
        check(p.returncode != 0 and "topic nope (option topic) does not "
              "exist" in p.err, "missing source topic:\n" + p.err)
        kafka_config(ws, ("File", {"path": ws.inp}),
                     ("Kafka", {"brokers": broker.bootstrap,
                                "topic": "nope"}))
        p = ws.sync("--once", check_rc=False, timeout=60)
        check(p.returncode != 0 and "topic nope (option topic) does not "
              "exist" in p.err, "missing sink topic:\n" + p.err)
        # Brokers that are down: a clear error, nothing marked as done.
        import socket
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        dead = "127.0.0.1:%d" % s.getsockname()[1]
        s.close()
        kafka_config(ws, ("File", {"path": ws.inp}),
                     ("Kafka", {"brokers": dead, "topic": "events"}))
        start = time.time()
        p = ws.sync("--once", check_rc=False, timeout=60)
        check(p.returncode != 0 and "cannot reach the Kafka brokers" in p.err,
              "brokers down:\n" + p.err)
        check(time.time() - start < 30, "brokers down took %.0f s" %
              (time.time() - start))
        kafka_config(ws, ("Kafka", {"brokers": dead, "topic": "events"}),
                     ("File", {"path": ws.out}))
        p = ws.sync("--once", check_rc=False, timeout=60)
        check(p.returncode != 0 and "cannot reach the Kafka brokers" in p.err,
              "source brokers down:\n" + p.err)
        # A librdkafka property it refuses names the property, not the value.
        kafka_config(ws, ("File", {"path": ws.inp}),
                     ("Kafka", {"brokers": broker.bootstrap, "topic": "events",
                                "kafka.sasl.password.bogus": "s3cret"}))
        p = ws.sync("--once", check_rc=False, timeout=60)
        check(p.returncode != 0 and "kafka.sasl.password.bogus" in p.err and
              "s3cret" not in p.err, "bad property:\n" + p.err)
        check(not consume(broker.bootstrap, "events"),
              "a failed run wrote to Kafka")
    finally:
        broker.stop()
        ws.cleanup()


if __name__ == "__main__":
    main([test_kafka_errors_are_clear,
          test_kafka_key_field,
          test_kafka_group_commits_durable_offsets,
          test_kafka_rebalance_hands_over_exactly_once,
          test_kafka_failed_commits_are_sent_again,
          test_kafka_to_file_exactly_once_across_kills,
          test_file_to_kafka_exactly_once_across_kills,
          test_s3_to_kafka_exactly_once_across_kills])
