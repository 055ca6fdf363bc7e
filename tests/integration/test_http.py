"""HTTP push source and HTTP sink, against real clients and a real
receiver (tests/tools/http_receiver.py).

- push -> file: a client POSTs bodies and retries each until it gets 200,
  while skipprd is killed 10 times: nothing is lost (so every 200 meant
  durable), and repeats are whole bodies the client sent again.
- Errors of the push source: 401 without the token, 413 over the size
  limit, 400 with the reason for a line that is not JSON (dead-lettered,
  the body's other lines kept).
- file -> HTTP: the receiver fails 20% of POSTs and skipprd is killed 10
  times: every record arrives, each Idempotency-Key always names the same
  body, and keeping one body per key gives each record exactly once. The
  Authorization header arrives and is never logged.
- A receiver that is full (429) gives backpressure and then a clear error,
  never a silent drop: a later run delivers everything.
"""
import collections
import http.client
import json
import os
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from skippr_test import (SKIPPRD, SINK_PREFIX, SOURCE_PREFIX, SOURCE_DIR,  # noqa: E402
                         Workspace, check, dead_letters, expected_key,
                         kill_at_random, main, output_records)
from test_kafka import kafka_config, make_records  # noqa: E402
from test_mqtt import free_port  # noqa: E402

RECEIVER = os.path.join(SOURCE_DIR, "tests", "tools", "http_receiver.py")
KILLS = 10


def post(port, body, token=None, path="/ingest", timeout=30):
    """(status, text) of one POST, or (None, error) if it got no answer."""
    try:
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
        h = {"Content-Type": "application/x-ndjson"}
        if token:
            h["Authorization"] = "Bearer " + token
        c.request("POST", path, body=body, headers=h)
        r = c.getresponse()
        text = r.read().decode()
        c.close()
        return r.status, text
    except OSError as e:
        return None, str(e)


def push_config(ws, port, token="t0ken", extra=None):
    opts = {"listen": "127.0.0.1:%d" % port, "path": "/ingest",
            "token": token, "idle_timeout_seconds": 2}
    opts.update(extra or {})
    kafka_config(ws, ("HTTP", opts),
                 ("File", {"path": ws.out, "prefix": SINK_PREFIX}))


def test_http_push_loses_nothing_across_kills():
    ws = Workspace("push")
    port = free_port()
    push_config(ws, port)
    recs = make_records(30000, seed=5)
    bodies = [b"\n".join(recs[k::300]) + b"\n" for k in range(300)]
    stats = collections.Counter()

    def client():
        for b in bodies:
            while True:
                status, _ = post(port, b, "t0ken")
                stats[status] += 1
                if status == 200:
                    break
                time.sleep(0.05)
    t = threading.Thread(target=client)
    t.start()
    kill_at_random(ws, KILLS, 0.3, 0.9, seed=5)
    # The last server runs until the client is done and 2 s more.
    p = subprocess.Popen([SKIPPRD, "sync", "--pipeline",
                          "gdpr_compliant_migration", "--config", ws.config,
                          "--once"], stdout=subprocess.DEVNULL,
                         stderr=subprocess.PIPE)
    t.join(300)
    check(not t.is_alive(), "the client never got all its 200s")
    _, err = p.communicate(timeout=120)
    check(p.returncode == 0, "last run failed: %s" % err.decode()[-2000:])
    try:
        got = output_records(ws.sink_root)
        exp = collections.Counter((expected_key(json.loads(r)), r)
                                  for r in recs)
        lost = exp - got
        check(not lost, "%d records lost" % sum(lost.values()))
        extra = got - exp
        check(all(k in exp for k in extra), "records never sent were stored")
        print("  %d records in %d bodies, 0 lost, %d repeated records; "
              "answers %s" % (len(recs), len(bodies), sum(extra.values()),
                              dict(stats)))
    finally:
        ws.cleanup()


