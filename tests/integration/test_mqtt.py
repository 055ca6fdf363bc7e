"""MQTT source and sink against Debian's mosquitto broker, read back with
mosquitto_sub and driven with mosquitto_pub.

The guarantee (docs/EXACTLY_ONCE.md): both directions are at least once.
The source acknowledges a message only after it is durable in the WAL, so
a kill loses nothing and may repeat only messages that were durable but
not yet acknowledged; the sink publishes a slice again after a crash,
every copy of a record carrying the same skippr-record id.

- MQTT -> file: messages published while skipprd is killed 10 times:
  0 lost, and each duplicate a byte-equal copy of a delivered message.
- file -> MQTT: killed 10 times: every record arrives; copies share their
  skippr-record id, and dropping repeats by it gives each record once.
- Errors: a broker that is down, refused credentials.
- A publisher at full speed into a broker at its defaults:
  test_mqtt_defaults.py, which runs alone.
- TLS: mqtts:// to a broker whose certificate a test CA signed copies
  everything with ca_file; without it the run fails naming the failed
  certificate verification.
"""
import collections
import json
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from skippr_test import (SINK_PREFIX, SOURCE_PREFIX,  # noqa: E402
                         Workspace, check, expected_key, free_port,
                         kill_at_random, main,
                         output_records)
from test_kafka import expected, kafka_config, make_records  # noqa: E402

KILLS = 10


class Mosquitto:
    """mosquitto on 127.0.0.1: a listener, every limit at its default
    (max_inflight_messages 20, max_queued_messages 1000), unless
    offline_queue: then max_queued_messages 0 (no limit), the setting
    docs/CONFIG.md tells users to raise for skipprd's downtime, which a
    test that kills skipprd while records arrive needs."""

    def __init__(self, extra="", offline_queue=False):
        self.dir = tempfile.mkdtemp(prefix="skippr-mosquitto-")
        self.port = free_port()
        conf = os.path.join(self.dir, "m.conf")
        with open(conf, "w") as f:
            f.write("listener %d 127.0.0.1\nallow_anonymous true\n%s%s" %
                    (self.port, "max_queued_messages 0\n" if offline_queue
                     else "", extra))
        self.log = os.path.join(self.dir, "mosquitto.log")
        self.logf = open(self.log, "w")
        self.proc = subprocess.Popen(["mosquitto", "-c", conf],
                                     stdout=self.logf, stderr=self.logf)
        end = time.time() + 10
        while time.time() < end:
            try:
                socket.create_connection(("127.0.0.1", self.port), 0.2).close()
                return
            except OSError:
                time.sleep(0.05)
        raise RuntimeError("mosquitto did not start")

    def dropped(self, client):
        """Lines where the broker says it dropped messages for client."""
        return [ln for ln in self.lines()
                if "dropped for client %s" % client in ln]

    def lines(self):
        """The broker's log so far."""
        with open(self.log, errors="replace") as f:
            return f.read().splitlines()

    @property
    def address(self):
        return "127.0.0.1:%d" % self.port

    def stop(self):
        self.proc.terminate()
        self.proc.wait(10)
        self.logf.close()
        subprocess.run(["rm", "-rf", self.dir])


def publish(broker, topic, records):
    p = subprocess.run(["mosquitto_pub", "-h", "127.0.0.1", "-p",
                        str(broker.port), "-q", "1", "-t", topic, "-l"],
                       input=b"\n".join(records) + b"\n",
                       stderr=subprocess.PIPE, timeout=120)
    check(p.returncode == 0, "mosquitto_pub: %s" % p.stderr.decode())


