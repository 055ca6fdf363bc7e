#!/usr/bin/env python3
"""Throughput of the Kafka, MQTT and HTTP plugins against local servers,
next to the clients users would use to move the same records.

    python3 bench/plugins.py [--records N] [--runs R]

Every figure is the median of R runs on the same records (JSON, 100-250
bytes, 7 event types x 8 tenants x 2 days = 112 partitions):

  Kafka (librdkafka mock cluster, 64 partitions):
    kcat -P of the records        vs  skipprd file -> Kafka (transactions)
    kcat -C to the end            vs  skipprd Kafka -> file (--once)
  MQTT (mosquitto, QoS 1):
    mosquitto_pub -l              vs  skipprd file -> MQTT
    mosquitto_sub -C N            vs  skipprd MQTT -> file (records queued
                                      for its session while it was away)
  HTTP (tests/tools/http_receiver.py, a Python server, is the receiver):
    skipprd file -> HTTP, and a Python client POSTing 100-record bodies to
    skipprd's push source.

Times include each tool's start-up and, for skipprd, its durable commits
and the final flush; the servers run on the same 2 CPUs.
"""
import argparse
import http.client
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(ROOT, "tests", "integration"))
os.environ.setdefault("KAFKA_BROKER", os.path.join(ROOT, "build", "tests",
                                                   "kafka_broker"))
from skippr_test import SKIPPRD, Workspace  # noqa: E402
from kafka_test import Broker  # noqa: E402
from test_kafka import kafka_config, make_records  # noqa: E402
from test_mqtt import Mosquitto, free_port  # noqa: E402
from test_http import Receiver  # noqa: E402

EVENTS = ["login", "logout", "purchase", "page_view", "truck_ping", "error",
          "signup"]


def timed(fn):
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


def sh(args, **kw):
    p = subprocess.run(args, stdout=subprocess.DEVNULL,
                       stderr=subprocess.PIPE, **kw)
    if p.returncode:
        raise SystemExit("%s failed: %s" % (args[0], p.stderr.decode()[-500:]))


def sync(ws, env=None):
    sh([SKIPPRD, "sync", "--pipeline", "gdpr_compliant_migration",
        "--config", ws.config, "--once", "-q"], env=env, timeout=900)


def row(name, secs, n, nbytes, base=None):
    rate = n / secs
    mb = nbytes / secs / 1e6
    extra = ""
    if base:
        extra = "  %.2fx the client" % (base / secs)
    print("%-44s %8.0f rec/s %7.1f MB/s  (%.2f s)%s" % (name, rate, mb, secs,
                                                        extra))


def bench_kafka(recs, data, runs):
    n, nb = len(recs), len(data)
    lines = b"".join(b"%d\t%s\n" % (i, r) for i, r in enumerate(recs))
    t_kcat_p, t_sk_p, t_kcat_c, t_sk_c = [], [], [], []
    for _ in range(runs):
        b = Broker(dict([("in", 64)] + [("out." + e, 8) for e in EVENTS] +
                        [("skippr.markers", 1)]))
        try:
            t_kcat_p.append(timed(lambda: sh(
                ["kcat", "-P", "-b", b.bootstrap, "-t", "in", "-K", "\t",
                 "-X", "linger.ms=5"], input=lines, timeout=600)))
            t_kcat_c.append(timed(lambda: sh(
                ["kcat", "-C", "-b", b.bootstrap, "-t", "in", "-e", "-q",
                 "-f", "%s\n"], timeout=600)))
            ws = Workspace("bk")
            try:
                kafka_config(ws, ("Kafka", {"brokers": b.bootstrap,
                                            "topic": "in", "group_id": '""'}),
                             ("File", {"path": ws.out}))
                t_sk_c.append(timed(lambda: sync(ws)))
            finally:
                ws.cleanup()
            ws = Workspace("bk2")
            try:
                with open(os.path.join(ws.inp, "in.jsonl"), "wb") as f:
                    f.write(data)
                kafka_config(ws, ("File", {"path": ws.inp}),
                             ("Kafka", {"brokers": b.bootstrap,
                                        "topic": "out.{namespace}"}))
                t_sk_p.append(timed(lambda: sync(ws)))
            finally:
                ws.cleanup()
        finally:
            b.stop()
    m = statistics.median
    print("-- Kafka (mock cluster), %d records, %.1f MB" % (n, nb / 1e6))
    row("kcat -P (produce)", m(t_kcat_p), n, nb)
    row("skipprd file -> Kafka (transactional)", m(t_sk_p), n, nb,
        m(t_kcat_p))
    row("kcat -C (consume to the end)", m(t_kcat_c), n, nb)
    row("skipprd Kafka -> file (--once, durable)", m(t_sk_c), n, nb,
        m(t_kcat_c))


def mqtt_pub(port, topic, recs):
    """mosquitto_pub -l in runs of 10,000 lines (one long run of QoS 1
    lines can end before its last messages are acknowledged)."""
    for i in range(0, len(recs), 10000):
        sh(["mosquitto_pub", "-h", "127.0.0.1", "-p", port, "-q", "1",
            "-t", topic, "-l"], input=b"\n".join(recs[i:i + 10000]) + b"\n",
           timeout=600)


