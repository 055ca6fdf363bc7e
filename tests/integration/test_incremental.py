#!/usr/bin/env python3
"""Listing in proportion to new data. A continuous run over a bucket of
old, finished hour prefixes and one live prefix (the current hour): with
nothing new, each poll costs at most (live prefixes + 1) LIST requests at
the proxy, not a listing of the bucket; a key added to the live prefix is
copied within two polls; a key added to an old, sealed prefix is copied by
the next whole listing (full_listing_interval_seconds). A --once run lists
everything unless incremental_listing is set. The output is exact.
With verify_done_units: false, a --once re-run over files skips the done
ones by name, without a stat (test_file_rerun_by_name).
SKIPPR_INCREMENTAL_DAYS sets how many days of old hour prefixes (480
keys a day; default 5, 2,400 keys; 209 days make 100,000)."""
import datetime
import os
import re
import shutil
import subprocess
import time

from s3_test import S3Server
from skippr_test import (SKIPPRD, SOURCE_PREFIX, Workspace, assert_exact,
                         check, expected_records, main, output_records)

TRANSFORM = {"namespace_fields": "event_type"}


def put_local(ws, key, n, tag):
    p = os.path.join(ws.inp, key)
    os.makedirs(os.path.dirname(p), exist_ok=True)
    with open(p, "w") as f:
        for k in range(n):
            f.write('{"event_type":"e%d","timestamp":"2021-10-01T00:00:00Z",'
                    '"tag":"%s","k":%d}\n' % (k % 3, tag, k))


def records_in(root):
    n = 0
    for d, _, fs in os.walk(root):
        if "_skippr" in os.path.relpath(d, root).split(os.sep):
            continue  # the state's claim on the sink
        for fn in fs:
            if not fn.startswith("."):
                with open(os.path.join(d, fn), "rb") as f:
                    n += f.read().count(b"\n")
    return n


def wait_for(pred, secs, what):
    deadline = time.time() + secs
    while not pred():
        check(time.time() < deadline, "timed out: %s" % what)
        time.sleep(0.2)
    return time.time()


def config(ws, extra="", full=8):
    with open(ws.config, "w") as f:
        f.write("""skippr:
  state_dir: %s
pipelines:
  p:
    data_source: data_sources.a
    data_sink: data_sinks.b
    poll_interval_seconds: 1
    full_listing_interval_seconds: %d
    allowed_lateness_seconds: 7200
    buffer_threshold_seconds: 1
%s    transform:
      namespace_fields: event_type
data_sources:
  a:
    S3:
      s3_bucket: src
      s3_prefix: p/
data_sinks:
  b:
    File:
      path: %s
""" % (ws.state, full, extra, ws.out))


