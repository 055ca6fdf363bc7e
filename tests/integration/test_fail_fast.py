#!/usr/bin/env python3
"""An operator's first day: fail fast, say it once, say what landed.

Shows:
- the preflight: before anything is read, `sync` reaches the source and
  the sink with the run's credentials, and `validate --reach` does the
  same check alone. A missing folder, a folder that cannot be written, a
  missing bucket and a missing Kafka topic or marker topic are each one
  error line naming the entry (the flag, for a pipeline by flags) and what
  to do, exit 1, and nothing is read (an HTTP server that is down too,
  while one that is up sees no request; a wrong secret too, with the S3
  server checking signatures as S3 does); once fixed, the same state copies
  (a state that copied nothing is bound to no definition);
- a sink that refuses every write mid-run (the bucket deleted) stops the
  run at once with one error line, and the summary says how many objects
  are durable in the sink, matching the bucket; a sink that stops
  answering mid-run is retried a bounded number of times, a warning a
  second at most, then the run stops the same way; after the fix, a rerun
  leaves the copy exact;
- a --once run interrupted by SIGTERM says so on one line and exits 5;
  the next run finishes the copy exactly.
"""
import http.server
import os
import signal
import subprocess
import threading
import time

from kafka_test import Broker
from s3_test import S3Server
from skippr_test import (SKIPPRD, Workspace, assert_exact, check,
                         expected_records, free_port, main, run)

SINK_PREFIX = "copy/phew-thats-a-month-and-a-gdpr-fine-saved"


def errors_of(p):
    return [ln for ln in p.err.splitlines() if " error: " in ln]


def one_error(p, *wants):
    errs = errors_of(p)
    check(p.returncode == 1 and len(errs) == 1 and
          all(w in errs[0] for w in wants),
          "want exit 1 and one error line with %s, got exit %d:\n%s" % (
              wants, p.returncode, p.err[-3000:]))
    return errs[0]


def nothing_read(p):
    check("files_opened" not in p.err and "units read" not in p.err,
          "the source was read:\n%s" % p.err[-2000:])


def s3_config(ws, extra=""):
    """ws's seed config with its sink in bucket dst."""
    ws.write_config(threads=2)
    with open(ws.config) as f:
        text = f.read()
    text = text.replace("    File:\n      path: %s\n      prefix: copy" %
                        ws.out, "    S3:\n      s3_bucket: dst\n%s"
                        "      s3_prefix: copy" % extra)
    text = text.replace("      format: jsonl\n", "")
    with open(ws.config, "w") as f:
        f.write(text)


def check_s3_exact(ws, s3):
    want = expected_records(ws.inp)
    got = s3.records("dst", SINK_PREFIX + "/")
    check(got == want, "bucket differs: %d lost, %d unexpected" % (
        sum((want - got).values()), sum((got - want).values())))
    return sum(want.values())


def test_preflight_folders():
    ws = Workspace("pre-folders")
    try:
        ws.generate(objects=2, records=10, seed=1)
        ws.write_config()
        with open(ws.config) as f:
            text = f.read()
        with open(ws.config, "w") as f:
            f.write(text.replace("path: %s\n" % ws.inp,
                                 "path: %s/nope\n" % ws.inp))
        p = ws.sync("--once", check_rc=False)
        line = one_error(p, "File source (data_sources.firehose_archive)",
                         "/nope", "No such file or directory", "fix `path`")
        nothing_read(p)
        q = run(["validate", "--reach", "--config", ws.config], check_rc=False)
        check(q.returncode == 1 and line.split(" error: ")[1] in q.stderr
              .decode(), "validate --reach: %s" % q.stderr.decode())
        check(run(["validate", "--config", ws.config]).returncode == 0,
              "validate without --reach reached")
        # A sink folder that cannot be made: a file stands where it goes.
        ws.write_config()
        blocked = os.path.join(ws.root, "blocked")
        with open(blocked, "w") as f:
            f.write("a file, not a folder\n")
        with open(ws.config) as f:
            text = f.read()
        with open(ws.config, "w") as f:
            f.write(text.replace("path: %s\n" % ws.out,
                                 "path: %s/out\n" % blocked))
        p = ws.sync("--once", check_rc=False)
        one_error(p, "File sink (data_sinks.tenant_layout)",
                  "cannot make folder", "check `path`")
        nothing_read(p)
        # Fixed, the same state copies: the runs that stopped at the
        # preflight copied nothing, so their definition binds nothing.
        ws.write_config()
        ws.sync("--once")
        n = assert_exact(ws)
        print("  %s; fixed: %d records exact" % (line.split(" error: ")[1],
                                                 n))
    finally:
        ws.cleanup()


