"""Kafka helpers for the integration tests: the mock-cluster broker
(tests/tools/kafka_broker.c) and kcat, the client users would use, to
produce input and read output back."""
import json
import os
import subprocess

from skippr_test import Failure, SOURCE_DIR, check

BROKER = os.environ.get("KAFKA_BROKER",
                        os.path.join(SOURCE_DIR, "build", "tests",
                                     "kafka_broker"))


class Broker:
    """A mock cluster on 127.0.0.1 with the given topics {name: parts}."""

    def __init__(self, topics):
        args = [BROKER]
        for name, parts in topics.items():
            args += ["-t", "%s:%d" % (name, parts)]
        self.proc = subprocess.Popen(args, stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE,
                                     stderr=subprocess.DEVNULL)
        line = self.proc.stdout.readline().decode()
        if not line.startswith("bootstrap "):
            self.stop()
            raise Failure("kafka_broker did not start: %r" % line)
        self.bootstrap = line.split()[1]

    def command(self, line):
        """Send one command (see kafka_broker.c) and wait for its "ok"."""
        self.proc.stdin.write(line.encode() + b"\n")
        self.proc.stdin.flush()
        answer = self.proc.stdout.readline().decode().strip()
        check(answer == "ok", "kafka_broker: %r answered %r" % (line, answer))

    def stop(self):
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def produce(bootstrap, topic, records, key=None, headers=()):
    """Produce each record (bytes without a newline or tab) as one
    message, keyed by key, else by its index (spreading the records
    evenly over the partitions), with headers ("name=value", ...)."""
    args = ["kcat", "-P", "-b", bootstrap, "-t", topic, "-X",
            "linger.ms=5"]
    for h in headers:
        args += ["-H", h]
    if key is not None:
        args += ["-k", key]
        data = b"\n".join(records) + b"\n"
    else:
        args += ["-K", "\t"]
        data = b"".join(b"%d\t%s\n" % (i, r) for i, r in enumerate(records))
    p = subprocess.run(args, input=data, stderr=subprocess.PIPE, timeout=120)
    check(p.returncode == 0, "kcat -P failed: %s" % p.stderr.decode())


def consume(bootstrap, topic, committed=True):
    """Every message of a topic: dicts with key, payload (bytes), headers
    (dict), partition and offset, read by kcat with
    isolation.level=read_committed unless committed is False."""
    args = ["kcat", "-C", "-b", bootstrap, "-t", topic, "-e", "-q", "-J",
            "-X", "isolation.level=%s" % ("read_committed" if committed
                                         else "read_uncommitted")]
    p = subprocess.run(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       timeout=120)
    check(p.returncode == 0, "kcat -C %s failed: %s" % (topic,
                                                        p.stderr.decode()))
    out = []
    for line in p.stdout.splitlines():
        m = json.loads(line)
        h = m.get("headers") or []
        m["headers"] = dict(zip(h[0::2], h[1::2]))
        m["payload"] = (m.get("payload") or "").encode("utf-8")
        out.append(m)
    return out


def committed_view(bootstrap, topics, marker_topic="skippr.markers"):
    """What a read_committed consumer sees of skippr's output topics.

    librdkafka's mock cluster keeps no transaction markers, so it shows
    the messages of aborted transactions too. Every skippr message names
    its transaction attempt (header skippr-attempt), and the attempt's
    marker in marker_topic is committed in that same transaction; keeping
    only messages whose attempt has a marker therefore gives what a real
    broker shows a read_committed consumer. Returns (messages kept,
    messages of uncommitted attempts)."""
    attempts = set()
    for m in consume(bootstrap, marker_topic):
        attempts.add(json.loads(m["payload"])["attempt"])
    kept, dropped = [], 0
    for t in topics:
        for m in consume(bootstrap, t):
            if m["headers"].get("skippr-attempt") in attempts:
                m["topic"] = t
                kept.append(m)
            else:
                dropped += 1
    return kept, dropped
