#!/usr/bin/env python3
"""The Prometheus endpoint (metrics_listen): promtool accepts its output,
and once a continuous run has copied everything, its counters agree with
the summary line the run logs when stopped. A port in use is a clear
error."""
import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.request

from skippr_test import (SKIPPRD, SOURCE_DIR, Workspace, check, free_port,
                         main, run)

PROMTOOL = os.path.join(SOURCE_DIR, "tests", "tools", ".promtool", "usr",
                        "bin", "promtool")
PIPE = "gdpr_compliant_migration"


def scrape(port):
    with urllib.request.urlopen("http://127.0.0.1:%d/metrics" % port,
                                timeout=5) as r:
        check(r.headers["Content-Type"].startswith("text/plain; version=0.0.4"),
              r.headers["Content-Type"])
        return r.read().decode()


def value(text, name, labels=""):
    m = re.search(r"^%s\{pipeline=\"%s\"%s\} (\S+)$" % (
        re.escape(name), PIPE, re.escape(labels)), text, re.M)
    check(m, "no %s%s in:\n%s" % (name, labels, text))
    return float(m.group(1))


def test_metrics_agree_and_pass_promtool():
    check(os.path.exists(PROMTOOL), "no promtool at %s (scripts/setup.sh "
          "unpacks it)" % PROMTOOL)
    ws = Workspace("metrics")
    try:
        ws.generate(objects=30, records=300, seed=8)
        port = free_port()
        ws.write_config(pipeline_extra={"poll_interval_seconds": 1})
        with open(ws.config) as f:
            text = f.read()
        with open(ws.config, "w") as f:
            f.write(text.replace("skippr:\n", "skippr:\n  metrics_listen: "
                                 "127.0.0.1:%d\n" % port, 1))
        p = subprocess.Popen([SKIPPRD, "sync", "--pipeline", PIPE,
                              "--config", ws.config, "--no-progress"],
                             stdout=subprocess.DEVNULL,
                             stderr=subprocess.PIPE)
        try:
            deadline = time.time() + 60
            last = None
            while True:
                check(time.time() < deadline, "no steady state: %s" % last)
                time.sleep(0.5)
                try:
                    t = scrape(port)
                except OSError:
                    continue
                now = [value(t, n) for n in (
                    "skippr_units_done_total", "skippr_records_total",
                    "skippr_objects_written_total", "skippr_slices_pending")]
                if now[0] >= 30 and now[3] == 0 and now == last:
                    break
                last = now
            pc = subprocess.run([PROMTOOL, "check", "metrics"], input=t,
                                capture_output=True, text=True, timeout=60)
            check(pc.returncode == 0, "promtool: %s%s" % (pc.stdout,
                                                          pc.stderr))
            p.send_signal(signal.SIGTERM)
            _, err = p.communicate(timeout=60)
        finally:
            if p.poll() is None:
                p.kill()
        err = err.decode()
        m = re.search(r"(\d+) units copied, (\d+) already done, (\d+) changed "
                      r"and skipped; (\d+) records, (\d+) dead-lettered; "
                      r"(\d+) objects written", err)
        check(m, err)
        units, done, changed, records, dead, objects = map(int, m.groups())
        got = (value(t, "skippr_units_done_total"),
               value(t, "skippr_units_skipped_total", ',reason="done"'),
               value(t, "skippr_units_skipped_total", ',reason="changed"'),
               value(t, "skippr_records_total"),
               value(t, "skippr_dead_letters_total"),
               value(t, "skippr_objects_written_total"))
        check(got == (units, done, changed, records, dead, objects),
              "metrics %s, summary %s" % (got, m.groups()))
        check(value(t, "skippr_slices_open") > 0 and
              value(t, "skippr_bytes_buffered") > 0, t)
        check(units == 30 and records > 0, err)
        # The plugins' counters, where PLUGINS.md says: the summary's last
        # lines and skippr_plugin_total.
        opened = re.search(r"File source \(data_sources\.\w+\): "
                           r"files_opened=(\d+)", err)
        check(opened and value(t, "skippr_plugin_total",
                               ',side="source",name="files_opened"') ==
              int(opened.group(1)), "plugin counter: %s" % err[-800:])
        print("  promtool passes; %d units, %d records, %d objects agree" %
              (units, records, objects))
    finally:
        ws.cleanup()


def test_port_in_use():
    ws = Workspace("metrics-busy")
    try:
        ws.generate(objects=2, records=10, seed=9)
        ws.write_config()
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            s.listen(1)
            port = s.getsockname()[1]
            p = run(["sync", "--pipeline", PIPE, "--config", ws.config,
                     "--once", "--metrics-listen", "127.0.0.1:%d" % port],
                    check_rc=False)
        check(p.returncode == 1 and "cannot listen" in p.err, p.err)
        p = run(["sync", "--pipeline", PIPE, "--config", ws.config,
                 "--once", "--metrics-listen", "localhost"], check_rc=False)
        check(p.returncode == 1 and "IPv4-ADDRESS:PORT" in p.err, p.err)
    finally:
        ws.cleanup()


if __name__ == "__main__":
    main([test_metrics_agree_and_pass_promtool, test_port_in_use])
