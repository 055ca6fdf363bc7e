#!/usr/bin/env python3
"""skipprd verify on files: a clean copy verifies (exit 0); each kind of
tampering with the sink is found in the partition it touched, with the
records expected and found, and record by record (missing, moved,
duplicated, unexpected, with where each side has it) (exit 6); verify
reads only, and needs no state; --since-state reads only what the copy
finished since the last one and judges partitions still filling later;
records past memory go to disk; shards' digests merge into the same
report; a sink that cannot be read back and a pipeline that converts
records are refused (exit 1)."""
import glob
import json
import os
import re
import shutil
import signal
import subprocess
import time

from skippr_test import (SKIPPRD, Workspace, assert_exact, check, main,
                         run)


def verify(ws, *extra):
    return run(["verify", "--pipeline", "gdpr_compliant_migration",
                "--config", ws.config, *extra], check_rc=False)


def copied(name):
    ws = Workspace(name)
    ws.generate(objects=12, records=150, seed=11)
    ws.write_config()
    ws.sync("--once")
    return ws


def report(ws, rc):
    p = verify(ws, "--json")
    check(p.returncode == rc, "verify exited %d, not %d\n%s%s" % (
        p.returncode, rc, p.out, p.err))
    return json.loads(p.out)


def test_clean_copy_verifies():
    ws = copied("verify-clean")
    try:
        n = assert_exact(ws)
        # a sibling folder whose name starts like the sink's prefix is not
        # the sink's (the source plugins list by prefix text)
        sib = os.path.join(ws.sink_root + "-old", "ns", "x.jsonl")
        os.makedirs(os.path.dirname(sib))
        put_lines(sib, [b'{"event_type":"old"}'])
        j = report(ws, 0)
        check(j["clean"] is True, j)
        check(j["source"]["records"]["records"] == n and
              j["sink"]["records"]["records"] == n,
              "records: %s, the oracle %d" % (j, n))
        check(j["source"]["units"] == 12, j["source"])
        parts = j["partitions"]
        check(parts["total"] == parts["match"] > 10, parts)
        check(j["differences"] == [], j["differences"])
        # the text report says so too
        p = verify(ws)
        check(p.returncode == 0 and "CLEAN: every record" in p.out, p.out)
    finally:
        ws.cleanup()


def lines(path):
    with open(path, "rb") as f:
        return f.read().split(b"\n")[:-1]


def put_lines(path, ls):
    with open(path, "wb") as f:
        f.write(b"".join(x + b"\n" for x in ls))


def partition(ws, path):
    return os.path.dirname(os.path.relpath(path, ws.sink_root))


def tamper(ws):
    """Six changes, each in a partition of its own (one object each):
    what each partition's entry must then say, by partition."""
    objs = sorted(glob.glob(os.path.join(ws.sink_root, "**", "*"),
                            recursive=True))
    by_part = {}
    for o in objs:
        if os.path.isfile(o) and "_skippr" not in o:
            by_part.setdefault(partition(ws, o), []).append(o)
    # (a partition may also hold a .json object of records that span
    # lines: those with one .jsonl object alone are tampered with)
    single = [v[0] for _, v in sorted(by_part.items())
              if len(v) == 1 and v[0].endswith(".jsonl") and
              len(lines(v[0])) >= 3]
    check(len(single) >= 7, "too few partitions to tamper with")
    want = {}

    def expect(o, verdict, delta):
        n = len(lines(o))
        want[partition(ws, o)] = (verdict, n, n + delta)

    a, b, c, d, e, g = single[:6]
    f = min(single[6:], key=lambda o: len(lines(o)))  # the listing holds 20
    rel = lambda o: os.path.relpath(o, ws.out)  # noqa: E731
    recs = []  # (kind, partition, sink object or None, sink offset)
    expect(a, "differ", -1)  # a record deleted
    put_lines(a, lines(a)[1:])
    recs.append(("missing", partition(ws, a), None, None))
    expect(b, "differ", +1)  # a record duplicated
    n = sum(len(x) + 1 for x in lines(b))
    put_lines(b, lines(b) + lines(b)[:1])
    recs.append(("duplicated", partition(ws, b), rel(b), n))
    expect(c, "differ", 0)  # one byte changed inside a record
    ls = lines(c)
    ls[1] = ls[1].replace(b'"', b"'", 1)
    put_lines(c, ls)
    recs.append(("missing", partition(ws, c), None, None))
    recs.append(("unexpected", partition(ws, c), rel(c), len(ls[0]) + 1))
    expect(d, "differ", -1)  # a record moved to another partition
    expect(e, "differ", +1)
    moved = lines(d)
    n = sum(len(x) + 1 for x in lines(e))
    put_lines(d, moved[1:])
    put_lines(e, lines(e) + moved[:1])
    recs.append(("moved", partition(ws, d), rel(e), n))
    expect(f, "missing", -len(lines(f)))  # a whole object deleted
    recs += [("missing", partition(ws, f), None, None)] * len(lines(f))
    os.remove(f)
    expect(g, "differ", +1)  # an extra object added (a record twice)
    extra = os.path.join(os.path.dirname(g), "extra.jsonl")
    put_lines(extra, lines(g)[:1])
    recs.append(("duplicated", partition(ws, g), rel(extra), 0))
    return want, recs