def test_http_push_answers():
    ws = Workspace("push-err")
    port = free_port()
    push_config(ws, port, extra={"max_body_bytes": 4096})
    p = subprocess.Popen([SKIPPRD, "sync", "--pipeline",
                          "gdpr_compliant_migration", "--config", ws.config,
                          "--once"], stdout=subprocess.DEVNULL,
                         stderr=subprocess.PIPE)
    try:
        for _ in range(100):
            if post(port, b"", "t0ken")[0] is not None:
                break
            time.sleep(0.05)
        good = json.dumps({"event_type": "login", "n": 1}).encode()
        check(post(port, good, None)[0] == 401, "no token: not 401")
        check(post(port, good, "wrong")[0] == 401, "bad token: not 401")
        check(post(port, good, "t0ken", path="/other")[0] == 404,
              "bad path: not 404")
        check(post(port, b"x" * 5000, "t0ken")[0] == 413, "big: not 413")
        status, text = post(port, good + b"\n{oops\n" + good + b"\n",
                            "t0ken")
        check(status == 400 and "line 2 is not JSON" in text,
              "malformed: %s %r" % (status, text))
        check(post(port, good + b"\n", "t0ken")[0] == 200, "good: not 200")
        _, err = p.communicate(timeout=60)
        check(p.returncode == 0, "run failed: %s" % err.decode()[-2000:])
        got = output_records(ws.sink_root)
        check(sum(got.values()) == 3, "kept %d good lines, not 3" %
              sum(got.values()))
        dl = dead_letters(ws.sink_root)
        check(len(dl) == 1 and dl[0][1] == b"{oops", "dead letters: %r" % dl)
    finally:
        if p.poll() is None:
            p.kill()
        ws.cleanup()


class Receiver:
    def __init__(self, root, files=None):
        self.log = os.path.join(root, "received.jsonl")
        open(self.log, "w").close()
        self.proc = subprocess.Popen([sys.executable, RECEIVER, self.log] +
                                     ([files] if files else []),
                                     stdout=subprocess.PIPE)
        self.port = int(self.proc.stdout.readline().split()[1])

    def control(self, **c):
        check(post(self.port, json.dumps(c).encode(), path="/_control")[0] ==
              200, "control")

    def posts(self):
        with open(self.log) as f:
            return [json.loads(line) for line in f]

    def stop(self):
        self.proc.terminate()
        self.proc.wait(10)


def file_to_http(ws, recv, attempts=5):
    recs = make_records(20000, seed=6, days=2)
    folder = os.path.join(ws.inp, SOURCE_PREFIX)
    os.makedirs(folder)
    for k in range(10):
        with open(os.path.join(folder, "p%d.jsonl" % k), "wb") as f:
            f.write(b"\n".join(recs[k::10]) + b"\n")
    kafka_config(ws, ("File", {"path": ws.inp, "prefix": SOURCE_PREFIX}),
                 ("HTTP", {"url": "http://127.0.0.1:%d/in" % recv.port,
                           "batch_bytes": 16384,
                           "max_attempts": attempts,
                           "header.Authorization": "Bearer s3cr3t-t0ken"}),
                 pipeline_extra={"upload_concurrency": 2})
    return recs


def check_delivery(recv, recs):
    """Each key names one body; one body per key = each record once."""
    by_key = {}
    repeats = 0
    for p in recv.posts():
        check(p["auth"] == "Bearer s3cr3t-t0ken", "Authorization lost")
        check(p["key"], "a POST without Idempotency-Key")
        if p["key"] in by_key:
            check(by_key[p["key"]] == p["body"],
                  "key %s named two bodies" % p["key"])
            repeats += 1
        by_key[p["key"]] = p["body"]
    got = collections.Counter()
    for body in by_key.values():
        for line in body.encode().split(b"\n"):
            if line:
                got[line] += 1
    check(got == collections.Counter(recs),
          "after one body per key: %d lost, %d extra" %
          (sum((collections.Counter(recs) - got).values()),
           sum((got - collections.Counter(recs)).values())))
    return len(by_key), repeats


