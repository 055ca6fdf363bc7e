#!/usr/bin/env python3
"""Security checks.

- No secret reaches a log line at any level (-vv, debug, with libcurl's
  verbose trace on: SKIPPR_CURL_VERBOSE=1): an S3 session token, an HTTP sink's Authorization header (also on refused and retried
  POSTs), the push source's bearer token (also when a client sends a wrong
  one), an HTTPPull API key, a Kafka SASL password and an MQTT password
  (also when the broker refuses it). `skipprd validate` and `plugins`
  print no option value that is a secret either.
- The push source refuses a wrong token before it reads the body: a body
  over max_body_bytes with a wrong token is answered 401, not 413.
- Plugins load only from absolute plugin_dirs and the install dir: a
  relative entry is refused.
- TLS verification is on by default: the HTTP sink and HTTPPull refuse a
  local HTTPS server whose certificate a test CA signed, at once and
  saying why, and work once ca_file names that CA. (S3: test_s3_tls.py;
  MQTT: test_mqtt.py.)
(Keys made from data staying under the prefix: test_lock_and_paths.py and
fuzz_escape.)
"""
import os
import secrets
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from kafka_test import Broker  # noqa: E402
from s3_test import S3Server  # noqa: E402
from skippr_test import (SINK_PREFIX, SKIPPRD, SOURCE_PREFIX,  # noqa: E402
                         Workspace, check, main, run)
from test_http import Receiver, post  # noqa: E402
from test_kafka import kafka_config, make_records  # noqa: E402
from test_mqtt import Mosquitto, free_port, make_tls  # noqa: E402


def secret(label):
    return "%s-%s" % (label, secrets.token_hex(12))


def sync_vv(ws, env=None, once=True, timeout=120):
    """A fresh run (no state from the one before) at -vv."""
    subprocess.run(["rm", "-rf", ws.state])
    e = dict(os.environ, SKIPPR_CURL_VERBOSE="1")
    e.update(env or {})
    p = subprocess.run([SKIPPRD, "sync", "--pipeline",
                        "gdpr_compliant_migration", "--config", ws.config,
                        "-v", "-v"] + (["--once"] if once else []), env=e,
                       capture_output=True, timeout=timeout)
    return p.returncode, (p.stdout + p.stderr).decode("utf-8", "replace")


def no_secret(text, values, what):
    for v in values:
        check(v not in text, "%s: the secret %s... was logged" % (what,
                                                                 v[:10]))


def write_input(ws, n=3000):
    folder = os.path.join(ws.inp, SOURCE_PREFIX)
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, "part.jsonl"), "wb") as f:
        f.write(b"\n".join(make_records(n, seed=21)) + b"\n")