def test_preflight_by_flags_names_the_flag():
    ws = Workspace("pre-flags")
    s3 = S3Server(["src"])
    try:
        ws.generate(objects=1, records=5, seed=2)
        flags = ["--source", "file://" + ws.inp, "--sink",
                 "s3://nobucket/out", "--state-dir", ws.state]
        env = s3.env()
        p = run(["sync", "--once"] + flags, env=env, check_rc=False)
        line = one_error(p, "S3 sink (--sink)", "NoSuchBucket",
                         "create it, or fix s3_bucket")
        nothing_read(p)
        check("data_sinks" not in p.err and "(flags)" not in p.err,
              "a YAML the user never wrote: %s" % p.err)
        q = run(["validate", "--reach"] + flags, env=env, check_rc=False)
        check(q.returncode == 1 and "S3 sink (--sink)" in q.err and
              "NoSuchBucket" in q.err, "validate --reach: %s" % q.err)
        # A wrong secret, where the server checks signatures as S3 does.
        s3.verify_signatures()
        good = ["--source", "s3://src/in", "--sink", "s3://src/out",
                "--state-dir", ws.state]
        wrong = dict(env, AWS_SECRET_ACCESS_KEY="not-the-secret")
        for cmd in (["sync", "--once"], ["validate", "--reach"]):
            q = run(cmd + good, env=wrong, check_rc=False)
            errs = errors_of(q)
            check(q.returncode == 1 and len(errs) == 2 and
                  all("SignatureDoesNotMatch" in e and "the secret key does "
                      "not belong to the access key" in e for e in errs) and
                  "S3 source (--source)" in errs[0] and
                  "S3 sink (--sink)" in errs[1],
                  "%s, wrong secret: %s" % (cmd[0], q.err))
        run(["validate", "--reach"] + good, env=env)
        # A bad setting names its flag, not a line of generated YAML.
        q = run(["validate", "--source", "file://" + ws.inp, "--sink",
                 "file://" + ws.out, "--batch-time-unit", "weekly"],
                check_rc=False)
        check(q.returncode == 2 and "error: --batch-time-unit: " in q.err,
              "flag not named: %s" % q.err)
        print("  %s" % line.split(" error: ")[1])
    finally:
        s3.close()
        ws.cleanup()


def test_preflight_kafka_topics():
    broker = Broker({"other": 1})
    ws = Workspace("pre-kafka")
    try:
        ws.generate(objects=1, records=5, seed=3)
        flags = ["--source", "file://" + ws.inp, "--sink",
                 "kafka://%s/events" % broker.bootstrap, "--state-dir",
                 ws.state]
        for cmd in (["sync", "--once"], ["validate", "--reach"]):
            p = run(cmd + flags, check_rc=False)
            errs = errors_of(p)
            check(p.returncode == 1 and len(errs) == 2 and
                  "topic events (option topic) does not exist" in errs[0] and
                  "topic skippr.markers (option marker_topic) does not "
                  "exist" in errs[1] and
                  all("kafka-topics.sh" in e and "(--sink)" in e
                      for e in errs),
                  "%s: exit %d\n%s" % (cmd[0], p.returncode, p.err))
            check("%3|" not in p.err, "librdkafka's own lines: %s" % p.err)
            nothing_read(p)
        print("  %s" % errs[1].split(" error: ")[1])
    finally:
        broker.stop()
        ws.cleanup()