def test_mqtt_to_file_at_least_once_across_kills():
    ws = Workspace("m2f")
    broker = Mosquitto(offline_queue=True)
    try:
        kafka_config(ws, ("MQTT", {"broker": broker.address,
                                   "topic": "devices/#",
                                   "client_id": "skippr-test",
                                   "idle_timeout_seconds": 2}),
                     ("File", {"path": ws.out, "prefix": SINK_PREFIX}),
                     pipeline_extra={"commit_interval_ms": 50})
        ws.sync("--once", timeout=60)  # the session and its subscription
        recs = make_records(40000, seed=3)
        # Published in 40 bursts while skipprd is being killed.
        def publisher():
            for k in range(40):
                publish(broker, "devices/%d" % (k % 4), recs[k::40])
                time.sleep(0.1)
        t = threading.Thread(target=publisher)
        t.start()
        kill_at_random(ws, KILLS, 0.3, 1.0)
        t.join()
        ws.sync("--once", timeout=300)
        got = output_records(ws.sink_root)
        exp = collections.Counter((expected_key(json.loads(r)), r)
                                  for r in recs)
        lost = exp - got
        check(not lost, "%d records lost, e.g. %r" %
              (sum(lost.values()), list(lost)[:2]))
        extra = got - exp
        check(all(k in exp for k in extra),
              "output has records never published")
        print("  %d records, 0 lost, %d duplicates (each a byte-equal copy) "
              "after %d kills" % (len(recs), sum(extra.values()), KILLS))
    finally:
        broker.stop()
        ws.cleanup()


def test_file_to_mqtt_at_least_once_across_kills():
    ws = Workspace("f2m")
    broker = Mosquitto()
    out = os.path.join(ws.root, "received")
    sub = None
    try:
        recs = make_records(30000, seed=4)
        folder = os.path.join(ws.inp, SOURCE_PREFIX)
        os.makedirs(folder)
        for k in range(10):
            with open(os.path.join(folder, "p%d.jsonl" % k), "wb") as f:
                f.write(b"\n".join(recs[k::10]) + b"\n")
        with open(out, "wb") as f:
            sub = subprocess.Popen(["mosquitto_sub", "-h", "127.0.0.1", "-p",
                                    str(broker.port), "-V", "5", "-q", "1",
                                    "-t", "out/#", "-F", "%t\t%P\t%p"],
                                   stdout=f, stderr=subprocess.DEVNULL)
        time.sleep(0.5)
        kafka_config(ws, ("File", {"path": ws.inp, "prefix": SOURCE_PREFIX}),
                     ("MQTT", {"broker": broker.address,
                               "topic": "out/{partition}"}),
                     pipeline_extra={"upload_concurrency": 2})
        kill_at_random(ws, KILLS, 0.2, 0.8, once=True)
        ws.sync("--once", timeout=300)
        time.sleep(1)
        sub.terminate()
        sub.wait()
        by_id = {}
        copies = 0
        with open(out, "rb") as f:
            for line in f.read().split(b"\n"):
                if not line:
                    continue
                topic, props, payload = line.split(b"\t", 2)
                rid = [p for p in props.split(b" ")
                       if p.startswith(b"skippr-record:")]
                check(len(rid) == 1, "no skippr-record in %r" % props)
                rid = rid[0]
                if rid in by_id:
                    copies += 1
                    check(by_id[rid] == (topic, payload),
                          "two messages share %r but differ" % rid)
                    continue
                by_id[rid] = (topic, payload)
        got = collections.Counter((t.decode()[len("out/"):], p)
                                  for t, p in by_id.values())
        exp = collections.Counter((expected_key(json.loads(r)), r)
                                  for r in recs)
        check(got == exp, "after dropping repeats: %d lost, %d extra" %
              (sum((exp - got).values()), sum((got - exp).values())))
        print("  %d records delivered, %d repeated copies (same "
              "skippr-record) after %d kills" % (len(recs), copies, KILLS))
    finally:
        if sub and sub.poll() is None:
            sub.kill()
        broker.stop()
        ws.cleanup()


def test_mqtt_errors_are_clear():
    ws = Workspace("merr")
    try:
        dead = "127.0.0.1:%d" % free_port()
        kafka_config(ws, ("MQTT", {"broker": dead, "topic": "a/#"}),
                     ("File", {"path": ws.out}))
        p = ws.sync("--once", check_rc=False, timeout=60)
        check(p.returncode != 0 and "cannot connect to the MQTT broker" in
              p.err, "broker down:\n" + p.err)
        kafka_config(ws, ("File", {"path": ws.inp}),
                     ("MQTT", {"broker": dead, "topic": "a"}))
        p = ws.sync("--once", check_rc=False, timeout=60)
        check(p.returncode != 0 and "cannot connect to the MQTT broker" in
              p.err, "sink broker down:\n" + p.err)
        broker = Mosquitto("password_file %s\n" % os.devnull)
        try:
            kafka_config(ws, ("MQTT", {"broker": broker.address,
                                       "topic": "a/#", "username": "u",
                                       "password": "hunter2"}),
                         ("File", {"path": ws.out}))
            p = ws.sync("--once", check_rc=False, timeout=60)
            check(p.returncode != 0 and "refused the connection" in p.err and
                  "hunter2" not in p.err, "bad credentials:\n" + p.err)
        finally:
            broker.stop()
    finally:
        ws.cleanup()


