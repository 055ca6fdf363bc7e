#!/usr/bin/env python3
"""Run one example pipeline end to end against local test servers, then
read its output back with the client a user would use and check it.

    examples/run.sh NAME            # sets up and builds first
    python3 examples/run.py NAME [--dir DIR] [--records N]

NAME is one of: gdpr-s3, file-to-bucket, bucket-to-kafka,
kafka-to-bucket, json-to-csv. Each example is examples/NAME/skippr.yml,
unchanged; this script only provides what the YAML takes from the
environment (the S3 endpoint and credentials, ${KAFKA_BROKERS},
${EXAMPLE_DIR}). The servers (s3rver from npm, librdkafka's mock cluster)
listen on 127.0.0.1 and stop when the example ends.

It runs the pipeline twice: the first run copies everything, the second
finds nothing new. It exits 0 only when the output holds every input
record exactly once, byte for byte.
"""
import argparse
import collections
import csv
import io
import json
import os
import shutil
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(ROOT, "tests", "integration"))
os.environ.setdefault("SKIPPR_SOURCE_DIR", ROOT)

from skippr_test import (SKIPPRD, compare as count_differences,  # noqa: E402
                         expected_key, expected_records)
from test_kafka import EVENT_TYPES, make_records  # noqa: E402


class Example:
    def __init__(self, name, work, records):
        self.name = name
        self.work = work
        self.records = records
        self.config = os.path.join(HERE, name, "skippr.yml")
        with open(self.config) as f:
            text = f.read()
        if "state_dir:" not in text:
            # The seed's YAML names no state_dir: its state goes beside the
            # file, so the file is copied into the work folder, as a user
            # copies the seed's YAML into a folder of their own.
            self.config = os.path.join(work, "skippr.yml")
            with open(self.config, "w") as f:
                f.write(text)
        self.env = dict(os.environ, EXAMPLE_DIR=work)
        self.closers = []

    def close(self):
        for c in reversed(self.closers):
            c()

    # Inputs and servers ----------------------------------------------------

    def archive(self):
        """A Firehose-like archive (mixed framings, gzip, zstd) in
        work/in/ill-just-dump-this-here; returns the folder."""
        inp = os.path.join(self.work, "in")
        objects = max(4, self.records // 250)
        subprocess.run([sys.executable, os.path.join(ROOT, "tests", "tools",
                                                     "gen_firehose.py"),
                        inp, "--objects", str(objects), "--records",
                        str(max(1, self.records // objects))], check=True,
                       stdout=subprocess.DEVNULL)
        return inp

    def s3(self, buckets):
        from s3_test import S3Server
        s3 = S3Server(buckets)
        self.closers.append(s3.close)
        self.env.update(s3.env())
        return s3

    def kafka(self, topics):
        from kafka_test import Broker
        broker = Broker(topics)
        self.closers.append(broker.stop)
        self.env["KAFKA_BROKERS"] = broker.bootstrap
        return broker

    # Running ---------------------------------------------------------------

    def pipeline(self):
        with open(self.config) as f:
            for line in f:
                if line.startswith("pipelines:"):
                    return next(f).strip().rstrip(":")
        raise SystemExit("no pipeline in %s" % self.config)

    def sync(self):
        t = time.time()
        p = subprocess.run([SKIPPRD, "sync", "--pipeline", self.pipeline(),
                            "--once", "--no-progress", "--config",
                            self.config], env=self.env, cwd=self.work,
                           capture_output=True, text=True, timeout=600)
        if p.returncode != 0:
            raise SystemExit("skipprd failed (exit %d):\n%s" % (
                p.returncode, p.stderr[-4000:]))
        done = [l for l in p.stderr.splitlines() if ": done:" in l]
        line = done[-1].split("info: ", 1)[-1] if done else ""
        print("  %s" % (line or "skipprd finished in %.1f s" % (
            time.time() - t)))
        return line

    def sync_twice(self):
        """The copy, then a second run that must find nothing to write."""
        self.sync()
        again = self.sync()
        if " 0 objects written" not in again:
            raise SystemExit("FAILED: the second run wrote objects: " + again)


def compare(want, got, where):
    """The number of records, when got holds each of want exactly once."""
    lost, dup, unexpected = count_differences(want, got)
    n = sum(want.values())
    if lost or dup or unexpected:
        raise SystemExit("FAILED: %s: %d of %d records lost, %d repeated, "
                         "%d unexpected" % (where, lost, n, dup, unexpected))
    return n


def run_gdpr_s3(ex):
    inp = ex.archive()
    s3 = ex.s3(["my-source-bucket", "your-output-bucket"])
    n_obj = s3.upload_tree("my-source-bucket", inp)
    # The seed's YAML names no state_dir: state goes to .skippr beside it
    # (the copy in the work folder).
    ex.sync_twice()
    prefix = "copy/phew-thats-a-month-and-a-gdpr-fine-saved/"
    n = compare(expected_records(inp), s3.records("your-output-bucket",
                                                  prefix), "the bucket")
    keys = s3.objects("your-output-bucket", prefix)
    return ("%d records from %d objects in s3://my-source-bucket -> %d "
            "objects in s3://your-output-bucket/%s, read back with boto3" % (
                n, n_obj, len(keys), prefix))


def run_file_to_bucket(ex):
    inp = ex.archive()
    s3 = ex.s3(["your-output-bucket"])
    ex.sync_twice()
    n = compare(expected_records(inp), s3.records("your-output-bucket",
                                                  "by-tenant/"), "the bucket")
    return ("%d records from %s -> %d objects in s3://your-output-bucket/"
            "by-tenant/, read back with boto3" % (
                n, inp, len(s3.objects("your-output-bucket", "by-tenant/"))))


TRANSFORM_NO_PREFIX = {"namespace_fields": "event_type",
                       "batch_partition_fields": "detail.tenant_id",
                       "batch_time_fields": "timestamp",
                       "batch_time_unit": "day",
                       "time_partition_prefix": ""}


def run_bucket_to_kafka(ex):
    from kafka_test import committed_view
    topics = ["events." + t for t in EVENT_TYPES]
    broker = ex.kafka(dict({t: 4 for t in topics}, **{"skippr.markers": 1}))
    s3 = ex.s3(["my-source-bucket"])
    recs = make_records(ex.records, days=10)
    want = collections.Counter()
    per = 500
    for k in range(0, len(recs), per):
        body = b"\n".join(recs[k:k + per]) + b"\n"
        s3.client.put_object(Bucket="my-source-bucket",
                             Key="events/2024/03/part-%05d" % (k // per),
                             Body=body)
    for r in recs:
        want[(expected_key(json.loads(r), TRANSFORM_NO_PREFIX), r)] += 1
    ex.sync_twice()
    msgs, hidden = committed_view(broker.bootstrap, topics)
    got = collections.Counter((m["key"], m["payload"]) for m in msgs)
    n = compare(want, got, "the topics")
    return ("%d records from s3://my-source-bucket/events -> %d topics "
            "events.{event_type}, read back with kcat (read_committed)" % (
                n, len({m["topic"] for m in msgs})))


def run_kafka_to_bucket(ex):
    from kafka_test import produce
    broker = ex.kafka({"events": 4})
    s3 = ex.s3(["your-output-bucket"])
    recs = make_records(ex.records, days=10)
    produce(broker.bootstrap, "events", recs)
    want = collections.Counter()
    for r in recs:
        t = dict(TRANSFORM_NO_PREFIX, time_partition_prefix="p_")
        want[(expected_key(json.loads(r), t), r)] += 1
    ex.sync_twice()
    n = compare(want, s3.records("your-output-bucket", "from-kafka/"),
                "the bucket")
    return ("%d records from topic events (4 partitions, produced with "
            "kcat) -> %d objects in s3://your-output-bucket/from-kafka/, "
            "read back with boto3" % (
                n, len(s3.objects("your-output-bucket", "from-kafka/"))))


def csv_cell(v):
    if v is None:
        return ""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (dict, list)):
        return json.dumps(v, separators=(",", ":"), ensure_ascii=False)
    return str(v)


def run_json_to_csv(ex):
    inp = ex.archive()
    ex.sync_twice()
    transform = {"namespace_fields": "event_type",
                 "batch_time_fields": "timestamp", "batch_time_unit": "day",
                 "time_partition_prefix": "p_"}
    # What each record must become: its top-level values as cells. Numbers
    # keep their lexeme in skipprd; generated numbers are plain integers.
    want = collections.Counter()
    for (folder, raw), c in expected_records(inp, transform=transform).items():
        obj = json.loads(raw)
        want[(folder, tuple(sorted((k, csv_cell(v))
                                   for k, v in obj.items())))] += c
    out = os.path.join(ex.work, "out", "csv")
    got = collections.Counter()
    files = 0
    for dirpath, _, names in os.walk(out):
        for fn in names:
            if not fn.endswith(".csv") or "_errors" in dirpath:
                continue
            files += 1
            folder = os.path.relpath(dirpath, out)
            with open(os.path.join(dirpath, fn), newline="") as f:
                rows = list(csv.reader(io.StringIO(f.read())))
            header = rows[0]
            for row in rows[1:]:
                cells = tuple(sorted((k, v) for k, v in zip(header, row)
                                     if v != ""))
                got[(folder, cells)] += 1
    # Empty cells (null or missing keys) are dropped on both sides.
    want = collections.Counter({(f, tuple((k, v) for k, v in cells
                                          if v != "")): c
                                for (f, cells), c in want.items()})
    n = compare(want, got, "the CSV files")
    return ("%d JSON records from %s -> %d CSV files under %s, read back "
            "with Python's csv module" % (n, inp, files, out))


EXAMPLES = {
    "gdpr-s3": run_gdpr_s3,
    "file-to-bucket": run_file_to_bucket,
    "bucket-to-kafka": run_bucket_to_kafka,
    "kafka-to-bucket": run_kafka_to_bucket,
    "json-to-csv": run_json_to_csv,
}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("name", choices=sorted(EXAMPLES))
    ap.add_argument("--dir", help="work folder (default: "
                    "examples/out/NAME, emptied first)")
    ap.add_argument("--records", type=int, default=20000)
    a = ap.parse_args()
    work = os.path.abspath(a.dir or os.path.join(HERE, "out", a.name))
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    ex = Example(a.name, work, a.records)
    print("example %s: %s" % (a.name, os.path.relpath(ex.config, ROOT)))
    try:
        summary = EXAMPLES[a.name](ex)
    finally:
        ex.close()
    print("example %s: exact: %s; the second run found nothing new" % (
        a.name, summary))


if __name__ == "__main__":
    main()
