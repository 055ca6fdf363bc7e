#!/usr/bin/env python3
"""Emulators of the AWS credential services, for the S3 plugin's tests: STS
(AssumeRole, AssumeRoleWithWebIdentity), the ECS container credentials
endpoint and EC2 instance metadata (IMDSv2, and v1 when asked), on
127.0.0.1 and an ephemeral port. Standard library and botocore only.

    aws_creds.py [--lifetime S] [--web-token T] [--ecs-token T]
                 [--base-key AK:SK] [--imds-v1-only] [--also ADDR:PORT]...

Prints one JSON line when ready:
    {"url": "http://127.0.0.1:P", "blackhole": "http://127.0.0.1:Q"}
STS is at URL/, the container endpoint at URL/ecs/creds, instance metadata
at URL (/latest/...). `blackhole` accepts connections and never answers:
an instance metadata endpoint that hangs. Each --also serves the same on
another address too, such as the ECS agent's 169.254.170.2:80 or the
instance metadata's 169.254.169.254:80 once the test has put them on lo.

Every set of credentials it gives out is AccessKeyId S3RVER, secret S3RVER
(what s3rver takes) and a session token "skt.SOURCE.EXPIRY.N", SOURCE
being sts-web, sts-role, ecs or imds and EXPIRY the epoch second they
lapse, `--lifetime` seconds (default 3600) after they were given. The S3
test proxy, told to check tokens, refuses a request whose token is missing
or has lapsed, and counts requests by SOURCE.

Requests are checked as AWS would: AssumeRole must be SigV4-signed (service
sts) with --base-key; AssumeRoleWithWebIdentity must carry --web-token;
the container endpoint wants the Authorization header --ecs-token (when
given); IMDSv2 wants a token from PUT /latest/api/token.

GET /__stats answers {"issued": {SOURCE: n}, "refused": {what: n},
"imds_tokens": n}. Exits when stdin closes.
"""
import argparse
import datetime
import json
import socket
import sys
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

ROLE = "skippr-test-role"
lock = threading.Lock()
issued = {}
refused = {}
imds_tokens = set()
serial = [0]
args = None


def count(d, k):
    with lock:
        d[k] = d.get(k, 0) + 1


def new_creds(source):
    with lock:
        serial[0] += 1
        n = serial[0]
        issued[source] = issued.get(source, 0) + 1
    expiry = int(time.time()) + args.lifetime
    when = datetime.datetime.fromtimestamp(expiry, datetime.timezone.utc)
    return {"AccessKeyId": "S3RVER", "SecretAccessKey": "S3RVER",
            "Token": "skt.%s.%d.%d" % (source, expiry, n),
            "Expiration": when.strftime("%Y-%m-%dT%H:%M:%SZ")}


def sts_xml(action, c):
    return ("<%sResponse xmlns=\"https://sts.amazonaws.com/doc/2011-06-15/\">"
            "<%sResult><Credentials><AccessKeyId>%s</AccessKeyId>"
            "<SecretAccessKey>%s</SecretAccessKey>"
            "<SessionToken>%s</SessionToken><Expiration>%s</Expiration>"
            "</Credentials></%sResult></%sResponse>" % (
                action, action, c["AccessKeyId"], c["SecretAccessKey"],
                c["Token"], c["Expiration"], action, action)).encode()