def bench_mqtt(recs, data, runs):
    n, nb = len(recs), len(data)
    t_pub, t_sub, t_sk_p, t_sk_c = [], [], [], []
    for _ in range(runs):
        # Records wait in skipprd's session while it is not running:
        # beyond the default queue of 1,000 (docs/CONFIG.md, MQTT).
        m = Mosquitto(offline_queue=True)
        try:
            port = str(m.port)
            sub = subprocess.Popen(["mosquitto_sub", "-h", "127.0.0.1", "-p",
                                    port, "-q", "1", "-t", "b/#", "-C",
                                    str(n), "-W", "300"],
                                   stdout=subprocess.DEVNULL)
            time.sleep(0.3)
            t0 = time.perf_counter()
            mqtt_pub(port, "b/x", recs)
            t_pub.append(time.perf_counter() - t0)
            if sub.wait(600):
                raise SystemExit("mosquitto_sub did not get every message")
            t_sub.append(time.perf_counter() - t0)
            # skipprd MQTT -> file: the records wait in its session.
            ws = Workspace("bm")
            try:
                kafka_config(ws, ("MQTT", {"broker": m.address,
                                           "topic": "c/#",
                                           "client_id": "bench",
                                           "idle_timeout_seconds": 1}),
                             ("File", {"path": ws.out}))
                sync(ws)  # subscribe
                mqtt_pub(port, "c/x", recs)
                t_sk_c.append(timed(lambda: sync(ws)) - 1.0)
            finally:
                ws.cleanup()
            ws = Workspace("bm2")
            try:
                with open(os.path.join(ws.inp, "in.jsonl"), "wb") as f:
                    f.write(data)
                kafka_config(ws, ("File", {"path": ws.inp}),
                             ("MQTT", {"broker": m.address,
                                       "topic": "out/{partition}"}))
                t_sk_p.append(timed(lambda: sync(ws)))
            finally:
                ws.cleanup()
        finally:
            m.stop()
    md = statistics.median
    print("-- MQTT (mosquitto, QoS 1), %d records, %.1f MB" % (n, nb / 1e6))
    row("mosquitto_pub -l", md(t_pub), n, nb)
    row("skipprd file -> MQTT", md(t_sk_p), n, nb, md(t_pub))
    row("mosquitto_sub (until all received)", md(t_sub), n, nb)
    row("skipprd MQTT -> file (less the 1 s idle end)", md(t_sk_c), n, nb,
        md(t_sub))


def bench_http(recs, data, runs):
    n, nb = len(recs), len(data)
    t_sink, t_push = [], []
    for _ in range(runs):
        ws = Workspace("bh")
        recv = Receiver(ws.root)
        try:
            with open(os.path.join(ws.inp, "in.jsonl"), "wb") as f:
                f.write(data)
            kafka_config(ws, ("File", {"path": ws.inp}),
                         ("HTTP", {"url": "http://127.0.0.1:%d/in" %
                                   recv.port}))
            t_sink.append(timed(lambda: sync(ws)))
        finally:
            recv.stop()
            ws.cleanup()
        ws = Workspace("bh2")
        port = free_port()
        try:
            kafka_config(ws, ("HTTP", {"listen": "127.0.0.1:%d" % port,
                                       "idle_timeout_seconds": 1}),
                         ("File", {"path": ws.out}))
            p = subprocess.Popen([SKIPPRD, "sync", "--pipeline",
                                  "gdpr_compliant_migration", "--config",
                                  ws.config, "--once", "-q"])
            time.sleep(0.3)
            bodies = [b"\n".join(recs[i:i + 100]) for i in
                      range(0, n, 100)]
            t0 = time.perf_counter()
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
            for body in bodies:
                c.request("POST", "/", body=body)
                r = c.getresponse()
                r.read()
                if r.status != 200:
                    raise SystemExit("push answered %d" % r.status)
            t_push.append(time.perf_counter() - t0)
            c.close()
            p.wait(120)
        finally:
            ws.cleanup()
    md = statistics.median
    print("-- HTTP, %d records, %.1f MB" % (n, nb / 1e6))
    row("skipprd file -> HTTP (1 MB POSTs, Python "
        "receiver)", md(t_sink), n, nb)
    row("skipprd HTTP push -> file (100-record POSTs, "
        "each 200 once durable)", md(t_push), n, nb)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--records", type=int, default=200000)
    ap.add_argument("--runs", type=int, default=3)
    a = ap.parse_args()
    recs = make_records(a.records, seed=9, days=2)
    data = b"\n".join(recs) + b"\n"
    ap_only = os.environ.get("SKIPPR_BENCH_ONLY", "kafka,mqtt,http")
    if "kafka" in ap_only:
        bench_kafka(recs, data, a.runs)
    if "mqtt" in ap_only:
        bench_mqtt(recs, data, a.runs)
    if "http" in ap_only:
        bench_http(recs, data, a.runs)


if __name__ == "__main__":
    main()
