"""HTTP push source and HTTP sink, against real clients and a real
receiver (tests/tools/http_receiver.py).

- push -> file: a client POSTs bodies and retries each until it gets 200,
  while skipprd is killed 10 times: nothing is lost (so every 200 meant
  durable), and repeats are whole bodies the client sent again.
- Errors of the push source: 401 without the token, 413 over the size
  limit, 400 with the reason for a line that is not JSON (dead-lettered,
  the body's other lines kept).
- CSV and XML bodies (by Content-Type, or sniffed): each record lands
  byte-equal under its header or root, a bad row is named in the 400 and
  dead-lettered, and a body the sink cannot take is set aside whole.
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
                         free_port, kill_at_random, main, output_records)
from test_kafka import kafka_config, make_records  # noqa: E402

RECEIVER = os.path.join(SOURCE_DIR, "tests", "tools", "http_receiver.py")
KILLS = 10


def post(port, body, token=None, path="/ingest", timeout=30,
         ctype="application/x-ndjson"):
    """(status, text) of one POST, or (None, error) if it got no answer."""
    try:
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
        h = {"Content-Type": ctype} if ctype else {}
        if token:
            h["Authorization"] = "Bearer " + token
        c.request("POST", path, body=body, headers=h)
        r = c.getresponse()
        text = r.read().decode()
        c.close()
        return r.status, text
    except OSError as e:
        return None, str(e)


def push_config(ws, port, token="t0ken", extra=None, sink_format=None):
    opts = {"listen": "127.0.0.1:%d" % port, "path": "/ingest",
            "token": token, "idle_timeout_seconds": 2}
    opts.update(extra or {})
    sink = {"path": ws.out, "prefix": SINK_PREFIX}
    if sink_format:
        sink["format"] = sink_format
    kafka_config(ws, ("HTTP", opts), ("File", sink))


def push_run(ws, port):
    """A --once push server, started and answering."""
    p = subprocess.Popen([SKIPPRD, "sync", "--pipeline",
                          "gdpr_compliant_migration", "--config", ws.config,
                          "--once"], stdout=subprocess.DEVNULL,
                         stderr=subprocess.PIPE)
    for _ in range(100):
        if post(port, b"", "t0ken")[0] is not None:
            break
        time.sleep(0.05)
    return p


def sink_files(ws, ext):
    """{partition folder: [file bytes]} of the sink's data objects."""
    out = collections.defaultdict(list)
    for dirpath, _, files in os.walk(ws.sink_root):
        rel = os.path.relpath(dirpath, ws.sink_root)
        if rel.split(os.sep)[0] in ("_errors", "_skippr"):
            continue
        for fn in files:
            check(fn.endswith(ext), "unexpected object %s/%s" % (rel, fn))
            with open(os.path.join(dirpath, fn), "rb") as f:
                out[rel].append(f.read())
    return out


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