def test_tampering_is_reported():
    ws = copied("verify-tamper")
    try:
        want, recs = tamper(ws)
        j = report(ws, 6)
        check(j["clean"] is False, j)
        got = {x["partition"]: (x["verdict"], x["expected_records"],
                                x["found_records"])
               for x in j["differences"]}
        check(got == want, "reported %s\nwanted %s" % (
            json.dumps(got, indent=1), json.dumps(want, indent=1)))
        parts = j["partitions"]
        check(parts["differ"] == 6 and parts["missing"] == 1 and
              parts["extra"] == 0, parts)
        # record by record: each named, with where the sink has it (a
        # duplicate: either copy, so only its object is checked)
        r = j["records"]
        listed = sorted((x["kind"], x["partition"],
                         x["sink"] and x["sink"]["object"],
                         x["sink"] and x["sink"]["offset"])
                        for x in r["listed"])
        check(len(listed) == len(recs) and not r["partial"],
              "listed %s" % json.dumps(r, indent=1))
        for k, part, obj, off in sorted(recs, key=str):
            hit = [x for x in listed if x[0] == k and x[1] == part and
                   (obj is None or x[2] == obj or k == "duplicated")]
            check(hit and (off is None or k == "duplicated" or
                           hit[0][3] == off),
                  "%s %s %s %s not in %s" % (k, part, obj, off, listed))
        counts = {k: sum(1 for x in recs if x[0] == k)
                  for k in ("missing", "moved", "duplicated", "unexpected")}
        check({k: r[k] for k in counts} == counts, "%s, wanted %s" % (
            {k: r[k] for k in counts}, counts))
        for x in r["listed"]:  # the source's place of what it lost
            check(x["kind"] in ("duplicated", "unexpected") or
                  x["source"]["unit"].startswith("ill-just-dump"), x)
        check(parts["match"] == parts["total"] - 7, parts)
        p = verify(ws)
        check(p.returncode == 6 and "NOT CLEAN" in p.out and
              "missing " in p.out, p.out)
    finally:
        ws.cleanup()


def snapshot(*roots):
    """Every file under roots, with its size and modification time."""
    out = {}
    for r in roots:
        for d, _, fs in os.walk(r):
            for n in fs:
                st = os.stat(os.path.join(d, n))
                out[os.path.join(d, n)] = (st.st_size, st.st_mtime_ns)
    return out


def test_reads_only_and_needs_no_state():
    ws = copied("verify-ro")
    try:
        before = snapshot(ws.inp, ws.out, ws.state)
        report(ws, 0)
        check(snapshot(ws.inp, ws.out, ws.state) == before,
              "verify changed a file")
        # without the state, and before any copy: nothing is in the sink
        os.rename(ws.out, ws.out + ".away")
        os.makedirs(ws.out)
        os.rename(ws.state, ws.state + ".away")
        j = report(ws, 6)
        parts = j["partitions"]
        check(parts["missing"] == parts["total"] > 10 and
              j["sink"]["records"]["records"] == 0, parts)
        check(not os.path.exists(ws.state), "verify made a state")
    finally:
        ws.cleanup()


def since(ws, rc):
    p = verify(ws, "--json", "--since-state")
    check(p.returncode == rc, "verify --since-state exited %d, not %d\n%s%s"
          % (p.returncode, rc, p.out, p.err))
    return json.loads(p.out)


