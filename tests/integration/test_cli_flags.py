#!/usr/bin/env python3
"""A pipeline given by flags alone ("yaml or pure cli flags").

The seed's pipeline (../shared/seed/skippr.yml) is given as flags, bucket to
bucket on s3rver: into an empty bucket it writes the same records into the
same partition folders and object names as the YAML run (less the state id
and sequence number); into the bucket the YAML run claimed, it is refused
and writes nothing; run again from another folder it finds its state
($XDG_STATE_HOME/skippr, named after what defines the copy) and copies
nothing. `skipprd validate` with the flags prints YAML equal, as data, to
the seed's (endpoint names, state_dir and the pipeline key's hash aside),
which runs as a file. Bad flags are refused with a line that says what is
wrong.
"""
import collections
import os
import re
import subprocess

import yaml

from s3_test import S3Server
from skippr_test import (SKIPPRD, Workspace, check, expected_records, frame,
                         main, shared_path)

SINK_PREFIX = "copy/phew-thats-a-month-and-a-gdpr-fine-saved/"


def seed_flags(seed):
    """The seed's pipeline as flags."""
    pipe = seed["pipelines"]["gdpr_compliant_migration"]
    src = seed["data_sources"]["sample"]["S3"]
    dst = seed["data_sinks"]["landing"]["S3"]
    flags = ["--pipeline", "gdpr_compliant_migration",
             "--workspace", seed["skippr"]["workspace"],
             "--source", "s3://%s/%s" % (src["s3_bucket"], src["s3_prefix"]),
             "--sink", "s3://%s/%s" % (dst["s3_bucket"], dst["s3_prefix"]),
             "--sink-opt", "format=%s" % dst["format"],
             "--buffer-threshold-seconds",
             str(pipe["buffer_threshold_seconds"])]
    for k, v in pipe["transform"].items():
        # both spellings work: dashes here, underscores for the prefix
        flag = k if k == "time_partition_prefix" else k.replace("_", "-")
        flags += ["--" + flag, str(v)]
    return flags


def run(args, cwd, s3, timeout=300):
    env = dict(os.environ)
    env.update(s3.env())
    return subprocess.run([SKIPPRD] + args, cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=timeout)


def layout(s3):
    """Counter of (object key with the state id and sequence masked,
    record bytes): the sequence follows the order slices are opened in,
    which the threads decide."""
    got = collections.Counter()
    for key, data in s3.objects("your-output-bucket", SINK_PREFIX).items():
        masked = re.sub(r"apply-[0-9a-f]{16}-[0-9]{10}\.", "apply-ID-SEQ.",
                        key)
        for raw, _ in frame(data):
            got[(masked, raw)] += 1
    return got


def empty_bucket(s3):
    for key in s3.objects("your-output-bucket", claims=True):
        s3.client.delete_object(Bucket="your-output-bucket", Key=key)


def test_seed_by_flags_equals_the_yaml_run():
    ws = Workspace("cliflags")
    s3 = S3Server(["my-source-bucket", "your-output-bucket"])
    try:
        with open(shared_path("seed", "skippr.yml"), "rb") as f:
            seed_text = f.read()
        seed = yaml.safe_load(seed_text)
        transform = seed["pipelines"]["gdpr_compliant_migration"]["transform"]
        ws.generate(objects=20, records=150, seed=29,
                    time_fields=transform["batch_time_fields"])
        n_obj = s3.upload_tree("my-source-bucket", ws.inp)
        flags = seed_flags(seed)

        # The YAML run, from a folder holding the seed's file.
        a = os.path.join(ws.root, "a")
        os.makedirs(a)
        with open(os.path.join(a, "skippr.yml"), "wb") as f:
            f.write(seed_text)
        p = run(["sync", "--pipeline", "gdpr_compliant_migration", "--once"],
                a, s3)
        check(p.returncode == 0, p.stderr[-2000:])
        by_yaml = layout(s3)
        want = expected_records(ws.inp, transform=transform)
        check(sum(by_yaml.values()) == sum(want.values()),
              "the YAML run copied %d of %d records" % (
                  sum(by_yaml.values()), sum(want.values())))

        # The same copy by flags has a state of its own: the bucket's claim
        # names the YAML run's state, so it is refused and writes nothing.
        p = run(["sync", "--once"] + flags, a, s3)
        check(p.returncode == 1 and "another state already copies this "
              "source here" in p.stderr and "workspace copy-demo" in
              p.stderr and "Nothing was written" in p.stderr,
              "flags after the YAML run: %s" % p.stderr[-2000:])
        check(layout(s3) == by_yaml, "the refused run wrote")

        # From an empty bucket: the same objects.
        empty_bucket(s3)
        b = os.path.join(ws.root, "b")
        os.makedirs(b)
        p = run(["sync", "--once"] + flags, b, s3)
        check(p.returncode == 0 and "%d units copied" % n_obj in p.stderr,
              p.stderr[-2000:])
        by_flags = layout(s3)
        check(by_flags == by_yaml, "flags and YAML differ: %d keys/records "
              "only in the YAML run, %d only in the flags run" % (
                  sum((by_yaml - by_flags).values()),
                  sum((by_flags - by_yaml).values())))

        # The same flags from another folder find their state: nothing to
        # do.
        p = run(["sync", "--once"] + flags, a, s3)
        check(p.returncode == 0 and
              "0 units copied, %d already done" % n_obj in p.stderr,
              "the same flags from another folder: %s" % p.stderr[-2000:])

        # validate prints the YAML: the seed's, as data, and it runs. The
        # flags add where their state is and name the pipeline after what
        # defines it.
        p = run(["validate"] + flags, b, s3)
        check(p.returncode == 0 and "ok (S3 -> S3)" in p.stderr, p.stderr)
        printed = yaml.safe_load(p.stdout)
        state_dir = printed["skippr"].pop("state_dir")
        check(state_dir == os.path.join(os.environ["XDG_STATE_HOME"],
                                        "skippr"), "state_dir %s" % state_dir)
        (key,) = printed["pipelines"].keys()
        check(re.fullmatch("gdpr_compliant_migration-[0-9a-f]{16}", key),
              "pipeline key %s" % key)
        printed["pipelines"] = {"gdpr_compliant_migration":
                                printed["pipelines"][key]}
        renamed = yaml.safe_load(seed_text.decode().replace(
            "sample", "cli_source").replace("landing", "cli_sink"))
        check(printed == renamed, "validate printed:\n%s" % p.stdout)
        with open(os.path.join(b, "skippr.yml"), "w") as f:
            f.write(p.stdout)
        p = run(["sync", "--pipeline", key, "--once"], b, s3)
        check(p.returncode == 0 and
              "0 units copied, %d already done" % n_obj in p.stderr,
              "the printed YAML: %s" % p.stderr[-2000:])
        print("  %d records from %d objects: same keys and bytes by flags "
              "as by YAML; the flags' state found from another folder; "
              "validate's YAML equals the seed's and runs" % (
                  sum(by_flags.values()), n_obj))
    finally:
        s3.close()
        ws.cleanup()