def sigv4_ok(handler, body):
    """Whether the request is SigV4-signed for sts with --base-key."""
    auth = handler.headers.get("Authorization", "")
    if not auth.startswith("AWS4-HMAC-SHA256 "):
        return False
    parts = dict(p.strip().split("=", 1) for p in
                 auth[len("AWS4-HMAC-SHA256 "):].split(","))
    ak, sk = args.base_key.split(":", 1)
    cred = parts.get("Credential", "").split("/")
    if len(cred) != 5 or cred[0] != ak or cred[3] != "sts":
        return False
    signed = parts.get("SignedHeaders", "").split(";")
    headers = {h: handler.headers.get(h, "") for h in signed}
    req = AWSRequest(method="POST", url="http://%s/" % headers.get("host", ""),
                     data=body, headers=headers)
    req.context["timestamp"] = headers.get("x-amz-date", "")
    signer = SigV4Auth(Credentials(ak, sk), "sts", cred[2])
    canonical = signer.canonical_request(req)
    want = signer.signature(signer.string_to_sign(req, canonical), req)
    return want == parts.get("Signature")


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *a):
        pass

    def reply(self, code, body, ctype="application/json"):
        if isinstance(body, (dict, list)):
            body = json.dumps(body).encode()
        elif isinstance(body, str):
            body = body.encode()
        self.send_response(code)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def body(self):
        n = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(n) if n else b""

    def do_POST(self):
        body = self.body()
        if self.path != "/":
            return self.reply(404, {"error": "not found"})
        form = dict(urllib.parse.parse_qsl(body.decode()))
        action = form.get("Action")
        if action == "AssumeRoleWithWebIdentity":
            if not form.get("RoleArn") or not form.get("RoleSessionName") or \
                    form.get("WebIdentityToken") != args.web_token:
                count(refused, "web")
                return self.reply(400, "<ErrorResponse><Error><Code>"
                                  "InvalidIdentityToken</Code></Error>"
                                  "</ErrorResponse>", "text/xml")
            return self.reply(200, sts_xml(action, new_creds("sts-web")),
                              "text/xml")
        if action == "AssumeRole":
            if not form.get("RoleArn") or not sigv4_ok(self, body):
                count(refused, "role")
                return self.reply(403, "<ErrorResponse><Error><Code>"
                                  "SignatureDoesNotMatch</Code></Error>"
                                  "</ErrorResponse>", "text/xml")
            return self.reply(200, sts_xml(action, new_creds("sts-role")),
                              "text/xml")
        count(refused, "sts-action")
        return self.reply(400, "<ErrorResponse/>", "text/xml")

    def do_PUT(self):
        self.body()
        if self.path != "/latest/api/token":
            return self.reply(404, "")
        if args.imds_v1_only:
            return self.reply(403, "")
        if not self.headers.get("X-aws-ec2-metadata-token-ttl-seconds"):
            count(refused, "imds-ttl")
            return self.reply(400, "")
        with lock:
            tok = "imdstok-%d" % (len(imds_tokens) + 1)
            imds_tokens.add(tok)
        return self.reply(200, tok, "text/plain")

    def do_GET(self):
        if self.path == "/__stats":
            with lock:
                return self.reply(200, {"issued": dict(issued),
                                        "refused": dict(refused),
                                        "imds_tokens": len(imds_tokens)})
        if self.path == "/ecs/creds":
            if args.ecs_token and \
                    self.headers.get("Authorization") != args.ecs_token:
                count(refused, "ecs")
                return self.reply(401, {"error": "unauthorized"})
            return self.reply(200, new_creds("ecs"))
        base = "/latest/meta-data/iam/security-credentials/"
        if self.path.startswith(base):
            tok = self.headers.get("X-aws-ec2-metadata-token")
            if not args.imds_v1_only and tok not in imds_tokens:
                count(refused, "imds-token")
                return self.reply(401, "")
            rest = self.path[len(base):]
            if rest == "":
                return self.reply(200, ROLE, "text/plain")
            if rest == ROLE:
                c = new_creds("imds")
                c.update({"Code": "Success", "Type": "AWS-HMAC",
                          "LastUpdated": c["Expiration"]})
                return self.reply(200, c)
        return self.reply(404, "")


def main():
    global args
    ap = argparse.ArgumentParser()
    ap.add_argument("--lifetime", type=int, default=3600)
    ap.add_argument("--web-token", default="web-identity-token")
    ap.add_argument("--ecs-token", default="")
    ap.add_argument("--base-key", default="AKBASE:SKBASE")
    ap.add_argument("--imds-v1-only", action="store_true")
    ap.add_argument("--also", action="append", default=[])
    args = ap.parse_args()
    srv = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    srv.daemon_threads = True
    for a in args.also:
        host, port = a.rsplit(":", 1)
        extra = ThreadingHTTPServer((host, int(port)), Handler)
        extra.daemon_threads = True
        threading.Thread(target=extra.serve_forever, daemon=True).start()
    hole = socket.socket()
    hole.bind(("127.0.0.1", 0))
    hole.listen(64)  # connections complete in the backlog, never answered
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    print(json.dumps({"url": "http://127.0.0.1:%d" % srv.server_port,
                      "blackhole": "http://127.0.0.1:%d" %
                      hole.getsockname()[1]}), flush=True)
    sys.stdin.read()
    srv.shutdown()


if __name__ == "__main__":
    main()