def test_no_secret_in_any_log():
    ws = Workspace("secrets")
    seen = []
    try:
        write_input(ws)
        # S3 sink with a session token; some requests fail, so the
        # retry and error paths log too.
        token = secret("s3token")
        s3 = S3Server(["dst"])
        try:
            s3.faults(0.2, ["500", "reset"], seed=3)
            kafka_config(ws, ("File", {"path": ws.inp,
                                       "prefix": SOURCE_PREFIX}),
                         ("S3", {"s3_bucket": "dst",
                                 "s3_prefix": SINK_PREFIX}),
                         pipeline_extra={"retry_backoff_ms": 5})
            rc, out = sync_vv(ws, dict(s3.env(), AWS_SESSION_TOKEN=token))
            no_secret(out, [token], "S3 sink")
            check("curl > Authorization: [hidden]" in out and
                  "curl > X-Amz-Security-Token: [hidden]" in out.replace(
                      "x-amz-security-token", "X-Amz-Security-Token"),
                  "libcurl's trace was not on, or showed credentials")
            seen.append("S3 session token (20%% faults, exit %d, %d log "
                        "lines)" % (rc, out.count("\n")))
        finally:
            s3.close()
        # HTTP sink: Authorization header, with refusals and retries.
        auth = secret("bearer")
        recv = Receiver(ws.root)
        try:
            recv.control(fail_rate=0.3, status=503)
            kafka_config(ws, ("File", {"path": ws.inp,
                                       "prefix": SOURCE_PREFIX}),
                         ("HTTP", {"url": "http://127.0.0.1:%d/in" %
                                   recv.port, "batch_bytes": 8192,
                                   "header.Authorization": "Bearer " + auth,
                                   "header.X-Api-Key": auth + "k"}),
                         pipeline_extra={"retry_backoff_ms": 5})
            rc, out = sync_vv(ws)
            no_secret(out, [auth], "HTTP sink")
            check("curl > Authorization: [hidden]" in out and
                  "curl > X-Api-Key: [hidden]" in out,
                  "the HTTP sink's trace was not on")
            seen.append("HTTP sink headers (30%% 503s, exit %d)" % rc)
            # validate and plugins print no secret either
            p = run(["validate", "--config", ws.config, "-v", "-v"],
                    check_rc=False)
            no_secret(p.out + p.err, [auth], "validate")
            # HTTPPull: the API key header
            files = os.path.join(ws.root, "files")
            os.makedirs(files, exist_ok=True)
            with open(os.path.join(files, "a.jsonl"), "wb") as f:
                f.write(b'{"event_type":"x"}\n')
            recv.stop()
            recv = Receiver(ws.root, files)
            key = secret("apikey")
            kafka_config(ws, ("HTTPPull", {
                "urls": "http://127.0.0.1:%d/files/a.jsonl,"
                        "http://127.0.0.1:%d/files/missing" % (recv.port,
                                                               recv.port),
                "header.X-Api-Key": key}),
                ("File", {"path": ws.out, "prefix": SINK_PREFIX}))
            rc, out = sync_vv(ws)
            no_secret(out, [key], "HTTPPull")
            seen.append("HTTPPull header (a 404, exit %d)" % rc)
        finally:
            recv.stop()
        # HTTP push: its token, and clients sending wrong ones.
        tok = secret("pushtoken")
        port = free_port()
        kafka_config(ws, ("HTTP", {"listen": "127.0.0.1:%d" % port,
                                   "path": "/in", "token": tok,
                                   "idle_timeout_seconds": 1}),
                     ("File", {"path": ws.out, "prefix": SINK_PREFIX}))
        subprocess.run(["rm", "-rf", ws.state])  # a state per source
        e = dict(os.environ)
        p = subprocess.Popen([SKIPPRD, "sync", "--pipeline",
                              "gdpr_compliant_migration", "--config",
                              ws.config, "--once", "-v", "-v"], env=e,
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        for _ in range(100):
            if post(port, b"", tok, path="/in")[0] is not None:
                break
            time.sleep(0.05)
        check(post(port, b'{"event_type":"a"}\n', tok + "x",
                   path="/in")[0] == 401, "wrong token not refused")
        check(post(port, b'{"event_type":"a"}\n', tok, path="/in")[0] ==
              200, "right token refused")
        out = p.communicate(timeout=60)[0].decode("utf-8", "replace")
        no_secret(out, [tok], "HTTP push")
        seen.append("HTTP push token (a wrong one sent too)")
        # Kafka: a SASL password passed through as kafka.* (the mock
        # broker has no SASL, so the client fails to connect).
        pw = secret("kafkapw")
        b = Broker({"in": 1})
        try:
            kafka_config(ws, ("Kafka", {
                "brokers": b.bootstrap, "topic": "in", "group_id": '""',
                "kafka.security.protocol": "SASL_PLAINTEXT",
                "kafka.sasl.mechanisms": "PLAIN",
                "kafka.sasl.username": "u", "kafka.sasl.password": pw,
                "kafka.socket.timeout.ms": 3000}),
                ("File", {"path": ws.out, "prefix": SINK_PREFIX}))
            rc, out = sync_vv(ws, timeout=60)
            no_secret(out, [pw], "Kafka")
            seen.append("Kafka SASL password (exit %d)" % rc)
        finally:
            b.stop()
        # MQTT: a password the broker refuses.
        mpw = secret("mqttpw")
        broker = Mosquitto("password_file %s\n" % os.devnull)
        try:
            kafka_config(ws, ("MQTT", {"broker": broker.address,
                                       "topic": "a/#", "username": "u",
                                       "password": mpw}),
                         ("File", {"path": ws.out}))
            rc, out = sync_vv(ws, timeout=60)
            check(rc != 0, "a refused MQTT login did not fail")
            no_secret(out, [mpw], "MQTT")
            seen.append("MQTT password (refused, exit %d)" % rc)
        finally:
            broker.stop()
        for s in seen:
            print("  no secret logged at -vv: " + s)
    finally:
        ws.cleanup()


def test_push_refuses_before_reading_the_body():
    ws = Workspace("authfirst")
    port = free_port()
    try:
        kafka_config(ws, ("HTTP", {"listen": "127.0.0.1:%d" % port,
                                   "path": "/in", "token": "right",
                                   "max_body_bytes": 1024,
                                   "idle_timeout_seconds": 1}),
                     ("File", {"path": ws.out, "prefix": SINK_PREFIX}))
        p = subprocess.Popen([SKIPPRD, "sync", "--pipeline",
                              "gdpr_compliant_migration", "--config",
                              ws.config, "--once"],
                             stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL)
        for _ in range(100):
            if post(port, b"", "right", path="/in")[0] is not None:
                break
            time.sleep(0.05)
        big = b"x" * (5 << 20)
        check(post(port, big, "wrong", path="/in")[0] == 401,
              "a big body with a wrong token was not answered 401")
        check(post(port, big, "right", path="/in")[0] == 413,
              "a big body with the right token was not answered 413")
        p.wait(60)
        print("  5 MiB body: wrong token 401 (never measured), right token "
              "413")
    finally:
        ws.cleanup()


def test_plugins_only_from_absolute_dirs():
    ws = Workspace("plugdirs")
    try:
        ws.write_config()
        with open(ws.config) as f:
            text = f.read()
        with open(ws.config, "w") as f:
            f.write(text.replace("skippr:\n", "skippr:\n  plugin_dirs: "
                                 "[plugins]\n", 1))
        p = run(["validate", "--config", ws.config], check_rc=False,
                cwd=ws.root)
        check(p.returncode != 0 and "absolute" in p.err,
              "a relative plugin dir was accepted: %s" % p.err)
        print("  relative plugin_dirs refused: %s" % p.err.strip()[:120])
    finally:
        ws.cleanup()


def test_tls_verified_for_http():
    ws = Workspace("httptls")
    tls = os.path.join(ws.root, "tls")
    os.makedirs(tls)
    ca, cert, key = make_tls(tls)
    files = os.path.join(ws.root, "files")
    os.makedirs(files)
    recs = make_records(2000, seed=23)
    with open(os.path.join(files, "a.jsonl"), "wb") as f:
        f.write(b"\n".join(recs) + b"\n")
    recv = Receiver(ws.root, files, tls=(cert, key))
    try:
        write_input(ws, 2000)
        url = "https://127.0.0.1:%d" % recv.port
        for ca_file in (None, ca):
            sink = {"url": url + "/in", "batch_bytes": 65536}
            if ca_file:
                sink["ca_file"] = ca_file
            kafka_config(ws, ("File", {"path": ws.inp,
                                       "prefix": SOURCE_PREFIX}),
                         ("HTTP", sink))
            subprocess.run(["rm", "-rf", ws.state])
            start = time.time()
            p = run(["sync", "--pipeline", "gdpr_compliant_migration",
                     "--config", ws.config, "--once"], check_rc=False)
            if ca_file is None:
                check(p.returncode != 0 and "certificate" in p.err and
                      "ca_file" in p.err and time.time() - start < 20,
                      "an unknown CA was not refused at once:\n" + p.err)
                refused = [ln for ln in p.err.splitlines()
                           if "certificate" in ln][0]
            else:
                check(p.returncode == 0, "with ca_file: " + p.err[-2000:])
                got = sum(len([ln for ln in x["body"].split("\n") if ln])
                          for x in recv.posts())
                check(got == 2000, "HTTPS sink delivered %d of 2000" % got)
        for ca_file in (None, ca):
            src = {"urls": url + "/files/a.jsonl"}
            if ca_file:
                src["ca_file"] = ca_file
            kafka_config(ws, ("HTTPPull", src),
                         ("File", {"path": ws.out, "prefix": SINK_PREFIX}))
            # a fresh start: no state, and no claim on the sink
            subprocess.run(["rm", "-rf", ws.state,
                            os.path.join(ws.out, SINK_PREFIX, "_skippr")])
            p = run(["sync", "--pipeline", "gdpr_compliant_migration",
                     "--config", ws.config, "--once"], check_rc=False)
            if ca_file is None:
                check(p.returncode != 0 and "certificate" in p.err,
                      "HTTPPull took an unknown CA:\n" + p.err)
            else:
                check(p.returncode == 0 and " 2000 records" in p.err,
                      "HTTPPull with ca_file: " + p.err[-2000:])
        print("  HTTPS sink and HTTPPull: refused without ca_file (%s), "
              "2000 records each with it" % refused.split(": ", 2)[-1][:110])
    finally:
        recv.stop()
        ws.cleanup()


if __name__ == "__main__":
    main([test_no_secret_in_any_log, test_tls_verified_for_http,
          test_push_refuses_before_reading_the_body,
          test_plugins_only_from_absolute_dirs])
