#!/usr/bin/env python3
"""SigV4 differential against botocore, including temporary credentials
with a session token, odd keys and unsorted queries; and no secret ever
reaches skipprd's log, at any level."""
import os
import subprocess

from botocore.auth import S3SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

from s3_test import S3Server
from skippr_test import SKIPPRD, SOURCE_DIR, Workspace, check, main

SIGN = os.environ.get("SIGV4_SIGN", os.path.join(SOURCE_DIR, "build", "tests",
                                                 "sigv4_sign"))
TS = "20261202T101500Z"


def botocore_auth(method, host, path, query, headers, payload, token):
    creds = Credentials("AKIDEXAMPLE", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY",
                        token)
    qs = "&".join("%s=%s" % kv for kv in query)
    from urllib.parse import quote
    url = "http://%s%s%s" % (host, quote(path, safe="/~"),
                             ("?" + "&".join("%s=%s" % (quote(k, safe="~"),
                                                        quote(v, safe="~"))
                                             for k, v in query)) if qs else "")
    req = AWSRequest(method=method, url=url, headers=dict(headers))
    req.context["timestamp"] = TS
    req.headers["X-Amz-Date"] = TS
    req.headers["X-Amz-Content-SHA256"] = payload
    if token:
        req.headers["X-Amz-Security-Token"] = token
    auth = S3SigV4Auth(creds, "s3", "eu-west-1")
    canonical = auth.canonical_request(req)
    sts = auth.string_to_sign(req, canonical)
    return auth.signature(sts, req), auth.signed_headers(
        auth.headers_to_sign(req))


