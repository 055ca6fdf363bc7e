#!/usr/bin/env python3
"""An HTTP receiver for the tests: stores every POST it accepts and can
fail on command.

    http_receiver.py LOG [FILES] [--tls CERT KEY]

Listens on 127.0.0.1 (an ephemeral port, printed as "listening PORT"),
appends one JSON line per accepted POST to LOG: {"path", "key" (the
Idempotency-Key), "auth" (the Authorization header), "body"}. A POST to
/_control with a JSON body sets how it answers from then on:
{"fail_rate": 0.2, "status": 503, "seed": 1} fails that share of POSTs
with that status (stored nothing); {"fail_rate": 0} heals it.

GET and HEAD /files/NAME serve FILES/NAME with an ETag (its SHA-1),
Range: bytes=N- (206) and If-Match (412 when the ETag differs), like an
object store.

GET /pages/NAME?page=N serves FILES/NAME-N the same way, with
`Link: <NAME?page=1>; rel="first", <?page=N+1>; rel="next"` while
FILES/NAME-(N+1) exists; HEAD there is refused (405), as some APIs do.
"""
import hashlib
import json
import os
import random
import ssl
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

LOCK = threading.Lock()
STATE = {"fail_rate": 0.0, "status": 503, "rng": random.Random(1)}


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def reply(self, status, text=b"ok\n"):
        self.send_response(status)
        self.send_header("Content-Length", str(len(text)))
        if status in (429, 503):
            self.send_header("Retry-After", "1")
        self.end_headers()
        self.wfile.write(text)

    def serve_file(self, with_body):
        link = None
        if self.path.startswith("/pages/"):
            if not with_body:
                return self.reply(405, b"GET only\n")
            name, _, query = self.path[len("/pages/"):].partition("?page=")
            n = int(query or "1")
            if os.path.isfile(os.path.join(sys.argv[2], "%s-%d" % (name,
                                                                  n + 1))):
                link = '<%s?page=1>; rel="first", <?page=%d>; rel="next"' % (
                    name, n + 1)
            name = "%s-%d" % (name, n)
        else:
            name = self.path[len("/files/"):]
        path = os.path.join(sys.argv[2], name) if len(sys.argv) > 2 else ""
        if "/" in name or not os.path.isfile(path):
            return self.reply(404, b"not found\n")
        with open(path, "rb") as f:
            data = f.read()
        etag = '"%s"' % hashlib.sha1(data).hexdigest()
        match = self.headers.get("If-Match")
        if match and match != etag:
            return self.reply(412, b"changed\n")
        start, status = 0, 200
        rng = self.headers.get("Range")
        if rng and rng.startswith("bytes=") and rng.endswith("-"):
            start, status = int(rng[6:-1]), 206
        body = data[start:]
        self.send_response(status)
        self.send_header("ETag", etag)
        if link:
            self.send_header("Link", link)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if with_body:
            self.wfile.write(body)

    def do_GET(self):
        self.serve_file(True)

    def do_HEAD(self):
        self.serve_file(False)

    def do_POST(self):
        n = int(self.headers.get("Content-Length", "0"))
        body = self.rfile.read(n)
        if self.path == "/_control":
            c = json.loads(body)
            with LOCK:
                STATE["fail_rate"] = c.get("fail_rate", 0.0)
                STATE["status"] = c.get("status", 503)
                STATE["rng"] = random.Random(c.get("seed", 1))
            return self.reply(200)
        with LOCK:
            fail = STATE["rng"].random() < STATE["fail_rate"]
            status = STATE["status"]
            if not fail:
                with open(sys.argv[1], "a") as f:
                    f.write(json.dumps({
                        "path": self.path,
                        "key": self.headers.get("Idempotency-Key"),
                        "auth": self.headers.get("Authorization"),
                        "body": body.decode("utf-8")}) + "\n")
        if fail:
            return self.reply(status, b"receiver is full\n")
        self.reply(200)


class Server(ThreadingHTTPServer):
    def handle_error(self, request, client_address):
        pass  # a client killed mid-request is what the tests do


def main():
    srv = Server(("127.0.0.1", 0), Handler)
    if "--tls" in sys.argv:  # HTTPS with that certificate and key
        i = sys.argv.index("--tls")
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(sys.argv[i + 1], sys.argv[i + 2])
        srv.socket = ctx.wrap_socket(srv.socket, server_side=True)
        del sys.argv[i:i + 3]
    print("listening %d" % srv.server_address[1], flush=True)
    srv.serve_forever()


if __name__ == "__main__":
    main()
