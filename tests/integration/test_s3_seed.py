#!/usr/bin/env python3
"""The seed's walkthrough, bucket to bucket, against s3rver.

The YAML is ../shared/seed/skippr.yml, unchanged; only the endpoint and
credentials come from the environment. The records carry their time under
the seed's batch_time_fields (time, system_datetime or date). The output is read back with boto3 and compared with
the oracle: every record byte-equal and under its partition. A second
--once issues no GET of a committed object and writes nothing (the proxy
counts requests); one new object dropped in is the only one read.
skipprd verify then finds the copy clean without writing to S3, and finds
an object deleted from the sink.
"""
import collections
import json
import os
import re
import subprocess
import sys

from s3_test import S3Server
import yaml

from skippr_test import (SKIPPRD, Workspace, check, expected_records, frame,
                         main, shared_path)

SINK_PREFIX = "copy/phew-thats-a-month-and-a-gdpr-fine-saved/"


def skipprd(ws, s3, *args):
    """skipprd ARGS --pipeline gdpr_compliant_migration in the workspace,
    with the S3 server's endpoint and credentials."""
    env = dict(os.environ)
    env.update(s3.env())
    return subprocess.run([SKIPPRD, *args, "--pipeline",
                           "gdpr_compliant_migration"], cwd=ws.root,
                          env=env, capture_output=True, text=True,
                          timeout=600)


def sync(ws, s3):
    p = skipprd(ws, s3, "sync", "--once")
    check(p.returncode == 0, "skipprd failed: %s" % p.stderr[-3000:])
    return p


def crc32c(data):
    """CRC32C (Castagnoli), bit by bit: small objects only."""
    crc = 0xFFFFFFFF
    for b in data:
        crc ^= b
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 if crc & 1 else 0)
    return crc ^ 0xFFFFFFFF


def output_records(s3):
    got = collections.Counter()
    for key, data in s3.objects("your-output-bucket", SINK_PREFIX).items():
        rel = key[len(SINK_PREFIX):]
        folder, name = rel.rsplit("/", 1)
        check(name.startswith("apply-") and
              (name.endswith(".jsonl") or name.endswith(".json")), key)
        for raw, _ in frame(data):
            got[(folder, raw)] += 1
    return got


def verify(ws, s3, *extra):
    p = skipprd(ws, s3, "verify", "--json", *extra)
    return p, json.loads(p.stdout) if p.stdout.strip() else None


def verify_walkthrough(ws, s3, n):
    """skipprd verify of the walkthrough: clean, read-only; then one
    object deleted from the sink is found."""
    s3.reset_stats()
    p, j = verify(ws, s3)
    st = s3.stats()["counts"]
    check(p.returncode == 0 and j and j["clean"], "verify: %s%s" % (
        p.stdout, p.stderr[-2000:]))
    check(j["source"]["records"]["records"] == n ==
          j["sink"]["records"]["records"], "records: %s, %d" % (j, n))
    reads = ("get", "head", "list", "list_v1", "list_uploads", "claim_get",
             "claim_head")
    writes = {k: v for k, v in st.items() if k not in reads}
    check(not writes, "verify wrote to S3: %s" % st)
    # incremental: the first reads every finished unit and object, the
    # second nothing (S3's ETags name what was read), both clean
    p, j = verify(ws, s3, "--since-state")
    check(p.returncode == 0 and j["since_state"]["sink"]["read"] > 0 and
          j["sink"]["records"]["records"] == n, "since: %s%s" % (
              p.stdout, p.stderr[-2000:]))
    s3.reset_stats()
    p, j = verify(ws, s3, "--since-state")
    s = j and j["since_state"]
    gets = s3.stats()["counts"].get("get", 0)
    check(p.returncode == 0 and s["source"]["read"] == 0 and
          s["sink"]["read"] == 0 and gets == 0 and
          j["sink"]["records"]["records"] == n,
          "since, again: %s, %d GETs" % (p.stdout, gets))
    key = sorted(k for k in s3.objects("your-output-bucket", SINK_PREFIX)
                 if k.endswith(".jsonl"))[0]
    s3.client.delete_object(Bucket="your-output-bucket", Key=key)
    p, j = verify(ws, s3)
    part = key[len(SINK_PREFIX):].rsplit("/", 1)[0]
    found = [d for d in j["differences"] if d["partition"] == part]
    check(p.returncode == 6 and not j["clean"] and len(found) == 1 and
          found[0]["found_records"] < found[0]["expected_records"],
          "verify after a deletion: %s" % p.stdout)
    s3.reset_stats()
    p, j = verify(ws, s3, "--since-state")
    check(p.returncode == 6 and j["since_state"]["sink"]["gone"] == 1 and
          not s3.stats()["counts"].get("get"),
          "since, after a deletion: %s" % p.stdout)
    print("  verify: clean with %d records; a deleted object is found "
          "(%s: %s), and by --since-state without a GET" % (
              n, part, found[0]["verdict"]))