def make_tls(folder):
    """A CA and a server certificate for 127.0.0.1 signed by it, made with
    the openssl command; returns (ca, cert, key) paths."""
    def run(*args):
        p = subprocess.run(["openssl"] + list(args), cwd=folder,
                           capture_output=True, timeout=60)
        check(p.returncode == 0, "openssl %s: %s" % (args[0],
                                                     p.stderr.decode()))
    run("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
        "-subj", "/CN=skippr test CA", "-keyout", "ca.key", "-out", "ca.pem")
    run("req", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=127.0.0.1",
        "-keyout", "server.key", "-out", "server.csr")
    with open(os.path.join(folder, "san.ext"), "w") as f:
        f.write("subjectAltName=IP:127.0.0.1,DNS:localhost\n")
    run("x509", "-req", "-in", "server.csr", "-CA", "ca.pem", "-CAkey",
        "ca.key", "-CAcreateserial", "-days", "2", "-extfile", "san.ext",
        "-out", "server.pem")
    return tuple(os.path.join(folder, n)
                 for n in ("ca.pem", "server.pem", "server.key"))


def test_mqtt_tls_verifies_the_broker():
    """mqtts:// with the broker's CA copies everything; without the CA
    (verification is on by default) the run fails saying why."""
    ws = Workspace("mtls")
    tls_dir = os.path.join(ws.root, "tls")
    os.makedirs(tls_dir)
    ca, cert, key = make_tls(tls_dir)
    tls_port = free_port()
    # As root, mosquitto would drop to its own user, which cannot read the
    # workspace; "user root" keeps it (and means nothing to a non-root run).
    # The records are published while skipprd is not running: 2,000 wait
    # in the broker's queue for the session, beyond its default 1,000.
    broker = Mosquitto("user root\nlistener %d 127.0.0.1\ncafile %s\n"
                       "certfile %s\nkeyfile %s\n" % (tls_port, ca, cert, key),
                       offline_queue=True)
    try:
        url = "mqtts://127.0.0.1:%d" % tls_port
        kafka_config(ws, ("MQTT", {"broker": url, "topic": "tls/#",
                                   "client_id": "tls-test", "ca_file": ca,
                                   "idle_timeout_seconds": 2}),
                     ("File", {"path": ws.out, "prefix": SINK_PREFIX}))
        ws.sync("--once", timeout=60)  # the session exists from now on
        recs = make_records(2000, seed=13)
        publish(broker, "tls/a", recs)
        p = ws.sync("--once", timeout=120)
        got = output_records(ws.sink_root)
        exp = expected(recs)
        check(got == exp, "over TLS: %d lost, %d extra" % (
            sum((exp - got).values()), sum((got - exp).values())))
        kafka_config(ws, ("MQTT", {"broker": url, "topic": "tls/#",
                                   "client_id": "tls-test-2"}),
                     ("File", {"path": ws.out, "prefix": SINK_PREFIX}))
        p = ws.sync("--once", check_rc=False, timeout=60)
        check(p.returncode != 0 and "certificate" in p.err.lower(),
              "an unknown CA was not refused clearly:\n" + p.err)
        print("  2000 records over mqtts:// with the CA; without it: %s" %
              [ln for ln in p.err.splitlines() if "ertificate" in ln][0][-100:])
    finally:
        broker.stop()
        ws.cleanup()


if __name__ == "__main__":
    main([test_mqtt_errors_are_clear,
          test_mqtt_tls_verifies_the_broker,
          test_mqtt_to_file_at_least_once_across_kills,
          test_file_to_mqtt_at_least_once_across_kills])
