#!/usr/bin/env python3
"""Every example under examples/ runs with its one command (examples/run.py
NAME, which examples/run.sh calls after setting up) against the local test
servers, and its output, read back with the users' clients, holds every
input record exactly once; a second run writes nothing."""
import os
import subprocess
import sys
import tempfile

from skippr_test import check, main

HERE = os.path.dirname(os.path.abspath(__file__))
RUN = os.path.normpath(os.path.join(HERE, "..", "..", "examples", "run.py"))


def run_example(name, records=3000):
    with tempfile.TemporaryDirectory(prefix="skippr-example-") as d:
        p = subprocess.run([sys.executable, RUN, name, "--dir", d,
                            "--records", str(records)], capture_output=True,
                           text=True, timeout=600)
        out = p.stdout + p.stderr
        check(p.returncode == 0, "example %s failed:\n%s" % (name, out))
        last = p.stdout.strip().splitlines()[-1]
        check(last.startswith("example %s: exact: " % name) and
              "second run found nothing new" in last, out)
        print("  " + last)


def test_gdpr_s3():
    run_example("gdpr-s3")


def test_file_to_bucket():
    run_example("file-to-bucket")


def test_bucket_to_kafka():
    run_example("bucket-to-kafka")


def test_kafka_to_bucket():
    run_example("kafka-to-bucket")


def test_json_to_csv():
    run_example("json-to-csv")


if __name__ == "__main__":
    main([test_gdpr_s3, test_file_to_bucket, test_bucket_to_kafka,
          test_kafka_to_bucket, test_json_to_csv])