def test_since_state_reads_only_what_is_new():
    ws = copied("verify-since")
    try:
        n = assert_exact(ws)
        # no mark yet: every unit the copy finished is read, and marked
        j = since(ws, 0)
        s = j["since_state"]
        check(s["previous"] == 0 and s["source"]["read"] == 12 and
              s["source"]["before"] == 0 and s["sink"]["before"] == 0 and
              s["sink"]["read"] == j["sink"]["objects"]["data"] > 10, s)
        check(j["source"]["records"]["records"] == n, j["source"])
        check(glob.glob(os.path.join(ws.state, "*", "*.verify", "current")),
              "no mark beside the state in %s" % ws.state)
        objects = s["sink"]["read"]
        # again: nothing is new, nothing is read, and all still compares
        j = since(ws, 0)
        s = j["since_state"]
        check(s["previous"] > 0 and s["source"]["read"] == 0 and
              s["source"]["before"] == 12 and s["sink"]["read"] == 0 and
              s["sink"]["before"] == objects, s)
        check(j["source"]["records"]["records"] == n and
              j["sink"]["records"]["records"] == n, j)
        # new source objects: listed but not copied yet, they wait
        ws.generate(objects=5, records=100, seed=12, first_id=100000)
        s = since(ws, 0)["since_state"]
        check(s["source"]["waiting"] == 5 and s["source"]["read"] == 0, s)
        # copied: only they and the objects they made are read
        ws.sync("--once")
        n2 = assert_exact(ws)
        j = since(ws, 0)
        s = j["since_state"]
        check(s["source"]["read"] == 5 and s["source"]["before"] == 12 and
              s["source"]["waiting"] == 0 and s["sink"]["read"] > 0, s)
        check(j["source"]["records"]["records"] == n2 > n, j["source"])
        # an object added: read as new, and its record named
        objs = sorted(glob.glob(os.path.join(ws.sink_root, "**", "*.jsonl"),
                                recursive=True))
        extra = os.path.join(os.path.dirname(objs[-1]), "extra.jsonl")
        put_lines(extra, lines(objs[-1])[:1])
        j = since(ws, 6)
        check(j["since_state"]["sink"]["read"] == 1 and
              j["records"]["duplicated"] == 1 and
              j["records"]["missing"] == 0, j)
        check(since(ws, 6)["partitions"]["differ"] == 1, "not kept")
        os.remove(extra)
        # a verified object deleted from the sink: found without reading
        # anything, and it stays found
        victim = objs[0]
        os.remove(victim)
        for _ in range(2):
            j = since(ws, 6)
            s = j["since_state"]
            check(s["sink"]["gone"] == 2 and s["source"]["read"] == 0 and
                  j["clean"] is False, s)
        # the plain verify names the records the deletion lost
        check(report(ws, 6)["partitions"]["missing"] +
              report(ws, 6)["partitions"]["differ"] >= 1, "not found")
    finally:
        ws.cleanup()


def stopped_with_slices_open(ws, units):
    """A continuous copy, stopped (SIGTERM) once it has finished every
    unit: its open slices stay in its state. Returns their records."""
    p = subprocess.Popen([SKIPPRD, "sync", "--pipeline",
                          "gdpr_compliant_migration", "--config", ws.config,
                          "--no-progress"], stdout=subprocess.DEVNULL,
                         stderr=subprocess.PIPE)
    try:
        deadline = time.time() + 60
        while True:
            check(time.time() < deadline, "the copy never finished")
            time.sleep(0.2)
            out = run(["status", "--pipeline", "gdpr_compliant_migration",
                       "--config", ws.config]).out
            m = re.search(r"units done: +(\d+) .*\+ (\d+) recent", out)
            if m and int(m.group(1)) + int(m.group(2)) == units:
                break
        p.send_signal(signal.SIGTERM)
        p.communicate(timeout=60)
    finally:
        if p.poll() is None:
            p.kill()
    out = run(["status", "--pipeline", "gdpr_compliant_migration",
               "--config", ws.config]).out
    return int(re.search(r"slices open: +\d+ \((\d+) records", out).group(1))


def test_since_state_waits_for_records_on_their_way():
    ws = Workspace("verify-open")
    try:
        ws.generate(objects=12, records=150, seed=11)
        ws.write_config()
        held = stopped_with_slices_open(ws, 12)
        check(held > 0, "no slice left open")
        # the plain verify finds the records still in the copy's buffer
        # missing; the incremental one leaves their partitions for later
        check(report(ws, 6)["partitions"]["missing"] > 0, "nothing missing")
        j = since(ws, 0)
        check(j["partitions"]["open"] == j["since_state"]["open_partitions"]
              > 0, j["partitions"])
        check(j["source"]["records"]["records"] -
              j["sink"]["records"]["records"] == held, j)
        # a fault outside them is still found
        objs = [o for o in glob.glob(os.path.join(ws.sink_root, "**",
                                                  "*.jsonl"), recursive=True)]
        os.remove(objs[0])
        check(since(ws, 6)["since_state"]["sink"]["gone"] == 1, "not found")
        put_lines(objs[0], [])  # back, but empty: changed since read
        check(since(ws, 6)["since_state"]["sink"]["changed"] == 1,
              "not found")
    finally:
        ws.cleanup()


