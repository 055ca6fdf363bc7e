#!/usr/bin/env python3
"""AWS credentials as a real box gets them: each source of the SDKs' default
chain alone lets a copy run against s3rver; when several are set, the
first in the chain wins; credentials that lapse every 60 s are refreshed
through a longer run without one refused request; an instance metadata
endpoint that never answers costs a bounded wait; no secret or token
reaches the log.

The services are emulated by tests/tools/aws_creds.py (STS, the ECS
container endpoint, EC2 instance metadata). Each gives out session tokens
naming itself, and the S3 test proxy refuses any request without a live
one, so the proxy's counts show which source signed every request.
"""
import json
import os

import boto3
from botocore.config import Config
import signal
import subprocess
import sys
import time

from s3_test import S3Server
from skippr_test import (SKIPPRD, SOURCE_DIR, Workspace, check,
                         expected_records, frame, main)

EMULATOR = os.path.join(SOURCE_DIR, "tests", "tools", "aws_creds.py")
WEB_TOKEN = "eyJ-web-identity-token-SECRET"
ECS_TOKEN = "ecs-auth-token-SECRET"


class Creds:
    """The credential services' emulator, on an ephemeral port."""

    def __init__(self, *extra):
        self.proc = subprocess.Popen(
            [sys.executable, EMULATOR, "--web-token", WEB_TOKEN,
             "--ecs-token", ECS_TOKEN] + list(extra),
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        line = self.proc.stdout.readline()
        check(line, "aws_creds.py did not start")
        d = json.loads(line)
        self.url, self.blackhole = d["url"], d["blackhole"]

    def stats(self):
        import urllib.request
        with urllib.request.urlopen(self.url + "/__stats", timeout=10) as r:
            return json.loads(r.read())

    def close(self):
        self.proc.stdin.close()
        self.proc.wait(timeout=10)


def far_token(source):
    return "skt.%s.%d.1" % (source, int(time.time()) + 3600)


def setup(name, objects=3):
    """A workspace with objects in bucket src, a config copying src to dst
    with no credentials in it, and a clean environment: no AWS_* of the
    caller, HOME with no ~/.aws, instance metadata off."""
    ws = Workspace(name)
    s3 = S3Server(["src", "dst"])
    ws.generate(objects=objects, records=40, seed=7)
    s3.upload_tree("src", ws.inp)
    s3.require_tokens()
    with open(ws.config, "w") as f:
        f.write("skippr:\n  state_dir: %s\npipelines:\n  p:\n"
                "    buffer_threshold_seconds: 1\n"
                "    poll_interval_seconds: 1\n"
                # tests start again from a fresh state into one bucket
                "    allow_second_copy: true\n"
                # new objects land under 2021 dates: list them every poll
                "    full_listing_interval_seconds: 0\n"
                "    data_source: data_sources.a\n"
                "    data_sink: data_sinks.b\ndata_sources:\n  a:\n"
                "    S3:\n      s3_bucket: src\ndata_sinks:\n  b:\n"
                "    S3:\n      s3_bucket: dst\n" % ws.state)
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    home = os.path.join(ws.root, "home")
    os.makedirs(home)
    env.update({"HOME": home, "AWS_ENDPOINT_URL_S3": s3.endpoint,
                "AWS_REGION": "us-east-1",
                "AWS_EC2_METADATA_DISABLED": "true"})
    return ws, s3, env


def sync(ws, env, *extra, timeout=120):
    return subprocess.run([SKIPPRD, "sync", "-p", "p", "--once", "-c",
                           ws.config] + list(extra), env=env,
                          capture_output=True, text=True, timeout=timeout)


def test_client(s3):
    """A boto3 client for the test's own reads and writes: the proxy wants
    a live token from it too ("test", left out of the counts by
    signers())."""
    return boto3.client(
        "s3", endpoint_url=s3.endpoint, aws_access_key_id="S3RVER",
        aws_secret_access_key="S3RVER", aws_session_token=far_token("test"),
        region_name="us-east-1",
        config=Config(s3={"addressing_style": "path"}))


def upload_new(s3, root, done):
    """PUT the files under root not in `done` (a set it updates)."""
    client = test_client(s3)
    for d, _, files in os.walk(root):
        for fn in files:
            path = os.path.join(d, fn)
            if path not in done:
                with open(path, "rb") as f:
                    client.put_object(Bucket="src",
                                      Key=os.path.relpath(path, root),
                                      Body=f.read())
                done.add(path)


def copied_exactly(ws, s3):
    import collections
    want = collections.Counter(raw for (_, raw) in
                               expected_records(ws.inp, prefix=""))
    client = test_client(s3)
    got = collections.Counter()
    for page in client.get_paginator("list_objects_v2").paginate(
            Bucket="dst"):
        for o in page.get("Contents", []):
            if "_skippr/claims/" in o["Key"]:
                continue  # the state's claim on the sink
            data = client.get_object(Bucket="dst", Key=o["Key"])["Body"].read()
            for raw, _ in frame(data):
                got[raw] += 1
    return want == got, sum(want.values()), sum(got.values())


def signers(s3):
    """Token sources that signed skipprd's requests, and the refusals."""
    st = s3.stats()
    tokens = {k: v for k, v in st["tokens"].items() if k != "test"}
    return tokens, st["token_refused"]


def write(path, text):
    with open(path, "w") as f:
        f.write(text)
    return path


def sources(ws, creds):
    """name -> (env additions, expected token source) for each source of
    the chain, set up alone."""
    d = ws.root
    process = write(os.path.join(d, "cred_process.sh"),
                    "#!/bin/sh\nprintf '{\"Version\": 1, \"AccessKeyId\": "
                    "\"S3RVER\", \"SecretAccessKey\": \"S3RVER\", "
                    "\"SessionToken\": \"%s\", \"Expiration\": "
                    "\"2099-01-01T00:00:00Z\"}'\n" % far_token("process"))
    os.chmod(process, 0o755)
    write(os.path.join(d, "credentials"),
          "[static]\naws_access_key_id = S3RVER\n"
          "aws_secret_access_key = S3RVER\naws_session_token = %s\n\n"
          "[base]\naws_access_key_id = AKBASE\n"
          "aws_secret_access_key = SKBASE\n" % far_token("profile"))
    write(os.path.join(d, "config"),
          "[profile role]\nrole_arn = arn:aws:iam::123456789012:role/r\n"
          "source_profile = base\n\n"
          "[profile proc]\ncredential_process = %s\n" % process)
    token_file = write(os.path.join(d, "web_token"), WEB_TOKEN + "\n")
    files = {"AWS_SHARED_CREDENTIALS_FILE": os.path.join(d, "credentials"),
             "AWS_CONFIG_FILE": os.path.join(d, "config"),
             "AWS_ENDPOINT_URL_STS": creds.url}
    return {
        "environment": ({"AWS_ACCESS_KEY_ID": "S3RVER",
                         "AWS_SECRET_ACCESS_KEY": "S3RVER",
                         "AWS_SESSION_TOKEN": far_token("env")}, "env"),
        "profile keys": (dict(files, AWS_PROFILE="static"), "profile"),
        "profile role_arn + source_profile":
            (dict(files, AWS_PROFILE="role"), "sts-role"),
        "profile credential_process":
            (dict(files, AWS_PROFILE="proc"), "process"),
        "web identity": ({"AWS_ROLE_ARN": "arn:aws:iam::1:role/w",
                          "AWS_WEB_IDENTITY_TOKEN_FILE": token_file,
                          "AWS_ENDPOINT_URL_STS": creds.url}, "sts-web"),
        "ECS container": ({"AWS_CONTAINER_CREDENTIALS_FULL_URI":
                           creds.url + "/ecs/creds",
                           "AWS_CONTAINER_AUTHORIZATION_TOKEN": ECS_TOKEN},
                          "ecs"),
        "EC2 instance metadata": ({"AWS_EC2_METADATA_DISABLED": "false",
                                   "AWS_EC2_METADATA_SERVICE_ENDPOINT":
                                   creds.url}, "imds"),
    }


NAMES = ["environment", "profile keys", "profile role_arn + source_profile",
         "profile credential_process", "web identity", "ECS container",
         "EC2 instance metadata"]


def no_secret_in(text):
    for s in (WEB_TOKEN, ECS_TOKEN, "SKBASE", "skt.", "imdstok-"):
        check(s not in text, "%r appears in the log" % s)


def test_each_source_alone_copies():
    creds = Creds()
    try:
        for name in NAMES:
            ws, s3, env = setup("creds-alone")
            try:
                add, want = sources(ws, creds)[name]
                env.update(add)
                env["SKIPPR_CURL_VERBOSE"] = "1"
                s3.reset_stats()
                before = creds.stats()["issued"].get(want, 0)
                p = sync(ws, env, "-vv")
                fetched = creds.stats()["issued"].get(want, 0) - before
                check(p.returncode == 0, "%s: skipprd failed:\n%s" % (
                    name, p.stderr[-3000:]))
                tokens, refused = signers(s3)
                check(set(tokens) == {want} and not refused,
                      "%s: requests signed by %s, refused %s" % (
                          name, tokens, refused))
                ok, n_want, n_got = copied_exactly(ws, s3)
                check(ok, "%s: %d records expected, %d copied" % (
                    name, n_want, n_got))
                # The source and the 8 sink instances share one fetch.
                check(want not in ("sts-role", "sts-web", "ecs", "imds") or
                      fetched == 1, "%s: credentials fetched %d times in "
                      "one run" % (name, fetched))
                no_secret_in(p.stderr)
                print("  %-34s %4d records, %3d requests signed by %s" % (
                    name, n_got, tokens[want], want))
            finally:
                s3.close()
                ws.cleanup()
        print("  emulator: %s" % creds.stats())
    finally:
        creds.close()


def test_precedence_follows_the_sdks():
    """Several sources set at once: the first in the chain signs."""
    creds = Creds()
    try:
        ws, s3, env = setup("creds-order", objects=1)
        try:
            src = sources(ws, creds)
            order = ["environment", "profile keys", "web identity",
                     "ECS container", "EC2 instance metadata"]
            for i, name in enumerate(order):
                e = dict(env)
                for later in order[i:]:
                    e.update(src[later][0])
                # a fresh state each time, so every run copies again
                subprocess.run(["rm", "-rf", ws.state], check=True)
                s3.reset_stats()
                p = sync(ws, e)
                check(p.returncode == 0, "%s first: %s" % (
                    name, p.stderr[-2000:]))
                got = set(signers(s3)[0])
                check(got == {src[name][1]}, "with %s and later set, %s "
                      "signed instead of %s" % (name, got, src[name][1]))
                print("  %-22s wins over %s" % (name, ", ".join(
                    order[i + 1:]) or "nothing"))
        finally:
            s3.close()
            ws.cleanup()
    finally:
        creds.close()


LINK_LOCAL = ("169.254.170.2", "169.254.169.254")


def add_link_local():
    """Put the ECS agent's and the instance metadata's addresses on lo, as
    on ECS and EC2; False when this machine does not let us (not root)."""
    added = []
    for a in LINK_LOCAL:
        p = subprocess.run(["ip", "addr", "add", a + "/32", "dev", "lo"],
                           capture_output=True, text=True)
        if p.returncode != 0 and "File exists" not in p.stderr:
            del_link_local(added)
            return False, p.stderr.strip()
        added.append(a)
    return True, added


def del_link_local(addrs):
    for a in addrs:
        subprocess.run(["ip", "addr", "del", a + "/32", "dev", "lo"],
                       capture_output=True)


def test_default_addresses_of_ecs_and_ec2():
    """With no endpoint variables: AWS_CONTAINER_CREDENTIALS_RELATIVE_URI
    reaches the ECS agent at 169.254.170.2, and instance metadata is
    found at 169.254.169.254, both on port 80, as on a real task or
    instance (the addresses are put on lo for the test)."""
    ok, info = add_link_local()
    if not ok:
        from skippr_test import Skipped
        raise Skipped("cannot add %s to lo: %s" % (LINK_LOCAL, info))
    creds = None
    try:
        creds = Creds("--also", "169.254.170.2:80",
                      "--also", "169.254.169.254:80")
        for name, add, want in (
                ("ECS relative URI", {"AWS_CONTAINER_CREDENTIALS_RELATIVE_URI":
                                      "/ecs/creds",
                                      "AWS_CONTAINER_AUTHORIZATION_TOKEN":
                                      ECS_TOKEN}, "ecs"),
                ("EC2 metadata at 169.254.169.254",
                 {"AWS_EC2_METADATA_DISABLED": "false"}, "imds")):
            ws, s3, env = setup("creds-default", objects=1)
            try:
                env.update(add)
                p = sync(ws, env)
                check(p.returncode == 0, "%s: %s" % (name, p.stderr[-2000:]))
                check(set(signers(s3)[0]) == {want}, "%s: signed by %s" % (
                    name, signers(s3)[0]))
                print("  %s: copied, signed by %s" % (name, want))
            finally:
                s3.close()
                ws.cleanup()
    finally:
        if creds:
            creds.close()
        del_link_local(info)


def test_imds_v1_fallback():
    """An instance whose metadata refuses the IMDSv2 token PUT (403)."""
    creds = Creds("--imds-v1-only")
    ws, s3, env = setup("creds-v1", objects=1)
    try:
        env.update(sources(ws, creds)["EC2 instance metadata"][0])
        p = sync(ws, env)
        check(p.returncode == 0, p.stderr[-2000:])
        check(set(signers(s3)[0]) == {"imds"}, str(s3.stats()))
    finally:
        s3.close()
        ws.cleanup()
        creds.close()


def test_hanging_metadata_costs_a_bounded_wait():
    """Metadata that accepts connections and never answers: skipprd gives
    up within S3_IMDS_TIMEOUT_MS (1 s) and says no credentials were found.
    With web identity set too, it never asks the metadata at all."""
    creds = Creds()
    ws, s3, env = setup("creds-hang", objects=1)
    try:
        env.update({"AWS_EC2_METADATA_DISABLED": "false",
                    "AWS_EC2_METADATA_SERVICE_ENDPOINT": creds.blackhole})
        t = time.monotonic()
        p = sync(ws, env)
        took = time.monotonic() - t
        check(p.returncode != 0 and "no AWS credentials" in p.stderr and
              "instance metadata" in p.stderr, p.stderr[-2000:])
        check(took < 10, "a hanging metadata endpoint took %.1f s" % took)
        print("  hanging metadata: refused after %.2f s: %s" % (
            took, p.stderr.strip().splitlines()[-1][:160]))
        env.update(sources(ws, creds)["web identity"][0])
        t = time.monotonic()
        p = sync(ws, env)
        check(p.returncode == 0 and
              set(signers(s3)[0]) == {"sts-web"}, p.stderr[-2000:])
        print("  web identity with it: %.2f s" % (time.monotonic() - t))
    finally:
        s3.close()
        ws.cleanup()
        creds.close()


def test_expiring_credentials_are_refreshed():
    """Instance metadata credentials that lapse every 20 s (refreshed a
    quarter of their life before, as for any lifetime under 20 minutes),
    through a 35-second continuous run that copies new objects as they
    come: every request is accepted (none with a lapsed token) and every
    record is copied."""
    creds = Creds("--lifetime", "20")
    ws, s3, env = setup("creds-refresh", objects=2)
    try:
        env.update(sources(ws, creds)["EC2 instance metadata"][0])
        proc = subprocess.Popen([SKIPPRD, "sync", "-p", "p", "-c",
                                 ws.config, "-vv"], env=env,
                                stdout=subprocess.DEVNULL,
                                stderr=subprocess.PIPE, text=True)
        start = time.monotonic()
        gen = os.path.join(SOURCE_DIR, "tests", "tools", "gen_firehose.py")
        n = 0
        done = set(os.path.join(d, fn) for d, _, files in os.walk(ws.inp)
                   for fn in files)
        while time.monotonic() - start < 35:
            time.sleep(3)
            n += 1
            subprocess.run([sys.executable, gen, ws.inp, "--objects", "1",
                            "--records", "20", "--seed", str(100 + n),
                            "--first-id", str(100000 * n)], check=True,
                           stdout=subprocess.DEVNULL)
            upload_new(s3, ws.inp, done)
        deadline = time.monotonic() + 30
        ok = False
        while time.monotonic() < deadline and not ok:
            time.sleep(1)
            ok, n_want, n_got = copied_exactly(ws, s3)
        proc.send_signal(signal.SIGTERM)
        err = proc.communicate(timeout=60)[1]
        tokens, refused = signers(s3)
        issued = creds.stats()["issued"].get("imds", 0)
        check(proc.returncode == 0, "skipprd: %s" % err[-2000:])
        check(not refused and set(tokens) == {"imds"},
              "requests refused: %s, signed by %s" % (refused, tokens))
        check(issued >= 2, "credentials fetched %d times in %.0f s" % (
            issued, time.monotonic() - start))
        check(ok, "%d records expected, %d copied" % (n_want, n_got))
        check(err.count("refreshed") >= 1, "no refresh logged")
        no_secret_in(err)
        print("  %.0f s run, credentials lapsing every 20 s: fetched %d "
              "times, %d requests, 0 refused; %d records exact" % (
                  time.monotonic() - start, issued, tokens["imds"],
                  n_got))
    finally:
        s3.close()
        ws.cleanup()
        creds.close()


if __name__ == "__main__":
    main([test_each_source_alone_copies, test_precedence_follows_the_sdks,
          test_imds_v1_fallback, test_default_addresses_of_ecs_and_ec2,
          test_hanging_metadata_costs_a_bounded_wait,
          test_expiring_credentials_are_refreshed])
