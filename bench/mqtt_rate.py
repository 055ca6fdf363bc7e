#!/usr/bin/env python3
"""MQTT at a broker's defaults: records per second of skipprd's MQTT source
and of mosquitto_sub, against Debian's mosquitto with nothing configured
but a listener (max_inflight_messages 20, max_queued_messages 1000), with
a publisher sending QoS 1 records at full speed (mosquitto_pub -l).

    bench/mqtt_rate.py [--skipprd PATH] [--counts 6000,60000] [--runs 3]
                       [--plugin-dir DIR]

For each count and run: a fresh broker; the subscriber connects (QoS 1,
persistent session), then the publisher sends. mosquitto_sub's time is
from the publisher's start to the arrival of its last record (-F %U); skipprd's (sync --once,
File sink, acknowledging only after the WAL has the records) from the
publisher's start to its exit, less its idle_timeout_seconds. Prints each
run and the medians; a record lost or a broker line "Outgoing messages are
being dropped" for the subscriber is reported.
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
IDLE = 2

# The tests' broker: a listener on 127.0.0.1, every limit at its default,
# its log kept for dropped().
sys.path.insert(0, os.path.join(ROOT, "tests", "integration"))
from test_mqtt import Mosquitto  # noqa: E402


def records(path, n):
    with open(path, "w") as f:
        for i in range(n):
            f.write(json.dumps({"event_type": "e%d" % (i % 7), "id": i,
                                "timestamp": 1633219200 + i,
                                "detail": {"tenant_id": "t%d" % (i % 8)}}) +
                    "\n")


def publish(port, path):
    with open(path, "rb") as f:
        subprocess.run(["mosquitto_pub", "-h", "127.0.0.1", "-p", str(port),
                        "-t", "ev", "-q", "1", "-l"], stdin=f, check=True)


def run_sub(d, n, path):
    b = Mosquitto()
    try:
        out = os.path.join(d, "sub.out")
        with open(out, "wb") as f:
            # %U: each message's arrival time, so a run that loses some
            # (and so waits for -W) still gives the time to its last one.
            sub = subprocess.Popen(["mosquitto_sub", "-h", "127.0.0.1", "-p",
                                    str(b.port), "-t", "ev", "-q", "1", "-c",
                                    "-i", "bench-sub", "-C", str(n), "-W",
                                    "15", "-F", "%U"], stdout=f)
            time.sleep(0.5)  # subscribed
            t = time.time()
            publish(b.port, path)
            sub.wait(60)
        with open(out, "rb") as f:
            stamps = [float(line) for line in f if line.strip()]
        secs = (max(stamps) - t) if stamps else 0
        return len(stamps), secs, b.dropped("bench-sub")
    finally:
        b.stop()


def run_skipprd(d, n, path, skipprd, plugin_dir):
    b = Mosquitto()
    try:
        out, st = os.path.join(d, "out"), os.path.join(d, "st")
        cfg = os.path.join(d, "skippr.yml")
        with open(cfg, "w") as f:
            f.write("skippr:\n  state_dir: %s\n%s"
                    "pipelines:\n  p:\n    data_source: data_sources.m\n"
                    "    data_sink: data_sinks.f\n"
                    "data_sources:\n  m:\n    MQTT:\n      broker: 127.0.0.1:%d\n"
                    "      topic: ev\n      client_id: bench-skipprd\n"
                    "      qos: 1\n      idle_timeout_seconds: %d\n"
                    "data_sinks:\n  f:\n    File:\n      path: %s\n" % (
                        st, ("  plugin_dirs: [%s]\n" % plugin_dir
                             if plugin_dir else ""), b.port, IDLE, out))
        sk = subprocess.Popen([skipprd, "sync", "-p", "p", "--once", "-c",
                               cfg, "--no-progress"],
                              stderr=subprocess.PIPE, text=True)
        time.sleep(0.5)  # subscribed (it waits IDLE s for a first message)
        t = time.monotonic()
        publish(b.port, path)
        err = sk.communicate(timeout=600)[1]
        secs = time.monotonic() - t - IDLE
        if sk.returncode != 0:
            sys.exit("skipprd failed:\n" + err[-2000:])
        got = 0
        for dp, _, files in os.walk(out):
            for fn in files:
                with open(os.path.join(dp, fn), "rb") as f:
                    got += sum(1 for _ in f)
        return got, secs, b.dropped("bench-skipprd")
    finally:
        b.stop()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--skipprd", default=os.path.join(ROOT, "build",
                                                      "runtime", "skipprd"))
    ap.add_argument("--counts", default="6000,60000")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--plugin-dir", default=None,
                    help="load the MQTT plugin from here (old vs new)")
    a = ap.parse_args()
    for n in (int(x) for x in a.counts.split(",")):
        rates = {"mosquitto_sub": [], "skipprd": []}
        for r in range(a.runs):
            for who in ("mosquitto_sub", "skipprd"):
                d = tempfile.mkdtemp(prefix="skippr-mqtt-bench-")
                try:
                    path = os.path.join(d, "recs.jsonl")
                    records(path, n)
                    got, secs, dropped = (
                        run_sub(d, n, path) if who == "mosquitto_sub" else
                        run_skipprd(d, n, path, a.skipprd, a.plugin_dir))
                finally:
                    shutil.rmtree(d, ignore_errors=True)
                rate = got / secs if secs > 0 else 0
                rates[who].append(rate)
                print("%6d records, run %d, %-13s: %6d received (%d lost), "
                      "%.2f s, %7.0f records/s%s" % (
                          n, r + 1, who, got, n - got, secs, rate,
                          ", broker dropped for it %d times" % dropped
                          if dropped else ""), flush=True)
        sub = statistics.median(rates["mosquitto_sub"])
        sk = statistics.median(rates["skipprd"])
        print("%6d records: median mosquitto_sub %.0f/s, skipprd %.0f/s "
              "(%.2fx)" % (n, sub, sk, sk / sub if sub else 0), flush=True)


if __name__ == "__main__":
    main()
