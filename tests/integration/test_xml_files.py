#!/usr/bin/env python3
"""XML through the seed's pipeline, file -> file.

Shows: a generated XML archive (mixed event types; the tenant in one of
two child paths, detail/tenant_id or truck/tenant_id, or in an attribute;
five time formats; entities, CDATA, comments and processing instructions;
namespaces on the root; self-closing records; nested elements of the
record's own name; gzip; objects with and without a .xml extension; two
root tags) is copied with every record byte-equal and under the folder
its values dictate; each output object is a well-formed document (xmllint)
that starts with its source's declaration and root start tag, so records
under different roots never share an object; a malformed record is
dead-lettered with its offset while the rest copies; xml_record_element
picks nested records; kills mid-object resume without loss or
duplication.
"""
import collections
import gzip
import os
import random
import re
import subprocess
import time

from skippr_test import (Workspace, check, dead_letters, expected_key,
                         kill_until_resumed, main,
                         SOURCE_PREFIX)

TYPES = ["login", "logout", "purchase", "truck_ping", "error"]
TENANTS = ["acme", "globex", "initech", "umbrella", "hooli", "a&b"]
ROOT_A = '<ev:events xmlns:ev="urn:ev" xmlns="urn:d" version="1">'
ROOT_B = "<archive source='firehose'>"
DECL = '<?xml version="1.0" encoding="UTF-8"?>'


def esc(s):
    return s.replace("&", "&amp;").replace("<", "&lt;")


def timestamp(rng, sec):
    t = time.gmtime(sec)
    style = rng.randrange(5)
    if style == 0:
        return time.strftime("%Y-%m-%dT%H:%M:%SZ", t)
    if style == 1:
        return str(sec)
    if style == 2:
        return str(sec * 1000 + rng.randrange(1000))
    if style == 3:
        return time.strftime("%Y-%m-%d %H:%M:%S", t)
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(sec + 3600)) + "+01:00"


def make_record(rng, i, name="event"):
    """(record bytes, dict for the routing oracle)."""
    et = rng.choice(TYPES)
    sec = 1633219200 + rng.randrange(4 * 86400)
    ts = timestamp(rng, sec)
    tenant = rng.choice(TENANTS) if rng.randrange(15) else ""
    obj = {"event_type": et, "timestamp": ts}
    parts = []
    style = rng.randrange(4)
    # the type as a child element or as an attribute
    attrs = ' id="%d"' % i
    if rng.randrange(3) == 0:
        attrs += ' type="%s"' % et
        et_xml = ""
    else:
        et_xml = "<event_type>%s</event_type>" % et
    parts.append(et_xml)
    if rng.randrange(2):
        parts.append("<timestamp>%s</timestamp>" % ts)
    else:
        parts.append("<timestamp><![CDATA[%s]]></timestamp>" % ts)
    if tenant:
        holder = "truck" if et == "truck_ping" else "detail"
        obj[holder] = {"tenant_id": tenant}
        inner = "<tenant_id>%s</tenant_id>" % esc(tenant)
        if style == 1:
            inner = "<!-- t --><tenant_id> %s </tenant_id>" % esc(tenant)
        parts.append("<%s>%s<n>%d</n></%s>" % (holder, inner, i, holder))
    if style == 2:
        parts.append("<?audit done?><note>caf&#233; &lt;x&gt;</note>")
    if style == 3:
        # an element of the record's own name inside it, with a tenant of
        # its own that is not the record's
        parts.append("<%s><detail><tenant_id>zz</tenant_id></detail></%s>" %
                     (name, name))
    if not tenant and style == 0 and not et_xml:
        rec = "<%s%s/>" % (name, attrs)  # self-closing: a type attribute
        obj = {"event_type": et}
        return rec.encode(), obj
    rec = "<%s%s>%s</%s>" % (name, attrs, "".join(parts), name)
    return rec.encode(), obj


TRANSFORM = {
    "namespace_fields": "event_type,@type",
    "batch_partition_fields": "detail.tenant_id,truck.tenant_id",
    "batch_time_fields": "timestamp",
    "batch_time_unit": "day",
    "time_partition_prefix": "p_",
}


def oracle_key(obj):
    # the oracle reads "@type" as a key of the record like any other
    o = dict(obj)
    return expected_key(o, dict(TRANSFORM, namespace_fields="event_type"))


def generate(root, objects, records, seed):
    """Writes the archive; returns Counter((key, head, record bytes))."""
    rng = random.Random(seed)
    want = collections.Counter()
    rid = 0
    for o in range(objects):
        rt = ROOT_A if o % 2 else ROOT_B
        head = (DECL + "\n" + rt).encode()
        body = [DECL, "<!-- exported -->", rt]
        for _ in range(records):
            raw, obj = make_record(rng, rid)
            rid += 1
            body.append("  " + raw.decode())
            if rng.randrange(10) == 0:
                body.append("  <!-- between -->")
            want[(oracle_key(obj), head, raw)] += 1
        body.append("</%s>" % rt[1:].split()[0].rstrip(">"))
        data = ("\n" if o % 3 else "\r\n").join(body).encode() + b"\n"
        folder = os.path.join(root, SOURCE_PREFIX, "2021/10/0%d" % (3 + o % 4))
        os.makedirs(folder, exist_ok=True)
        name = "events-%04d" % o + (".xml" if o % 2 else "")
        if o % 5 == 2:
            data = gzip.compress(data)
            name += ".gz"
        with open(os.path.join(folder, name), "wb") as f:
            f.write(data)
    return want


