#!/usr/bin/env python3
"""A unit that changed since it was copied is never a silent success
(issue 38): changed_units skip (the default), copy and fail, each with
its log line, its summary, its metric and its exit status.

An archive is copied; one of its files then grows by a record. Then:
- skip (continuous, with /metrics): the unit is named in the log,
  skippr_units_skipped_total{reason="changed"} counts it (once a poll),
  so does the summary, and the run exits 4 when stopped; `--once`
  exits 4 too, and nothing is written;
- fail (`--once`): an error names the unit, exit 1, nothing written;
- copy (continuous, with /metrics): skippr_units_recopied_total is 1, the
  new version is copied whole (the records the versions share are then in
  the sink twice, as documented), exit 0; a run after it has nothing to do.
"""
import glob
import os
import re
import signal
import subprocess
import time

from skippr_test import (SKIPPRD, Workspace, check, compare,
                         expected_records, free_port, main, output_records)
from test_metrics import PIPE, scrape, value


def config(ws, policy, port=None):
    extra = {"poll_interval_seconds": 1}
    if policy:
        extra["changed_units"] = policy
    ws.write_config(pipeline_extra=extra)
    if port:
        with open(ws.config) as f:
            text = f.read()
        with open(ws.config, "w") as f:
            f.write(text.replace("skippr:\n", "skippr:\n  metrics_listen: "
                                 "127.0.0.1:%d\n" % port, 1))


def once(ws):
    return subprocess.run([SKIPPRD, "sync", "--once", "--pipeline", PIPE,
                           "--config", ws.config], capture_output=True,
                          text=True, timeout=120)


def continuous(ws, port, until):
    """Run until the metrics satisfy until(text), then SIGTERM. Returns
    (exit code, stderr, the last scrape)."""
    p = subprocess.Popen([SKIPPRD, "sync", "--pipeline", PIPE, "--config",
                          ws.config, "--no-progress"],
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    t = ""
    try:
        deadline = time.time() + 60
        while True:
            check(time.time() < deadline, "metrics never got there:\n%s" % t)
            time.sleep(0.3)
            try:
                t = scrape(port)
            except OSError:
                continue
            if until(t):
                break
        p.send_signal(signal.SIGTERM)
        _, err = p.communicate(timeout=60)
    finally:
        if p.poll() is None:
            p.kill()
    return p.returncode, err.decode(), t


def test_changed_units_each_policy():
    ws = Workspace("changed")
    try:
        ws.generate(objects=4, records=40, seed=38)
        config(ws, None)
        p = once(ws)
        check(p.returncode == 0, p.stderr[-1500:])
        before = output_records(ws.sink_root)
        old = expected_records(ws.inp)
        # One file grows by a copy of its last line.
        victim = sorted(f for f in glob.glob(os.path.join(ws.inp, "**", "*"),
                                             recursive=True)
                        if os.path.isfile(f))[0]
        unit = os.path.relpath(victim, ws.inp)
        with open(victim, "rb") as f:
            data = f.read()
        check(not data.startswith(b"\x1f\x8b") and
              not data.startswith(b"\x28\xb5\x2f\xfd"),
              "%s is compressed; pick another seed" % unit)
        with open(victim, "ab") as f:
            f.write(b'{"event_type":"grown","n":1}\n')

        # skip, continuous: the metric, the summary, exit 4.
        port = free_port()
        config(ws, None, port)
        rc, err, t = continuous(ws, port, lambda t: value(
            t, "skippr_units_skipped_total", ',reason="changed"') >= 1)
        check(rc == 4, "skip: exit %s\n%s" % (rc, err[-1500:]))
        m = re.search(r"0 units copied, (\d+) already done, (\d+) changed "
                      r"and skipped", err)
        check(m and int(m.group(1)) == 3 * int(m.group(2)) and
              "changed since it was copied" in err and unit in err and
              "exit code 4" in err, err[-1500:])
        p = once(ws)
        check(p.returncode == 4 and "1 changed and skipped" in p.stderr,
              "skip --once: exit %d\n%s" % (p.returncode, p.stderr[-1500:]))
        check(output_records(ws.sink_root) == before, "skip wrote something")

        # fail: an error naming the unit, exit 1, nothing written.
        config(ws, "fail")
        p = once(ws)
        check(p.returncode == 1 and "error: " in p.stderr and unit in
              p.stderr and "changed_units: fail" in p.stderr,
              "fail: exit %d\n%s" % (p.returncode, p.stderr[-1500:]))
        check(output_records(ws.sink_root) == before, "fail wrote something")

        # copy: the new version whole, exit 0, then nothing to do.
        port = free_port()
        config(ws, "copy", port)
        rc, err, t = continuous(ws, port, lambda t: value(
            t, "skippr_units_recopied_total") == 1 and value(
                t, "skippr_units_done_total") == 1 and value(
                    t, "skippr_slices_pending") == 0)
        check(rc == 0, "copy: exit %s\n%s" % (rc, err[-1500:]))
        check("copied again whole" in err and unit in err, err[-1500:])
        p = once(ws)
        check(p.returncode == 0 and "0 units copied, 4 already done, 0 "
              "changed" in p.stderr, "after copy: %s" % p.stderr[-1500:])
        # The first run's records, and the grown file's new version whole.
        new = expected_records(ws.inp)
        want = old + (new - expected_records(ws.inp, skip=(victim,)))
        lost, dup, unexpected = compare(want, output_records(ws.sink_root))
        check((lost, dup, unexpected) == (0, 0, 0), "copy: %d lost, %d "
              "duplicated, %d unexpected" % (lost, dup, unexpected))
        print("  skip: exit 4, metric 1, nothing written; fail: exit 1; "
              "copy: metric 1, the new version whole, exit 0")
    finally:
        ws.cleanup()


if __name__ == "__main__":
    main([test_changed_units_each_policy])