def test_preflight_http_endpoints():
    """The HTTP sink and HTTPPull connect to their servers and send no
    request: a server that is down is one line naming the flag; one that
    is up sees no request from the check."""
    ws = Workspace("pre-http")
    seen = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 - the library's name
            seen.append(self.path)
            self.send_response(200)
            self.end_headers()

        do_POST = do_HEAD = do_GET  # noqa: N815

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        ws.generate(objects=1, records=5, seed=4)
        down = "http://127.0.0.1:%d/in" % free_port()
        up = "http://127.0.0.1:%d/in" % server.server_address[1]
        state = ["--state-dir", ws.state]
        sink_down = ["--source", "file://" + ws.inp, "--sink", down] + state
        for cmd in (["sync", "--once"], ["validate", "--reach"]):
            p = run(cmd + sink_down, check_rc=False)
            one_error(p, "HTTP sink (--sink)", "cannot reach " + down,
                      "check `url`")
            nothing_read(p)
        p = run(["validate", "--reach", "--source", down, "--sink",
                 "file://" + ws.out] + state, check_rc=False)
        line = one_error(p, "(--source)", "cannot reach " + down,
                         "check `urls`")
        q = run(["validate", "--reach", "--source", "file://" + ws.inp,
                 "--sink", up] + state)
        check("both reached" in q.out + q.err and not seen,
              "a live server: %s, requests %s" % (q.out[-300:], seen))
        print("  %s; a live server saw %d requests from the check" % (
            line.split(" error: ")[1], len(seen)))
    finally:
        server.shutdown()
        ws.cleanup()


WRITES = ["put", "create_multipart", "upload_part", "complete_multipart"]


def check_stops_then_reruns(name, fault, extra, max_warnings):
    ws = Workspace("midrun-" + name)
    s3 = S3Server(["dst"])
    try:
        ws.generate(objects=40, records=200, seed=5)
        s3_config(ws, extra)
        # Two writes of data succeed (the claim and the preflight's probe
        # are other kinds); every later one fails.
        s3.faults(0, [fault], nth=3, persist=True, only=WRITES)
        start = time.time()
        p = ws.sync("--once", env=s3.env(), check_rc=False)
        took = time.time() - start
        line = one_error(p, "S3 sink (data_sinks.tenant_layout)")
        warnings = [ln for ln in p.err.splitlines() if " warning: " in ln]
        landed = [ln for ln in warnings if "stopped by the error above" in ln]
        durable = len(s3.objects("dst", SINK_PREFIX + "/"))
        check(len(landed) == 1 and
              "stopped by the error above: %d objects durable in S3 sink" %
              durable in landed[0] and "exit code 1" in landed[0],
              "what landed (%d objects in the bucket): %s" % (durable,
                                                               p.err[-2000:]))
        check(len(warnings) - 1 <= max_warnings,
              "%d warnings:\n%s" % (len(warnings), p.err[-3000:]))
        s3.faults(0, [])
        ws.sync("--once", env=s3.env())
        n = check_s3_exact(ws, s3)
        print("  %s: exit 1 in %.1f s, %d warnings; %s; rerun: %d records "
              "exact" % (name, took, len(warnings) - 1,
                         line.split(" error: ")[1][:90], n))
    finally:
        s3.close()
        ws.cleanup()


def test_bucket_gone_mid_run():
    check_stops_then_reruns("no-bucket", "NoSuchBucket", "", 0)


def test_sink_unreachable_mid_run():
    # Every write's connection is cut: retried (3 attempts), a warning a
    # second at most, then one error line.
    check_stops_then_reruns("unreachable", "reset",
                            "      max_attempts: 3\n", 12)


def test_interrupted_once_says_so():
    ws = Workspace("interrupted")
    try:
        ws.generate(objects=300, records=400, seed=9)
        ws.write_config(threads=1)
        proc = subprocess.Popen(
            [SKIPPRD, "sync", "--once", "--pipeline",
             "gdpr_compliant_migration", "--config", ws.config],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        deadline = time.time() + 60
        while not os.path.isdir(ws.out) and time.time() < deadline:
            time.sleep(0.02)
        time.sleep(0.2)
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=120)
        err = err.decode()
        if proc.returncode == 0:
            print("  (the run finished before the signal; not checked)")
            return
        check(proc.returncode == 5 and "interrupted before the --once run "
              "finished" in err and "exit code 5" in err,
              "exit %d:\n%s" % (proc.returncode, err[-2000:]))
        p = ws.sync("--once")
        check("already done" in p.err, p.err[-1000:])
        n = assert_exact(ws)
        print("  SIGTERM: exit 5, one line; the next run: %d records exact"
              % n)
    finally:
        ws.cleanup()


if __name__ == "__main__":
    main([test_preflight_folders,
          test_preflight_by_flags_names_the_flag,
          test_preflight_kafka_topics,
          test_preflight_http_endpoints,
          test_bucket_gone_mid_run,
          test_sink_unreachable_mid_run,
          test_interrupted_once_says_so])
