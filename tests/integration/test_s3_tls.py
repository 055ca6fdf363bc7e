#!/usr/bin/env python3
"""TLS to the endpoint: verified by default, with a CA bundle option.

The test proxy serves HTTPS with a self-signed certificate made here for
127.0.0.1. Without ca_bundle skipprd refuses the server on the first
request, with one clear error line and nothing written; with ca_bundle
naming that certificate (or AWS_CA_BUNDLE, as AWS's tools read it) the
same run copies everything, byte-equal; verify_tls: false also connects
(for test rigs only).
"""
import os

from s3_test import S3Server, make_cert
from skippr_test import Workspace, check, expected_records, main

TRANSFORM = {"namespace_fields": "event_type"}


def sync(ws, s3, name, tls_lines, extra_env=None):
    config = os.path.join(ws.root, name + ".yml")
    with open(config, "w") as f:
        f.write("""skippr:
  state_dir: %s/%s
pipelines:
  p:
    data_source: data_sources.a
    data_sink: data_sinks.b
    transform:
      namespace_fields: event_type
data_sources:
  a:
    S3:
      s3_bucket: src
%sdata_sinks:
  b:
    S3:
      s3_bucket: dst
      s3_prefix: %s
%s""" % (ws.state, name, tls_lines, name, tls_lines))
    return s3.sync(config, env=extra_env, unset=("AWS_CA_BUNDLE",),
                   timeout=300)


def test_tls_verified_with_ca_bundle():
    ws = Workspace("s3tls")
    cert, key = make_cert(ws.root)
    s3 = S3Server(["src", "dst"], tls=(cert, key))
    try:
        check(s3.endpoint.startswith("https://"), s3.endpoint)
        ws.generate(objects=20, records=50, seed=3)
        s3.upload_tree("src", ws.inp)

        p = sync(ws, s3, "untrusted", "")
        check(p.returncode not in (0, None), "an untrusted server was used")
        errors = [ln for ln in p.stderr.splitlines() if "error" in ln.lower()]
        check(any("ca_bundle" in ln and "certificate" in ln.lower()
                  for ln in errors), "no clear TLS error:\n" + p.stderr)
        check(len(errors) <= 2, "one clear error, not a cascade:\n" +
              p.stderr)
        check(not s3.objects("dst", "untrusted/"), "objects were written")

        s3.reset_stats()
        want = expected_records(ws.inp, transform=TRANSFORM)
        for name, lines, extra in (
                ("bundle", "      ca_bundle: %s\n" % cert, None),
                ("envbundle", "", {"AWS_CA_BUNDLE": cert}),
                ("noverify", "      verify_tls: false\n", None)):
            p = sync(ws, s3, name, lines, extra)
            check(p.returncode == 0, "%s: %s" % (name, p.stderr[-2000:]))
            check(dict(want) == dict(s3.records("dst", name + "/")),
                  "%s: output differs" % name)
        # Over TLS, bodies are not hashed into the signature (as the AWS
        # SDKs send them); each still carries the CRC32C S3 checks.
        st = s3.stats()
        writes = sum(st["counts"].get(k, 0) for k in (
            "put", "upload_part", "complete_multipart"))
        check(writes > 0 and st["payloads"] == {
            "signed": 0, "unsigned": writes, "mismatched": 0},
            "payload hashes %s for %d writes" % (st["payloads"], writes))
        check(st["checksums"]["verified"] == writes,
              "checksums %s for %d writes" % (st["checksums"], writes))
        print("  untrusted: refused (%s); ca_bundle, AWS_CA_BUNDLE and "
              "verify_tls: false: %d records each, exact" % (errors[0].split(": ", 2)[-1][:80],
                                          sum(want.values())))
    finally:
        s3.close()
        ws.cleanup()


if __name__ == "__main__":
    main([test_tls_verified_with_ca_bundle])
