"""The S3 test server for integration tests: s3rver behind the counting,
fault-injecting proxy in tests/tools/s3/s3server.js, on 127.0.0.1 and an
ephemeral port, started and stopped by the test."""
import collections
import concurrent.futures
import hashlib
import json
import os
import resource
import ssl
import subprocess
import sys
import tempfile
import time
import urllib.request

import boto3
from botocore.config import Config

from skippr_test import GEN, SKIPPRD, SOURCE_DIR, frame

TOOLS = os.path.join(SOURCE_DIR, "tests", "tools", "s3")
ACCESS_KEY = "S3RVER"
# What s3rver keeps as the metadata of an object PUT by boto3.
SEED_METADATA = '{\n  "content-type": "binary/octet-stream"\n}'
SECRET_KEY = "S3RVER"


# Crash points of a copy whose objects grow as multipart uploads, with how
# many times each is passed in a short run: grow_write comes before each
# part (and the last one, at the finish), part_put after a part is
# uploaded and before a commit records it, grow_commit before the Complete,
# ledger_merge between a ledger flush and its merge (one flush in eight).
KILL_POINTS = {"read": 12, "commit": 6, "seal": 2, "grow_write": 4,
               "part_put": 3, "grow_commit": 3, "stage_put": 4, "done": 2,
               "gc": 1, "ledger_merge": 1}


def random_crash(rng):
    """A SKIPPR_CRASH value: one of KILL_POINTS, at a random pass."""
    point = rng.choice(sorted(KILL_POINTS))
    return "%s:%d" % (point, rng.randrange(1, KILL_POINTS[point] + 1))


def add_batch(ws, s3, rng, n, first_id):
    """Two new objects of random size (ids from first_id) into the src
    bucket and into ws.inp, as batch n: new objects keep kill runs busy."""
    d = os.path.join(ws.root, "batch%d" % n)
    subprocess.run([sys.executable, GEN, d, "--objects", "2", "--records",
                    str(rng.randrange(500, 3000)), "--seed",
                    str(rng.randrange(1 << 30)), "--first-id", str(first_id)],
                   check=True, stdout=subprocess.DEVNULL)
    s3.upload_tree("src", d)
    subprocess.run(["cp", "-r", d + "/.", ws.inp], check=True)


def _more_files():
    # s3rver opens every object's metadata at once when listing; with
    # thousands of objects the default 1024 descriptors run out.
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


def _client_config():
    """Path-style, no retries, and (botocore 1.36 and later) checksums only
    where S3 requires them: newer botocore otherwise uploads over HTTPS in
    aws-chunked form, which s3rver stores with its chunk framing. Debian
    12's botocore (1.29) has neither the option nor that behaviour."""
    base = {"s3": {"addressing_style": "path"},
            "retries": {"max_attempts": 1}}
    try:
        return Config(request_checksum_calculation="when_required", **base)
    except TypeError:
        return Config(**base)


def make_cert(root):
    """A self-signed certificate for 127.0.0.1 in root, for S3Server's
    tls: (cert, key) paths."""
    cert = os.path.join(root, "cert.pem")
    key = os.path.join(root, "key.pem")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048",
                    "-nodes", "-days", "2", "-subj", "/CN=127.0.0.1",
                    "-addext", "subjectAltName=IP:127.0.0.1",
                    "-keyout", key, "-out", cert],
                   check=True, capture_output=True)
    return cert, key