def test_since_state_judges_partitions_once_landed():
    ws = Workspace("verify-landed")
    try:
        ws.generate(objects=12, records=150, seed=11)
        ws.write_config()
        stopped_with_slices_open(ws, 12)
        j = since(ws, 0)
        check(j["partitions"]["open"] > 0, j["partitions"])
        ws.sync("--once")  # the open slices land
        n = assert_exact(ws)
        j = since(ws, 0)
        check(j["partitions"]["open"] == 0 and j["partitions"]["match"] ==
              j["partitions"]["total"], j["partitions"])
        check(j["since_state"]["source"]["read"] == 0 and
              j["since_state"]["sink"]["read"] > 0, j["since_state"])
        check(j["sink"]["records"]["records"] == n, j["sink"])
    finally:
        ws.cleanup()


def test_records_past_memory_go_to_disk():
    """More records to match than memory_budget's share holds: they are
    spilled to sorted runs in $TMPDIR and merged, none left out, and no
    file left behind."""
    ws = Workspace("verify-spill")
    try:
        ws.generate(objects=70, records=220, seed=5)
        ws.write_config()
        ws.sync("--once")
        n = assert_exact(ws)
        check(n > 3 * 4096, "too few records: %d" % n)
        shutil.rmtree(ws.out)  # every record missing from the sink
        os.makedirs(ws.out)
        ws.write_config(pipeline_extra={"memory_budget": "1MiB"})
        tmp = os.path.join(ws.root, "tmp")
        os.makedirs(tmp)
        p = run(["verify", "--pipeline", "gdpr_compliant_migration",
                 "--config", ws.config, "--json"], check_rc=False,
                env=dict(os.environ, TMPDIR=tmp))
        check(p.returncode == 6, p.err)
        r = json.loads(p.out)["records"]
        check(r["missing"] == n and not r["partial"] and
              r["unexpected"] == 0 and len(r["listed"]) == 20 and
              r["spilled_runs"] >= 3, {k: v for k, v in r.items()
                                       if k != "listed"})
        check(os.listdir(tmp) == [], "left in TMPDIR: %s" % os.listdir(tmp))
    finally:
        ws.cleanup()


def test_sharded_verify_on_one_box():
    """Shards of one box: each verify reads its share and stores its
    digests beside the state folders; the merge compares them."""
    ws = Workspace("verify-shards")
    try:
        ws.generate(objects=12, records=150, seed=11)
        ws.write_config()
        for i in range(3):
            ws.sync("--once", "--shard", "%d/3" % i)
        n = assert_exact(ws)
        units = 0
        for i in range(3):
            p = verify(ws, "--shard", "%d/3" % i)
            check(p.returncode == 0 and "shard %d of 3" % i in p.out, p.err)
            units += int(re.search(r": (\d+) units", p.out).group(1))
        check(units == 12, "the shards read %d units, not 12" % units)
        check(len(glob.glob(os.path.join(ws.state, "*", "*.verify-shards",
                                         "shard-*-of-3"))) == 3,
              "not stored beside the state")
        p = verify(ws, "--merge-shards", "3", "--json")
        j = json.loads(p.out)
        check(p.returncode == 0 and j["clean"] and
              j["sink"]["records"]["records"] == n, p.out)
        whole = report(ws, 0)
        check(j == whole, "the merge says %s, one verify %s" % (j, whole))
    finally:
        ws.cleanup()


def test_what_it_refuses():
    ws = Workspace("verify-stdout")
    try:
        ws.generate(objects=1, records=5, seed=1)
        ws.write_config()
        with open(ws.config) as f:
            text = f.read()
        i = text.index("data_sinks:")
        with open(ws.config, "w") as f:
            f.write(text[:i] + "data_sinks:\n  tenant_layout:\n    Stdout: {}\n")
        p = verify(ws)
        check(p.returncode == 1 and "cannot" in p.err, p.err)
        ws.write_config()
        p = verify(ws, "--shard", "0/2", "--since-state")
        check(p.returncode == 1 and "without --shard" in p.err, p.err)
        p = verify(ws, "--merge-shards", "2", "--shard", "0/2")
        check(p.returncode == 2 and "without --shard" in p.err, p.err)
        p = verify(ws, "--merge-shards", "2")  # none stored yet
        check(p.returncode == 1 and "(0, 1)" in p.err, p.err)
        ws.write_config(sink_format="csv")  # JSON converted to CSV
        p = verify(ws)
        check(p.returncode == 1 and "byte for byte" in p.err and
              "JSON to CSV" in p.err, p.err)
    finally:
        ws.cleanup()


if __name__ == "__main__":
    main([test_clean_copy_verifies, test_tampering_is_reported,
          test_reads_only_and_needs_no_state,
          test_since_state_reads_only_what_is_new,
          test_since_state_waits_for_records_on_their_way,
          test_since_state_judges_partitions_once_landed,
          test_records_past_memory_go_to_disk,
          test_sharded_verify_on_one_box,
          test_what_it_refuses])