RECORD = re.compile(rb"^(<[^>]*>)")


def output(ws):
    """Counter((folder, head, record bytes)); every object checked."""
    got = collections.Counter()
    root = ws.sink_root
    paths = []
    for dirpath, _, files in os.walk(root):
        rel = os.path.relpath(dirpath, root)
        if rel.split(os.sep)[0] in ("_errors", "_skippr"):
            continue
        for fn in files:
            check(fn.startswith("apply-") and fn.endswith(".xml"),
                  "bad object name %s/%s" % (rel, fn))
            path = os.path.join(dirpath, fn)
            paths.append(path)
            with open(path, "rb") as f:
                lines = f.read().split(b"\n")
            check(lines[-1] == b"" and lines[-2].startswith(b"</"),
                  "%s does not end with the root's close tag" % fn)
            head = lines[0] + b"\n" + lines[1]
            for raw in lines[2:-2]:
                got[(rel, head, raw)] += 1
    for i in range(0, len(paths), 200):
        p = subprocess.run(["xmllint", "--noout"] + paths[i:i + 200],
                           capture_output=True, text=True)
        check(p.returncode == 0, "not well-formed: %s" % p.stderr[:500])
    return got


def assert_xml_exact(ws, want):
    got = output(ws)
    lost, extra = want - got, got - want
    for k in list(lost)[:3]:
        print("  lost: %r" % (k,))
    for k in list(extra)[:3]:
        print("  extra: %r" % (k,))
    check(not lost and not extra, "%d records lost, %d unexpected (of %d)" %
          (sum(lost.values()), sum(extra.values()), sum(want.values())))
    return sum(want.values())


def config(ws, pipeline_extra=None, source_extra=None):
    ws.write_config(sink_format="xml", transform=TRANSFORM,
                    pipeline_extra=pipeline_extra, source_extra=source_extra)


def test_xml_archive_byte_equal():
    ws = Workspace("xml")
    try:
        want = generate(ws.inp, objects=10, records=300, seed=3)
        config(ws)
        p = ws.sync("--once")
        n = assert_xml_exact(ws, want)
        check("%d records" % n in p.err and "0 dead-lettered" in p.err, p.err)
        heads = {k[1] for k in output(ws)}
        check(len(heads) == 2, "expected two headers, got %d" % len(heads))
        print("  %d records exact, each object well-formed" % n)
    finally:
        ws.cleanup()


def test_bad_record_and_record_element():
    ws = Workspace("xml-bad")
    try:
        folder = os.path.join(ws.inp, SOURCE_PREFIX, "2021/10/03")
        os.makedirs(folder)
        good = (b"<event><event_type>login</event_type><timestamp>"
                b"1633219200</timestamp></event>")
        bad = b"<event><event_type>login</event_type><x></event>"
        data = b"<r>\n" + good + b"\n" + bad + b"\n" + good + b"\n</r>\n"
        with open(os.path.join(folder, "a.xml"), "wb") as f:
            f.write(data)
        config(ws)
        p = ws.sync("--once")
        check("2 records" in p.err and "1 dead-lettered" in p.err, p.err)
        dl = dead_letters(ws.sink_root)
        check([b for _, b in dl] == [bad] and
              dl[0][0]["offset"] == data.index(bad), "dead letters %r" % dl)
    finally:
        ws.cleanup()
    ws = Workspace("xml-elem")
    try:
        folder = os.path.join(ws.inp, SOURCE_PREFIX, "2021/10/03")
        os.makedirs(folder)
        recs = [b'<item type="login"><timestamp>1633219200</timestamp>'
                b'<detail><tenant_id>t%d</tenant_id></detail></item>' % i
                for i in range(6)]
        data = (b"<feed><batch>" + b"".join(recs[:3]) + b"</batch><meta/>"
                b"<batch>" + b"".join(recs[3:]) + b"</batch></feed>")
        with open(os.path.join(folder, "b.xml"), "wb") as f:
            f.write(data)
        config(ws, source_extra={"xml_record_element": "item"})
        p = ws.sync("--once")
        check("6 records" in p.err, p.err)
        got = output(ws)
        check(sorted(k[2] for k in got) == sorted(recs), "records %r" % got)
        check(all(k[0].startswith("login/p_tenant_id=t") for k in got),
              "folders %r" % [k[0] for k in got])
    finally:
        ws.cleanup()


def test_crash_mid_object_resumes():
    """Kills at the Nth source read (a commit after every window:
    commit_interval_ms 0, since commits of slices growing in the sink
    otherwise wait for 128 KiB of input per open slice) until a run
    resumes an XML object part-way; then everything is exact."""
    ws = Workspace("xml-crash")
    try:
        want = generate(ws.inp, objects=2, records=60000, seed=8)
        config(ws, pipeline_extra={"commit_interval_ms": 0})
        resumed = kill_until_resumed(ws)
        check(resumed > 0, "no run resumed an object part-way")
        n = assert_xml_exact(ws, want)
        print("  %d records exact after kills mid-object (%d resumed)" %
              (n, resumed))
    finally:
        ws.cleanup()


if __name__ == "__main__":
    main([test_xml_archive_byte_equal, test_bad_record_and_record_element,
          test_crash_mid_object_resumes])