def test_bad_flags_say_what_is_wrong():
    ws = Workspace("cliflags-bad")
    try:
        cases = [
            (["sync", "--source", "s3://", "--sink", "-"],
             "expected s3://BUCKET[/PREFIX]"),
            (["sync", "--source", "ftp://x/y", "--sink", "-"],
             "--source ftp://x/y: unknown scheme"),
            (["sync", "--source", "/in", "--sink", "/out", "--sink-opt",
              "fsync"], "--sink-opt fsync: expected KEY=VALUE"),
            (["sync", "--source", "/in"], "needs --source URL and --sink URL"),
            (["sync", "--batch-time-unit", "day"],
             "go with --source and --sink"),
            (["sync", "-c", "x.yml", "--source", "/in", "--sink", "/o"],
             "not both"),
            (["validate", "--source", "/in", "--sink", "/o",
              "--batch-time-unit", "week"],
             "batch_time_unit: 'week' must be year, month, day or hour"),
            (["validate", "--source", "/in", "--sink", "/o", "--sink-opt",
              "fsink=true"], "unknown option 'fsink'"),
            (["validate", "--source", "/in", "--sink", "/o",
              "--buffer-threshold-seconds", "1", "--buffer_threshold_seconds",
              "2"], "--buffer_threshold_seconds is given twice"),
        ]
        for args, want in cases:
            p = subprocess.run([SKIPPRD] + args, cwd=ws.root,
                               capture_output=True, text=True, timeout=60)
            check(p.returncode != 0 and want in p.stderr,
                  "%s: expected %r in %r" % (args, want, p.stderr))
        # --help shows the flags.
        p = subprocess.run([SKIPPRD, "--help"], capture_output=True,
                           text=True, timeout=60)
        check("--source URL --sink URL" in p.stdout and "--sink-opt" in
              p.stdout, p.stdout)
        # A path sink, and file:// on the source, copy as a File pipeline.
        ws.generate(objects=3, records=30, seed=5)
        p = subprocess.run(
            [SKIPPRD, "sync", "--once", "--source", "file://" + ws.inp,
             "--sink", "out", "--source-opt",
             "prefix=ill-just-dump-this-here", "--namespace-fields",
             "event_type", "--batch_partition_fields",
             "detail.tenant_id,truck.tenant_id", "--batch-time-fields",
             "timestamp", "--batch-time-unit", "day",
             "--time-partition-prefix", "p_", "--state-dir", "st"],
            cwd=ws.root, capture_output=True, text=True, timeout=120)
        check(p.returncode == 0 and "3 units copied" in p.stderr, p.stderr)
        names = os.listdir(os.path.join(ws.root, "st", "default"))
        check(len(names) == 1 and re.fullmatch("cli-[0-9a-f]{16}", names[0]),
              "state not in ./st/default/cli-HASH: %r" % names)
        got = collections.Counter()
        for d, _, files in os.walk(os.path.join(ws.root, "out")):
            if "_skippr" in d:
                continue  # the state's claim on the sink
            for fn in files:
                with open(os.path.join(d, fn), "rb") as f:
                    for raw, _ in frame(f.read()):
                        got[(os.path.relpath(d, os.path.join(ws.root,
                                                             "out")), raw)] += 1
        check(got == expected_records(ws.inp), "the File pipeline by flags "
              "is not exact")
    finally:
        ws.cleanup()


if __name__ == "__main__":
    main([test_bad_flags_say_what_is_wrong,
          test_seed_by_flags_equals_the_yaml_run])