def test_http_push_csv_and_xml_bodies():
    # CSV bodies into CSV objects: by Content-Type and sniffed.
    ws = Workspace("push-csv")
    port = free_port()
    push_config(ws, port, sink_format="csv")
    p = push_run(ws, port)
    head = b"event_type,detail.tenant_id,timestamp,note"
    rows = [b"login,acme,2024-01-02T03:00:00Z,plain",
            b'login,acme,2024-01-02T04:00:00Z,"two\nlines, quoted"',
            b"logout,zeta,2024-01-03T05:00:00Z,x"]
    bad = b"login,acme,2024-01-02T03:00:00Z"
    try:
        body = b"\r\n".join([head] + rows[:2]) + b"\r\n"
        check(post(port, body, "t0ken", ctype="text/csv")[0] == 200,
              "csv body: not 200")
        status, text = post(port, b"\n".join([head, rows[2], bad]) + b"\n",
                            "t0ken", ctype=None)
        check(status == 400 and text.startswith("line 3 (byte "),
              "sniffed csv with a short row: %s %r" % (status, text))
        _, err = p.communicate(timeout=60)
        check(p.returncode == 0, "run failed: %s" % err.decode()[-2000:])
        files = sink_files(ws, ".csv")
        got = collections.Counter()
        for rel, datas in files.items():
            for data in datas:
                lines = data.split(b"\r\n" if b"\r\n" in data else b"\n")
                check(lines[0] == head, "%s: header %r" % (rel, lines[0]))
                got[rel.split(os.sep)[1]] += len(lines)
        blob = b"".join(d for ds in files.values() for d in ds)
        for r in rows:
            check(blob.count(r) == 1, "row %r not copied once" % r)
        check(set(got) == {"p_tenant_id=acme",
                          "p_tenant_id=zeta"},
              "partitions %r" % dict(got))
        dl = dead_letters(ws.sink_root)
        check(len(dl) == 1 and dl[0][1] == bad, "dead letters: %r" % dl)
        check(dl[0][0]["unit"].startswith("http:127.0.0.1:%d#" % port),
              "dead letter unit %r" % dl[0][0]["unit"])
    finally:
        if p.poll() is None:
            p.kill()
        ws.cleanup()
    # XML bodies into XML objects; a JSON body cannot become XML.
    ws = Workspace("push-xml")
    port = free_port()
    push_config(ws, port, sink_format="xml")
    p = push_run(ws, port)
    recs = [b"<event><event_type>login</event_type><detail><tenant_id>acme"
            b"</tenant_id></detail><timestamp>2024-01-02T03:00:00Z"
            b"</timestamp><n>%d</n></event>" % i for i in range(3)]
    try:
        body = (b'<?xml version="1.0"?>\n<events>\n' +
                b"\n".join(recs) + b"\n</events>\n")
        check(post(port, body, "t0ken", ctype="application/xml")[0] == 200,
              "xml body: not 200")
        status, text = post(port, b'{"event_type":"login"}\n', "t0ken")
        check(status == 400 and "line 1 (byte 0)" in text,
              "json body for an xml sink: %s %r" % (status, text))
        _, err = p.communicate(timeout=60)
        check(p.returncode == 0, "run failed: %s" % err.decode()[-2000:])
        files = sink_files(ws, ".xml")
        check(len(files) == 1, "partitions %r" % list(files))
        data = b"".join(next(iter(files.values())))
        check(data.startswith(b'<?xml version="1.0"?>\n<events>') and
              data.rstrip().endswith(b"</events>"), "document %r" % data)
        for r in recs:
            check(data.count(r) == 1, "record %r not copied once" % r)
        dl = dead_letters(ws.sink_root)
        check(len(dl) == 1 and dl[0][1] == b'{"event_type":"login"}\n',
              "dead letters: %r" % dl)
        print("  csv: 3 rows exact in 2 partitions, 1 short row set aside; "
              "xml: 3 records exact, 1 json body set aside")
    finally:
        if p.poll() is None:
            p.kill()
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
        check(status == 400 and text.startswith(
            "line 2 (byte %d): " % (len(good) + 1)),
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
    def __init__(self, root, files=None, tls=None):
        """tls: (cert, key) to serve HTTPS."""
        self.log = os.path.join(root, "received.jsonl")
        open(self.log, "w").close()
        self.proc = subprocess.Popen([sys.executable, RECEIVER, self.log] +
                                     ([files] if files else []) +
                                     (["--tls", tls[0], tls[1]] if tls
                                      else []),
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
        p = ws.sync("--once", check_rc=False)
        check(p.returncode == 4 and "changed since it was copied" in p.err,
              "a changed URL was not reported (exit %d):\n%s" % (
                  p.returncode, p.err))
        print("  %d records from 6 URLs exactly once; %d runs resumed a "
              "URL part-way" % (len(recs), resumed))
    finally:
        recv.stop()
        ws.cleanup()


def test_http_pull_follows_next_pages():
    """follow_next walks Link rel="next" (relative, after a rel="first",
    from a server that refuses HEAD): every page is a unit, copied once;
    a page added later is the only new unit of the next run."""
    ws = Workspace("pages")
    files = os.path.join(ws.root, "files")
    os.makedirs(files)
    recs = make_records(13000, seed=9, days=2)
    for k in range(13):
        with open(os.path.join(files, "feed-%d" % (k + 1)), "wb") as f:
            f.write(b"\n".join(recs[k * 1000:(k + 1) * 1000]) + b"\n")
    last = os.path.join(files, "feed-13")
    os.rename(last, last + ".later")
    recv = Receiver(ws.root, files)
    try:
        kafka_config(ws, ("HTTPPull", {
            "urls": "http://127.0.0.1:%d/pages/feed" % recv.port,
            "follow_next": "true"}),
            ("File", {"path": ws.out, "prefix": SINK_PREFIX}))
        p = ws.sync("--once")
        check("12 units copied" in p.err, "not 12 pages:\n" + p.err)
        exp = collections.Counter((expected_key(json.loads(r)), r)
                                  for r in recs[:12000])
        got = output_records(ws.sink_root)
        check(got == exp, "pages: %d lost, %d extra" %
              (sum((exp - got).values()), sum((got - exp).values())))
        os.rename(last + ".later", last)
        p = ws.sync("--once")
        check("1 units copied, 12 already done" in p.err,
              "the new page was not the only unit copied:\n" + p.err)
        exp = collections.Counter((expected_key(json.loads(r)), r)
                                  for r in recs)
        got = output_records(ws.sink_root)
        check(got == exp, "after a new page: %d lost, %d extra" %
              (sum((exp - got).values()), sum((got - exp).values())))
        print("  13 pages, %d records exactly once; the 13th page alone "
              "copied when it appeared" % len(recs))
    finally:
        recv.stop()
        ws.cleanup()


if __name__ == "__main__":
    main([test_http_push_answers,
          test_http_push_csv_and_xml_bodies,
          test_http_push_loses_nothing_across_kills,
          test_file_to_http_across_kills_and_failures,
          test_full_receiver_is_backpressure_then_an_error,
          test_http_pull_resumes_and_skips_done_urls,
          test_http_pull_follows_next_pages])