def test_file_to_http_across_kills_and_failures():
    ws = Workspace("f2h")
    recv = Receiver(ws.root)
    try:
        recs = file_to_http(ws, recv)
        recv.control(fail_rate=0.2, status=503)
        kill_at_random(ws, KILLS, 0.2, 0.8, once=True, seed=6)
        r = ws.sync("--once", timeout=300)
        check("s3cr3t" not in r.err, "the token was logged")
        keys, repeats = check_delivery(recv, recs)
        print("  %d records in %d parts, each once by key; %d repeated POSTs "
              "(same key, same body) after %d kills with 20%% 503s" %
              (len(recs), keys, repeats, KILLS))
    finally:
        recv.stop()
        ws.cleanup()


def test_full_receiver_is_backpressure_then_an_error():
    ws = Workspace("full")
    recv = Receiver(ws.root)
    try:
        recs = file_to_http(ws, recv, attempts=2)
        recv.control(fail_rate=1.0, status=429)
        r = ws.sync("--once", check_rc=False, timeout=300)
        check(r.returncode != 0 and "429" in r.err and "giving up" in r.err,
              "full receiver:\n" + r.err[-2000:])
        check("s3cr3t" not in r.err, "the token was logged")
        recv.control(fail_rate=0)
        ws.sync("--once", timeout=300)
        check_delivery(recv, recs)
    finally:
        recv.stop()
        ws.cleanup()


def test_http_pull_resumes_and_skips_done_urls():
    """Each URL is a unit: killed runs resume with Range requests, a
    finished URL is not fetched again, a changed one is reported."""
    ws = Workspace("pull")
    files = os.path.join(ws.root, "files")
    os.makedirs(files)
    recs = make_records(240000, seed=7, days=2)
    for k in range(6):
        with open(os.path.join(files, "f%d.jsonl" % k), "wb") as f:
            f.write(b"\n".join(recs[k::6]) + b"\n")
    recv = Receiver(ws.root, files)
    try:
        urls = ",".join("http://127.0.0.1:%d/files/f%d.jsonl" % (recv.port, k)
                        for k in range(6))
        kafka_config(ws, ("HTTPPull", {"urls": urls}),
                     ("File", {"path": ws.out, "prefix": SINK_PREFIX}),
                     pipeline_extra={"commit_interval_ms": 20})
        resumed = 0
        for n in range(2, 400, 5):
            env = dict(os.environ, SKIPPR_CRASH="read:%d" % n)
            p = ws.sync("--once", env=env, check_rc=False)
            resumed += "resuming unit" in p.err
            if p.returncode == 0:
                break
        p = ws.sync("--once")
        check("0 units copied, 6 already done" in p.err,
              "a second run fetched again:\n" + p.err)
        got = output_records(ws.sink_root)
        exp = collections.Counter((expected_key(json.loads(r)), r)
                                  for r in recs)
        check(got == exp, "pull: %d lost, %d extra" %
              (sum((exp - got).values()), sum((got - exp).values())))
        with open(os.path.join(files, "f0.jsonl"), "ab") as f:
            f.write(recs[0] + b"\n")
        p = ws.sync("--once")
        check("changed since it was copied" in p.err,
              "a changed URL was not reported:\n" + p.err)
        print("  %d records from 6 URLs exactly once; %d runs resumed a "
              "URL part-way" % (len(recs), resumed))
    finally:
        recv.stop()
        ws.cleanup()


if __name__ == "__main__":
    main([test_http_push_answers,
          test_http_push_loses_nothing_across_kills,
          test_file_to_http_across_kills_and_failures,
          test_full_receiver_is_backpressure_then_an_error,
          test_http_pull_resumes_and_skips_done_urls])