def test_polls_list_only_live_prefixes():
    ws = Workspace("incr")
    s3 = S3Server(["src", "dst"])
    try:
        days = int(os.environ.get("SKIPPR_INCREMENTAL_DAYS", "5"))
        first = datetime.date(2021, 10, 1)
        for d in range(days):
            day = (first + datetime.timedelta(days=d)).strftime("%Y/%m/%d")
            for h in range(24):
                for i in range(20):
                    put_local(ws, "p/%s/%02d/obj-%03d.json" % (day, h, i),
                              2, "old")
        live = datetime.datetime.now(datetime.timezone.utc).strftime(
            "p/%Y/%m/%d/%H/")
        for i in range(5):
            put_local(ws, live + "obj-%03d.json" % i, 2, "live")
        total = s3.upload_tree("src", ws.inp)
        # A whole listing of the bucket every 8 s, or, for a big bucket,
        # often enough but with room for incremental polls between two.
        full = max(8, total // 2000)
        config(ws, full=full)
        log = open(os.path.join(ws.root, "log"), "w+")
        p = subprocess.Popen([SKIPPRD, "sync", "-p", "p", "-c", ws.config,
                              "--no-progress", "-vv"],
                             env=dict(os.environ, **s3.env()), stderr=log)
        try:
            want = 2 * total
            wait_for(lambda: records_in(ws.out) >= want, 600,
                     "first copy of %d keys" % total)

            def count(what):
                log.flush()
                with open(log.name) as f:
                    return f.read().count(what)
            def after_whole_listing():
                """Return at the first poll after a whole listing: the
                next whole listing is then about `full` seconds away."""
                w0 = count("(whole listing)")
                wait_for(lambda: count("(whole listing)") > w0, full + 60,
                         "a whole listing")
                i0 = count("(incremental)")
                wait_for(lambda: count("(incremental)") > i0, full + 60,
                         "a poll after the whole listing")

            # Measure between two whole listings: from the first poll
            # after one, for 4 s.
            for _ in range(5):
                after_whole_listing()
                s3.reset_stats()
                p0, w0 = count("(incremental)"), count("(whole listing)")
                time.sleep(4)
                n_polls = count("(incremental)") - p0
                lists = s3.stats()["counts"].get("list", 0)
                if count("(whole listing)") == w0:
                    break
            check(n_polls >= 2, "only %d incremental polls" % n_polls)
            check(lists <= n_polls * 2,
                  "%d LIST requests over %d polls of 1 live prefix" %
                  (lists, n_polls))
            print("  %d keys: %d LIST requests over %d polls with nothing "
                  "new" % (total, lists, n_polls))

            # A key in the live prefix: copied within two polls.
            key = live + "obj-new.json"
            put_local(ws, key, 3, "needle-live")
            with open(os.path.join(ws.inp, key), "rb") as f:
                s3.client.put_object(Bucket="src", Key=key, Body=f.read())
            t0 = time.time()
            t1 = wait_for(lambda: records_in(ws.out) >= want + 3, 30,
                          "the live needle")
            live_s = t1 - t0
            # Two polls (1 s apart), and the slice's 1 s before it is
            # written, with slack for a loaded machine.
            check(live_s <= 4.5, "live needle took %.1f s" % live_s)
            # A key in an old, sealed prefix: not listed by the polls, found
            # by the next whole listing. It is put just after one, so that
            # no whole listing already under way can find it.
            after_whole_listing()
            put_local(ws, "p/2021/10/03/05/obj-needle.json", 4, "needle-old")
            key = "p/2021/10/03/05/obj-needle.json"
            with open(os.path.join(ws.inp, key), "rb") as f:
                s3.client.put_object(Bucket="src", Key=key, Body=f.read())
            t0, w0 = time.time(), count("(whole listing)")
            t1 = wait_for(lambda: records_in(ws.out) >= want + 7,
                          2 * full + 60, "the old needle")
            check(count("(whole listing)") > w0,
                  "the old needle was copied without a whole listing")
            print("  live needle in %.1f s, old needle in %.1f s (whole "
                  "listing every %d s)" % (live_s, t1 - t0, full))
        finally:
            p.terminate()
            p.wait(timeout=60)
            log.close()
        exp = expected_records(ws.inp, prefix="p", transform=TRANSFORM)
        got = output_records(ws.out)
        check(dict(exp) == dict(got), "output differs from input")

        # --once: a whole listing unless incremental_listing is set.
        put_local(ws, "p/2021/10/02/02/obj-once.json", 2, "once")
        key = "p/2021/10/02/02/obj-once.json"
        with open(os.path.join(ws.inp, key), "rb") as f:
            s3.client.put_object(Bucket="src", Key=key, Body=f.read())
        config(ws, "    incremental_listing: true\n")
        before = records_in(ws.out)
        s3.sync(ws.config)
        check(records_in(ws.out) == before,
              "an incremental --once listed a sealed prefix")
        config(ws)
        s3.sync(ws.config)
        check(records_in(ws.out) == before + 2, "a --once missed a key")
    finally:
        s3.close()
        ws.cleanup()


def summary(err):
    """(copied, already done, changed) from a --once run's summary."""
    m = re.search(r"done: (\d+) units copied, (\d+) already done, (\d+) "
                  r"changed", err)
    check(m, "no summary line: %s" % err[-2000:])
    return tuple(int(g) for g in m.groups())


def test_file_rerun_by_name():
    """verify_done_units: false. A re-run over files skips done ones by
    name, without their stat: a done file whose mtime changed goes
    unreported (the default reports it), a new file and a file with no
    date in its key (the listing mark then needs its mtime) are still
    copied, and the output stays exact."""
    ws = Workspace("byname")
    try:
        ws.generate(objects=30, records=40, seed=5)
        undated = os.path.join(ws.inp, SOURCE_PREFIX, "misc", "undated.json")
        os.makedirs(os.path.dirname(undated))
        with open(undated, "w") as f:
            f.write('{"event_type":"login","timestamp":"2021-10-01T00:00:00Z"'
                    ',"detail":{"tenant_id":"t1"}}\n')
        ws.write_config({"verify_done_units": "false"})
        check(summary(ws.sync("--once").err)[:2] == (31, 0),
              "the first run did not copy every file")
        check(summary(ws.sync("--once").err) == (0, 31, 0),
              "a re-run by name did not skip every done file")

        # A done file changed since (a new mtime): skipped by name alone.
        files = sorted(os.path.join(d, f) for d, _, fs in
                       os.walk(os.path.join(ws.inp, SOURCE_PREFIX))
                       for f in fs)
        changed = files[7]
        st = os.stat(changed)
        os.utime(changed, (st.st_atime, st.st_mtime + 100))
        # A new file, dated, among the done ones: copied.
        new = files[3] + "-new"
        shutil.copyfile(files[3], new)
        p = ws.sync("--once")
        check(summary(p.err) == (1, 31, 0),
              "a re-run by name: %s" % (summary(p.err),))
        check("changed since" not in p.err, "a name-only skip compared "
              "versions: %s" % p.err[-1000:])
        assert_exact(ws)

        # The default compares versions, and reports the changed file.
        ws.write_config()
        p = ws.sync("--once", check_rc=False)
        check(p.returncode == 4 and summary(p.err) == (0, 31, 1),
              "a re-run with versions: %s" % (summary(p.err),))
        rel = os.path.relpath(changed, ws.inp)
        check("unit %s changed since it was copied" % rel in p.err,
              "the changed file was not named: %s" % p.err[-1000:])
        assert_exact(ws)
    finally:
        ws.cleanup()


if __name__ == "__main__":
    main([test_polls_list_only_live_prefixes, test_file_rerun_by_name])