def ours(method, host, path, query, headers, payload, token):
    hdrs = [("host", host), ("x-amz-date", TS),
            ("x-amz-content-sha256", payload)] + list(headers)
    if token:
        hdrs.append(("x-amz-security-token", token))
    out = subprocess.run(
        [SIGN, method, path, "&".join("%s=%s" % kv for kv in query),
         "\n".join("%s:%s" % kv for kv in hdrs), payload, TS, "eu-west-1",
         "AKIDEXAMPLE", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY"],
        capture_output=True, text=True, check=True).stdout.strip()
    sig = out.split("Signature=")[1]
    signed = out.split("SignedHeaders=")[1].split(",")[0]
    return sig, signed


def test_matches_botocore_with_session_token():
    empty = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
    token = ("IQoJb3JpZ2luX2VjEJr//////////wEaCXVzLWVhc3QtMSJHMEUCIQDexample"
             "+token/with=chars")
    cases = [
        ("GET", "/bucket/ill-just-dump-this-here/2021/10/03/obj 1",
         [("x-id", "GetObject")], [("range", "bytes=100-199")], empty, token),
        ("GET", "/bucket", [("prefix", "a b/c"), ("list-type", "2"),
                            ("continuation-token", "1/2+3=")], [], empty,
         token),
        ("PUT", "/bucket/p_detail.tenant_id=acme/apply-1.jsonl", [],
         [("x-amz-meta-skippr-slice", "abc-0000000001"),
          ("content-md5", "1B2M2Y8AsgTpgAmY7PhCfg==")],
         "44ce7dd67c959e0d3524ffac1771dfbba87d2b6b4b4e99e42034a8b803f8b072",
         None),
        ("POST", "/bucket/k", [("uploads", "")], [], empty, token),
    ]
    for method, path, query, headers, payload, tok in cases:
        want = botocore_auth(method, "127.0.0.1:9000", path, query, headers,
                             payload, tok)
        got = ours(method, "127.0.0.1:9000", path, query, headers, payload,
                   tok)
        check(got == want, "%s %s: ours %s, botocore %s" % (method, path, got,
                                                            want))
    print("  %d requests sign identically to botocore" % len(cases))


def test_secrets_never_logged():
    ws = Workspace("secrets")
    s3 = S3Server(["src", "dst"])
    try:
        ws.generate(objects=3, records=50, seed=3)
        s3.upload_tree("src", ws.inp)
        secret = "sEcReT-wJalrXUtnFEMI-never-log-me"
        token = "ToKeN-IQoJb3JpZ2luX2VjEJr-never-log-me"
        text = """skippr:
  workspace: w
  state_dir: %s
pipelines:
  p:
    data_source: data_sources.a
    data_sink: data_sinks.b
data_sources:
  a:
    S3:
      s3_bucket: src
      access_key_id: S3RVER
      secret_access_key: %s
      session_token: %s
data_sinks:
  b:
    S3:
      s3_bucket: dst
      secret_access_key: ${SK}
      access_key_id: S3RVER
""" % (ws.state, secret, token)
        with open(ws.config, "w") as f:
            f.write(text)
        env = dict(os.environ)
        env.update(s3.env())
        env["SK"] = secret
        env["AWS_SESSION_TOKEN"] = token
        logs = ""
        for args in (["sync", "-p", "p", "--once", "-vv"],
                     ["validate"], ["plugins"], ["status", "-p", "p"]):
            p = subprocess.run([SKIPPRD] + args + ["-c", ws.config], env=env,
                               capture_output=True, text=True, timeout=120)
            logs += p.stdout + p.stderr
        check("debug" in logs, "no debug output was produced")
        check("done: 3 units copied" in logs, "the copy failed: %s" % logs)
        for bad in (secret, token, "Authorization", "AWS4-HMAC-SHA256",
                    "Signature="):
            check(bad not in logs, "%r appears in the log" % bad)
        print("  %d bytes of logs at debug level, no secret in them" %
              len(logs))
    finally:
        s3.close()
        ws.cleanup()


def test_profiles_and_403():
    """Credentials from the shared files, chosen by AWS_PROFILE; the wrong
    profile's key is refused by the server (403), which is fatal at once
    and names the bucket."""
    ws = Workspace("profiles")
    s3 = S3Server(["src", "dst"])
    try:
        ws.generate(objects=2, records=20, seed=4)
        s3.upload_tree("src", ws.inp)
        creds = os.path.join(ws.root, "credentials")
        cfg = os.path.join(ws.root, "config")
        with open(creds, "w") as f:
            f.write("[default]\naws_access_key_id = WRONGKEY\n"
                    "aws_secret_access_key = x\n\n"
                    "[migration]\naws_access_key_id = S3RVER\n"
                    "aws_secret_access_key = S3RVER\n")
        with open(cfg, "w") as f:
            f.write("[profile migration]\nregion = eu-west-1\n")
        with open(ws.config, "w") as f:
            f.write("skippr:\n  state_dir: %s\npipelines:\n  p:\n"
                    "    data_source: data_sources.a\n"
                    "    data_sink: data_sinks.b\ndata_sources:\n  a:\n"
                    "    S3:\n      s3_bucket: src\ndata_sinks:\n  b:\n"
                    "    S3:\n      s3_bucket: dst\n" % ws.state)
        env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
        env.update({"AWS_ENDPOINT_URL": s3.endpoint,
                    "AWS_SHARED_CREDENTIALS_FILE": creds,
                    "AWS_CONFIG_FILE": cfg})
        p = subprocess.run([SKIPPRD, "sync", "-p", "p", "--once", "-c",
                            ws.config], env=env, capture_output=True,
                           text=True, timeout=60)
        # The first request refused: the sink's claim (s3://dst/) or the
        # listing (s3://src/).
        check(p.returncode == 1 and "HTTP 403" in p.stderr and
              ("s3://src/" in p.stderr or "s3://dst/" in p.stderr),
              "default profile: %s" % p.stderr)
        env["AWS_PROFILE"] = "migration"
        p = subprocess.run([SKIPPRD, "sync", "-p", "p", "--once", "-c",
                            ws.config, "-vv"], env=env, capture_output=True,
                           text=True, timeout=60)
        check(p.returncode == 0 and "done: 2 units copied" in p.stderr,
              p.stderr[-2000:])
        check("region eu-west-1" in p.stderr, "region not from the config "
              "file's profile")
    finally:
        s3.close()
        ws.cleanup()


if __name__ == "__main__":
    main([test_matches_botocore_with_session_token, test_secrets_never_logged,
          test_profiles_and_403])