class S3Server:
    def __init__(self, buckets, tls=None):
        """tls: (cert_pem, key_pem) to serve HTTPS with that certificate;
        the boto3 client then trusts it as its CA."""
        self.dir = tempfile.mkdtemp(prefix="skippr-s3rver-")
        # The control calls trust the test's own certificate.
        self._ssl = ssl.create_default_context(cafile=tls[0]) if tls else None
        if not os.path.isdir(os.path.join(TOOLS, "node_modules", "s3rver")):
            subprocess.run(["npm", "ci", "--no-audit", "--no-fund"], cwd=TOOLS,
                           check=True, stdout=subprocess.DEVNULL)
        self.proc = subprocess.Popen(
            # s3rver makes continuation tokens with a cipher that OpenSSL 3
            # keeps in its legacy provider.
            ["node", "--openssl-legacy-provider",
             os.path.join(TOOLS, "s3server.js"), "--dir", self.dir,
             "--buckets", ",".join(buckets)] +
            (["--tls-cert", tls[0], "--tls-key", tls[1]] if tls else []),
            stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            preexec_fn=_more_files)
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError("s3 test server did not start")
        self.endpoint = json.loads(line)["endpoint"]
        self.client = boto3.client(
            "s3", endpoint_url=self.endpoint, aws_access_key_id=ACCESS_KEY,
            aws_secret_access_key=SECRET_KEY, region_name="us-east-1",
            verify=tls[0] if tls else None, config=_client_config())

    def env(self):
        """Only the endpoint and credentials come from the environment."""
        return {"AWS_ENDPOINT_URL": self.endpoint,
                "AWS_ACCESS_KEY_ID": ACCESS_KEY,
                "AWS_SECRET_ACCESS_KEY": SECRET_KEY,
                "AWS_REGION": "us-east-1"}

    def _control(self, path, body=None):
        req = urllib.request.Request(self.endpoint + path,
                                     data=None if body is None else
                                     json.dumps(body).encode(),
                                     method="GET" if body is None else "POST")
        with urllib.request.urlopen(req, timeout=10,
                                    context=self._ssl) as r:
            return json.loads(r.read())

    def stats(self):
        return self._control("/__stats")

    def require_tokens(self, on=True):
        """Refuse S3 requests without a live test session token (see
        s3server.js /__tokens and tests/tools/aws_creds.py)."""
        return self._control("/__tokens", {"require": on})

    def verify_signatures(self, on=True):
        """Check every request's SigV4 signature against the secret, as S3
        does (s3rver checks only the key id)."""
        return self._control("/__auth", {"verify": on})

    def reset_stats(self):
        return self._control("/__reset", {})

    def faults(self, rate, kinds, seed=1, complete_error_rate=0, only=None,
               nth=0, persist=False, max_put_bytes=0, body_idle_ms=0,
               **more):
        """Fail `rate` of requests (of the kinds in `only`, if given) with
        one of `kinds`; or, with nth, the nth request from now (and with
        persist every later one) with kinds[0]; with max_put_bytes, refuse
        a PutObject larger than that; with body_idle_ms, answer a body
        that stops arriving for that long 400 RequestTimeout (as S3 does
        after about 20 s, the default); `more` passes further settings
        (kill_pid, late_ms, meta_lag_ms); see s3server.js."""
        return self._control("/__faults", {
            "rate": rate, "kinds": kinds, "seed": seed,
            "complete_error_rate": complete_error_rate, "only": only,
            "nth": nth, "persist": persist, "max_put_bytes": max_put_bytes,
            "body_idle_ms": body_idle_ms, **more})

    def seed_tree(self, bucket, root):
        """Place every file under root in bucket (key: its path under root)
        the way s3rver stores a PutObject (the bytes, their MD5 as the
        ETag, the metadata of a boto3 upload), without a request each:
        for fixtures of thousands of objects, which PutObject by PutObject
        cost s3rver about 3 ms each. s3rver then lists and serves them as
        it does uploaded ones (test_s3_concurrency compares the two).
        Returns the number of objects."""
        n = 0
        for d, _, files in os.walk(root):
            for fn in files:
                src = os.path.join(d, fn)
                dst = os.path.join(self.dir, bucket,
                                   os.path.relpath(src, root))
                os.makedirs(os.path.dirname(dst), exist_ok=True)
                with open(src, "rb") as f:
                    data = f.read()
                with open(dst + "._S3rver_metadata.json", "w") as f:
                    f.write(SEED_METADATA)
                with open(dst + "._S3rver_object.md5", "w") as f:
                    f.write(hashlib.md5(data).hexdigest())
                with open(dst + "._S3rver_object", "wb") as f:
                    f.write(data)
                n += 1
        return n

    def upload_tree(self, bucket, root):
        paths = [os.path.join(d, fn) for d, _, files in os.walk(root)
                 for fn in files]

        def put(path):
            with open(path, "rb") as f:
                self.client.put_object(Bucket=bucket,
                                       Key=os.path.relpath(path, root),
                                       Body=f.read())
        with concurrent.futures.ThreadPoolExecutor(8) as pool:
            list(pool.map(put, paths))
        return len(paths)

    def put_visible_at_once(self, staging, bucket, key, body):
        """PUT body as bucket/key so that a concurrent LIST or GET never
        sees it half written. s3rver writes an object's file as the body
        arrives and lists it meanwhile, with the size written so far (real
        S3 shows an object only once complete). So the object is PUT into
        the `staging` bucket, then its files are renamed into `bucket`,
        the data file last."""
        self.client.put_object(Bucket=staging, Key=key, Body=body)
        src = os.path.join(self.dir, staging, key)
        dst = os.path.join(self.dir, bucket, key)
        os.makedirs(os.path.dirname(dst), exist_ok=True)
        suffixes = ("._S3rver_metadata.json", "._S3rver_object.md5",
                    "._S3rver_object")
        # s3rver may answer the PUT before its last file is in place (seen
        # under CPU load: an object whose data file was never moved, so it
        # was never listed, and the soak counted its records lost). Wait
        # for all three, and fail loudly rather than lose one.
        deadline = time.time() + 30
        while not all(os.path.exists(src + x) for x in suffixes):
            if time.time() > deadline:
                raise RuntimeError("s3rver did not write %s/%s" %
                                   (staging, key))
            time.sleep(0.01)
        for suffix in suffixes:
            os.rename(src + suffix, dst + suffix)

    def sync(self, config, env=None, unset=(), timeout=600, args=()):
        """Run `skipprd sync -p p --once -c config [args]` against this
        server: the inherited environment less the names in `unset`, then
        env(), then `env`. Returns the CompletedProcess (text output)."""
        e = {k: v for k, v in os.environ.items() if k not in unset}
        e.update(self.env())
        e.update(env or {})
        return subprocess.run([SKIPPRD, "sync", "-p", "p", "--once", "-c",
                               config] + list(args), env=e,
                              capture_output=True,
                              text=True, timeout=timeout)

    def records(self, bucket, prefix=""):
        """Counter of (folder under prefix, record bytes) over every object
        under prefix, read back with boto3."""
        got = collections.Counter()
        for key, data in self.objects(bucket, prefix).items():
            folder = key[len(prefix):].rsplit("/", 1)[0]
            for raw, _ in frame(data):
                got[(folder, raw)] += 1
        return got

    def objects(self, bucket, prefix="", claims=False):
        """{key: bytes} of every object under prefix, read with boto3;
        the sink's claims (_skippr/claims/) only when claims is set."""
        out = {}
        pages = self.client.get_paginator("list_objects_v2").paginate(
            Bucket=bucket, Prefix=prefix)
        for page in pages:
            for o in page.get("Contents", []):
                if not claims and "_skippr/claims/" in o["Key"]:
                    continue
                out[o["Key"]] = self.client.get_object(
                    Bucket=bucket, Key=o["Key"])["Body"].read()
        return out

    def close(self):
        try:
            self.proc.stdin.close()
            self.proc.wait(timeout=10)
        except Exception:  # noqa: BLE001 - make sure it is gone
            self.proc.kill()
        subprocess.run(["rm", "-rf", self.dir])