def test_seed_walkthrough_bucket_to_bucket():
    ws = Workspace("s3seed")
    s3 = S3Server(["my-source-bucket", "your-output-bucket"])
    try:
        with open(shared_path("seed", "skippr.yml"), "rb") as f:
            seed_yaml = f.read()
        transform = yaml.safe_load(seed_yaml)["pipelines"][
            "gdpr_compliant_migration"]["transform"]
        fields = transform["batch_time_fields"]
        ws.generate(objects=30, records=200, seed=17, time_fields=fields)
        with open(os.path.join(ws.root, "skippr.yml"), "wb") as f:
            f.write(seed_yaml)
        n_obj = s3.upload_tree("my-source-bucket", ws.inp)
        s3.reset_stats()
        p = sync(ws, s3)
        st = s3.stats()
        first = st["counts"]
        # S3 verifies each object's CRC32C (x-amz-checksum-crc32c).
        check(st["checksums"] == {"verified": first.get("put", 0),
                                  "mismatched": 0, "absent": 0},
              "checksums %s for %d PUTs" % (st["checksums"],
                                            first.get("put", 0)))
        want = expected_records(ws.inp, transform=transform)
        got = output_records(s3)
        lost, extra = want - got, got - want
        check(not lost and not extra, "%d lost, %d extra of %d" % (
            sum(lost.values()), sum(extra.values()), sum(want.values())))
        check(first.get("get", 0) == n_obj, "GETs %s for %d objects" % (
            first, n_obj))
        # Each object carries its slice id and CRC32C in its metadata.
        key = sorted(s3.objects("your-output-bucket", SINK_PREFIX))[0]
        head = s3.client.head_object(Bucket="your-output-bucket", Key=key)
        body = s3.client.get_object(Bucket="your-output-bucket",
                                    Key=key)["Body"].read()
        meta = head["Metadata"]
        check(re.match(r"^[0-9a-f]{16}-[0-9]{10}$", meta.get("skippr-slice", ""))
              and re.search(r"apply-%s\.jsonl?$" % meta["skippr-slice"], key),
              "slice id metadata: %s for %s" % (meta, key))
        check(meta.get("skippr-crc32c") == "%08x" % crc32c(body),
              "crc32c metadata %s does not match the body" % meta)
        print("  %d records from %d objects, byte-equal; requests: %s" % (
            sum(want.values()), n_obj, dict(sorted(first.items()))))

        # A second run: no GET of committed objects, no writes.
        s3.reset_stats()
        p = sync(ws, s3)
        again = s3.stats()["counts"]
        check(again.get("get", 0) == 0 and again.get("put", 0) == 0 and
              again.get("upload_part", 0) == 0, "re-run did work: %s" % again)
        check("0 units copied, %d already done" % n_obj in p.stderr, p.stderr)

        # One new object: it is the only one read.
        newdir = os.path.join(ws.root, "new")
        subprocess.run([sys.executable, os.path.join(
            os.path.dirname(__file__), "..", "tools", "gen_firehose.py"),
            newdir, "--objects", "1", "--records", "100", "--seed", "99",
            "--first-id", "900000", "--time-fields", fields], check=True,
            stdout=subprocess.DEVNULL)
        s3.upload_tree("my-source-bucket", newdir)
        s3.reset_stats()
        before = output_records(s3)
        s3.reset_stats()
        sync(ws, s3)
        third = s3.stats()["counts"]
        check(third.get("get", 0) == 1, "new object: %s" % third)
        added = output_records(s3) - before
        check(added == expected_records(newdir, transform=transform),
              "new records differ")
        print("  re-run: %s; new object: %s" % (dict(sorted(again.items())),
                                                 dict(sorted(third.items()))))
        verify_walkthrough(ws, s3, sum(want.values()) + sum(added.values()))
    finally:
        s3.close()
        ws.cleanup()


if __name__ == "__main__":
    main([test_seed_walkthrough_bucket_to_bucket])
