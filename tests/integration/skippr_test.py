"""Shared helpers for the integration tests.

The tests drive the real skipprd binary against real folders. What skipprd
writes is checked against an oracle written here independently, in Python,
from the layout rules: for every input record, the partition folder it must
land in and its exact bytes. Comparing the two as multisets shows at once
any record lost, duplicated, changed or misplaced.
"""
import atexit
import collections
import datetime
import gzip
import json
import os
import random
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

try:
    import zstandard  # python3-zstandard, which scripts/setup.sh installs
except ImportError:  # another python3 first in PATH: the zstd command
    zstandard = None

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE_DIR = os.environ.get("SKIPPR_SOURCE_DIR",
                            os.path.dirname(os.path.dirname(HERE)))
SKIPPRD = os.path.abspath(os.environ.get("SKIPPRD",
                         os.path.join(SOURCE_DIR, "build", "runtime", "skipprd")))
GEN = os.path.join(SOURCE_DIR, "tests", "tools", "gen_firehose.py")

SEED_TRANSFORM = {
    "namespace_fields": "event_type",
    "batch_partition_fields": "detail.tenant_id,truck.tenant_id",
    "batch_time_fields": "timestamp",
    "batch_time_unit": "day",
    "time_partition_prefix": "p_",
}
SINK_PREFIX = "copy/phew-thats-a-month-and-a-gdpr-fine-saved"
SOURCE_PREFIX = "ill-just-dump-this-here"
# SKIPPR_TEST_SCALE (default 1) scales the random trials of the kill and
# fault loops (trials() below). scripts/test.sh sets 0.5 for the sanitizer
# stage: the same paths, half as many kills, since there the point is to
# catch memory errors and undefined behaviour, which the first kill on a
# path shows as well as the fiftieth.
TEST_SCALE = float(os.environ.get("SKIPPR_TEST_SCALE", "1"))

# A pipeline given by flags keeps its state in $XDG_STATE_HOME/skippr
# unless --state-dir says otherwise: each test process gets its own, so
# that no test leaves state in the home folder or finds another's.
_XDG = tempfile.mkdtemp(prefix="skippr-xdg-")
os.environ["XDG_STATE_HOME"] = _XDG
atexit.register(shutil.rmtree, _XDG, True)


def trials(n, least=4):
    """n random trials (kills, fault steps) scaled by SKIPPR_TEST_SCALE,
    and never fewer than least."""
    return max(least, int(round(n * TEST_SCALE)))


# .jsonl objects hold one record per line; .json ones, beside them, hold
# the records that span lines (multiline_records: json).
OBJECT_NAME = re.compile(r"^apply-[0-9a-f]{16}-[0-9]{10}\.jsonl?$")


class Failure(Exception):
    pass


class Skipped(Exception):
    """A test that cannot run here; main() prints SKIP with the reason."""


def check(cond, what):
    if not cond:
        raise Failure(what)


SHARED_DIR = os.environ.get("SKIPPR_SHARED_DIR",
                            os.path.join(SOURCE_DIR, "..", "shared"))


def shared_path(*parts, env=None):
    """A path under ../shared (the seed, the conformance suites), or under
    $env when that variable is set. Missing, it fails the test under
    CI=true, where the folder is part of the checkout, and elsewhere skips
    it with a line naming the path, so a bare clone still passes."""
    base = os.environ.get(env) if env else None
    path = os.path.normpath(os.path.join(base, *parts[1:]) if base else
                            os.path.join(SHARED_DIR, *parts))
    if os.path.exists(path):
        return path
    if os.environ.get("CI", "").lower() in ("true", "1"):
        raise Failure("%s is missing (CI=true needs ../shared)" % path)
    raise Skipped("%s not found" % path)


# ---- workspace ------------------------------------------------------------


def asan_build():
    """True when SKIPPRD is built with AddressSanitizer. Its runtime takes
    some 30 MB of its own, and it keeps freed memory in quarantine and
    adds redzones, so RSS figures from such a build are not the engine's."""
    with open(SKIPPRD, "rb") as f:
        return b"__asan_init" in f.read()


class Workspace:
    """A temp folder with in/, out/, a state dir and a config."""

    def __init__(self, name, root=None):
        """A new temp folder; or, with root, that folder (a state is tied
        to the absolute paths of its source and sink)."""
        self.root = root or tempfile.mkdtemp(prefix="skippr-%s-" % name)
        self.inp = os.path.join(self.root, "in")
        self.out = os.path.join(self.root, "out")
        self.state = os.path.join(self.root, "state")
        self.config = os.path.join(self.root, "skippr.yml")
        os.makedirs(self.inp, exist_ok=root is not None)

    def cleanup(self):
        if os.environ.get("SKIPPR_KEEP"):
            print("  kept %s (SKIPPR_KEEP is set)" % self.root)
            return
        shutil.rmtree(self.root, ignore_errors=True)

    @property
    def sink_root(self):
        return os.path.join(self.out, SINK_PREFIX)

    def write_config(self, pipeline_extra=None, transform=None, threads=None,
                     sink_extra=None, source_extra=None, sink_format="jsonl"):
        transform = dict(SEED_TRANSFORM if transform is None else transform)
        lines = [
            "skippr:",
            "  workspace: test",
            "  skipprd_el_storage_mode: local",
            "  state_dir: %s" % self.state,
        ]
        if threads:
            lines.append("  threads: %d" % threads)
        lines += [
            "pipelines:",
            "  gdpr_compliant_migration:",
            "    type: copy",
            "    data_source: data_sources.firehose_archive",
            "    data_sink: data_sinks.tenant_layout",
        ]
        pipe = {"buffer_threshold_seconds": 86400}
        pipe.update(pipeline_extra or {})
        for k, v in pipe.items():
            lines.append("    %s: %s" % (k, v))
        lines.append("    transform:")
        for k, v in transform.items():
            lines.append("      %s: %s" % (k, v))
        lines += [
            "data_sources:",
            "  firehose_archive:",
            "    File:",
            "      path: %s" % self.inp,
            "      prefix: %s" % SOURCE_PREFIX,
        ]
        for k, v in (source_extra or {}).items():
            lines.append("      %s: %s" % (k, v))
        lines += [
            "data_sinks:",
            "  tenant_layout:",
            "    File:",
            "      path: %s" % self.out,
            "      prefix: %s" % SINK_PREFIX,
            "      format: %s" % sink_format,
        ]
        for k, v in (sink_extra or {}).items():
            lines.append("      %s: %s" % (k, v))
        with open(self.config, "w") as f:
            f.write("\n".join(lines) + "\n")
        return self.config

    def generate(self, **kw):
        args = [sys.executable, GEN, self.inp]
        for k, v in kw.items():
            args += ["--" + k.replace("_", "-")]
            if v != "":
                args.append(str(v))
        subprocess.run(args, check=True, stdout=subprocess.DEVNULL)

    def sync(self, *extra, env=None, timeout=300, check_rc=True):
        return run(["sync", "--pipeline", "gdpr_compliant_migration",
                    "--config", self.config, *extra], env=env,
                   timeout=timeout, check_rc=check_rc)


def free_port():
    """A port on 127.0.0.1 that nothing listens on (now)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run(args, env=None, timeout=300, check_rc=True, cwd=None):
    e = dict(os.environ)
    for k in ("SKIPPR_CRASH", "SKIPPR_FAULT"):
        e.pop(k, None)
    e.update(env or {})
    p = subprocess.run([SKIPPRD] + list(args), env=e, cwd=cwd,
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       timeout=timeout)
    p.out = p.stdout.decode("utf-8", "replace")
    p.err = p.stderr.decode("utf-8", "replace")
    if check_rc and p.returncode != 0:
        raise Failure("skipprd %s exited %d\n%s%s" % (" ".join(args),
                                                      p.returncode, p.out,
                                                      p.err))
    return p


# ---- framing (oracle side) -------------------------------------------------

_WS = " \t\r\n"


def unzstd(data):
    """The bytes of every zstd frame in data, in order; ValueError when the
    last is cut short (what `zstd -d` refuses)."""
    if not zstandard:
        return subprocess.run(["zstd", "-d", "-q", "-c"], input=data,
                              stdout=subprocess.PIPE, check=True).stdout
    out = []
    while data:
        d = zstandard.ZstdDecompressor().decompressobj()
        out.append(d.decompress(data))
        if not d.eof:
            raise ValueError("truncated zstd frame")
        data = d.unused_data
    return b"".join(out)


def frame(data):
    """Record byte strings of a valid JSON unit, in order, following the
    framings skippr accepts (top-level arrays unwrapped once)."""
    if data[:2] == b"\x1f\x8b":
        data = gzip.decompress(data)
    elif data[:4] == b"\x28\xb5\x2f\xfd":
        # Every frame, as `zstd -d` reads them (in-process: a command per
        # object cost seconds over thousands).
        data = unzstd(data)
    if data[:3] == b"\xef\xbb\xbf":
        data = data[3:]
    s = data.decode("utf-8")
    dec = json.JSONDecoder()
    out = []
    i, n, in_array = 0, len(s), False
    while True:
        while i < n and s[i] in _WS:
            i += 1
        if i >= n:
            return out
        c = s[i]
        if in_array and c in ",]":
            in_array = c == ","
            i += 1
            continue
        if not in_array and c == "[":
            in_array = True
            i += 1
            continue
        obj, end = dec.raw_decode(s, i)
        out.append((s[i:end].encode("utf-8"), obj))
        i = end


# ---- routing (oracle side) ---------------------------------------------------

_ESCAPE = set(range(0x20)) | {0x7F} | set(b"\"#%'*/:=?\\{[]^")
HIVE_DEFAULT = "__HIVE_DEFAULT_PARTITION__"
SEGMENT_MAX = 200


def fnv1a64(b):
    h = 1469598103934665603
    for x in b:
        h ^= x
        h = (h * 1099511628211) & 0xFFFFFFFFFFFFFFFF
    return h


def escape_units(value):
    """The escaped value as a list of units that may not be split."""
    units = []
    for ch in value:
        b = ch.encode("utf-8", "surrogatepass")
        if len(b) == 1 and b[0] in _ESCAPE:
            units.append("%%%02X" % b[0])
        else:
            units.append(ch)
    return units


def segment(head, value):
    units = escape_units(value)
    full = head + "".join(units)
    if len(full.encode("utf-8")) <= SEGMENT_MAX:
        return full
    room = SEGMENT_MAX - len(head.encode()) - 17
    out, used = [], 0
    for u in units:
        ub = len(u.encode("utf-8"))
        if used + ub > room:
            break
        out.append(u)
        used += ub
    return head + "".join(out) + "~%016x" % fnv1a64(value.encode("utf-8"))


def get_path(obj, path):
    for part in path.split("."):
        if not isinstance(obj, dict) or part not in obj:
            return None
        obj = obj[part]
    return obj


def scalar_text(v, lexeme=None):
    """Text of a present scalar, or None. Numbers keep their lexeme, which
    the caller passes when it has one."""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, str):
        return v if v != "" else None
    if isinstance(v, (int, float)):
        return lexeme if lexeme is not None else json.dumps(v)
    return None


_ISO = re.compile(r"^(\d{4})-(\d{2})-(\d{2})(?:[Tt ](\d{2}):(\d{2})"
                  r"(?::(\d{2})(?:[.,]\d+)?)?)?"
                  r"(?:([Zz])|([+-])(\d{2})(?::?(\d{2}))?)?$")


def parse_time(v):
    """UTC datetime for a time value, or None (DESIGN section 5)."""
    if isinstance(v, bool) or v is None:
        return None
    if isinstance(v, str):
        m = _ISO.match(v)
        if m:
            y, mo, d, h, mi, s = (int(x) if x else 0 for x in m.groups()[:6])
            try:
                t = datetime.datetime(y, mo, d, h, mi, min(s, 59),
                                      tzinfo=datetime.timezone.utc)
            except ValueError:
                return None
            if m.group(8):
                off = int(m.group(9)) * 3600 + int(m.group(10) or 0) * 60
                if int(m.group(9)) > 23 or int(m.group(10) or 0) > 59:
                    return None
                t -= datetime.timedelta(seconds=off if m.group(8) == "+" else -off)
            return t
        if not re.match(r"^-?\d+(\.\d+)?$", v):
            return None
        v = float(v) if "." in v else int(v)
    if isinstance(v, (int, float)):
        mag = abs(v)
        div = 1 if mag < 1e11 else 1e3 if mag < 1e14 else 1e6 if mag < 1e17 else 1e9
        secs = v // div if isinstance(v, int) else int(v // div)
        return datetime.datetime(1970, 1, 1, tzinfo=datetime.timezone.utc) + \
            datetime.timedelta(seconds=int(secs))
    return None


def column_name(path):
    """The partition column's default name: the path's last dotted segment,
    without an XML attribute's '@' (detail.tenant_id -> tenant_id)."""
    last = path.rsplit(".", 1)[-1]
    return last[1:] if last.startswith("@") and len(last) > 1 else last


def expected_key(obj, transform=None):
    t = SEED_TRANSFORM if transform is None else transform
    pfx = t.get("time_partition_prefix", "")
    segs = []
    ns = None
    for f in t.get("namespace_fields", "event_type").split(","):
        ns = scalar_text(get_path(obj, f.strip()))
        if ns is not None:
            break
    if ns is None:
        segs.append("_default")
    else:
        s = segment("", ns)
        segs.append({".": "%2E", "..": "%2E%2E"}.get(s, s))
    pfields = [f.strip() for f in t.get("batch_partition_fields", "").split(",")
               if f.strip()]
    if pfields:
        per_path = t.get("batch_partition_naming") == "per_path"
        name = t.get("batch_partition_name") or column_name(pfields[0])
        for f in pfields:
            v = scalar_text(get_path(obj, f))
            if v is not None:
                head = pfx + "".join(escape_units(f if per_path else name))
                segs.append(segment(head + "=", v))
                break
        else:
            first = pfields[0] if per_path else name
            segs.append(pfx + "".join(escape_units(first)) + "=" + HIVE_DEFAULT)
    unit = t.get("batch_time_unit")
    if unit:
        when = None
        for f in t.get("batch_time_fields", "").split(","):
            when = parse_time(get_path(obj, f.strip()))
            if when is not None:
                break
        names = ["year", "month", "day", "hour"]
        depth = names.index(unit) + 1
        vals = None if when is None else \
            ["%04d" % when.year, "%02d" % when.month, "%02d" % when.day,
             "%02d" % when.hour]
        for k in range(depth):
            segs.append("%s%s=%s" % (pfx, names[k],
                                     HIVE_DEFAULT if vals is None else vals[k]))
    return "/".join(segs)


# ---- expectations vs output -------------------------------------------------


def expected_records(inp, prefix=SOURCE_PREFIX, transform=None, skip=()):
    """Counter of (partition folder, record bytes) for every input record."""
    c = collections.Counter()
    for dirpath, _, files in os.walk(os.path.join(inp, prefix)):
        for fn in files:
            path = os.path.join(dirpath, fn)
            if path in skip or fn.startswith("."):
                continue
            with open(path, "rb") as f:
                for raw, obj in frame(f.read()):
                    c[(expected_key(obj, transform), raw)] += 1
    return c


def output_records(sink_root, live=False):
    """Counter of (partition folder, record bytes) in the sink, checking
    object names and that no temp files are left. live: skipprd may still
    be writing, so a temp file is an object in progress and is skipped."""
    c = collections.Counter()
    for dirpath, _, files in os.walk(sink_root):
        rel = os.path.relpath(dirpath, sink_root)
        if rel.split(os.sep)[0] in ("_errors", "_skippr"):
            continue
        for fn in files:
            if live and fn.startswith("."):
                continue
            check(not fn.startswith("."), "temp file left: %s/%s" % (dirpath, fn))
            check(OBJECT_NAME.match(fn), "bad object name %s" % fn)
            with open(os.path.join(dirpath, fn), "rb") as f:
                data = f.read()
            check(data.endswith(b"\n"), "%s does not end with a newline" % fn)
            lines = fn.endswith(".jsonl")
            for raw, _ in frame(data):
                # JSON Lines: no record of a .jsonl object spans lines, and
                # a .json object holds only records that do.
                check((b"\n" in raw) != lines, "%s in %s/%s" % (
                    "a record spanning lines" if lines else
                    "a one-line record", rel, fn))
                c[(rel, raw)] += 1
    return c


def compare(expected, got):
    """Return (lost, duplicated, unexpected) counts; print a sample."""
    lost = expected - got
    extra = got - expected
    dup = sum(min(got[k], expected[k] + 1000) - expected[k]
              for k in got if k in expected and got[k] > expected[k])
    unexpected = sum(v for k, v in extra.items() if k not in expected)
    for k in list(lost)[:3]:
        print("  lost: %s %r" % (k[0], k[1][:120]))
    for k in list(extra)[:3]:
        print("  extra: %s %r" % (k[0], k[1][:120]))
    return sum(lost.values()), dup, unexpected


def assert_exact(ws, transform=None, skip=()):
    exp = expected_records(ws.inp, transform=transform, skip=skip)
    got = output_records(ws.sink_root)
    lost, dup, unexpected = compare(exp, got)
    check((lost, dup, unexpected) == (0, 0, 0),
          "output differs: %d lost, %d duplicated, %d unexpected (of %d)" %
          (lost, dup, unexpected, sum(exp.values())))
    return sum(exp.values())


def dead_letters(sink_root):
    """List of (meta dict, bytes) from every dead-letter object."""
    out = []
    root = os.path.join(sink_root, "_errors")
    if not os.path.isdir(root):
        return out
    for fn in sorted(os.listdir(root)):
        if not fn.endswith(".bad"):
            continue
        with open(os.path.join(root, fn), "rb") as f:
            data = f.read()
        with open(os.path.join(root, fn + ".meta.jsonl")) as f:
            for line in f:
                m = json.loads(line)
                start = m["object_offset"]
                out.append((m, data[start:start + m["length"]]))
    return out


def kill_until_resumed(ws, limit=30):
    """Runs ws's pipeline --once, killed at the Nth source read
    (SKIPPR_CRASH=read:N) for N = 2, 3, ... until a run completes, then
    once more without a kill. Returns how many runs resumed a unit
    part-way ("resuming unit" in the log)."""
    resumed = 0
    for n in range(2, limit):
        env = dict(os.environ, SKIPPR_CRASH="read:%d" % n)
        p = ws.sync("--once", env=env, check_rc=False)
        resumed += "resuming unit" in p.err
        if p.returncode == 0:
            break
    p = ws.sync("--once")
    return resumed + ("resuming unit" in p.err)


class KillClock:
    """Delays for a kill at a random moment of a run: up to the median wall
    time of the last ten runs that ended by themselves, so that most such
    kills land inside a run however fast the machine (a fixed range lets
    most short runs finish first); up to `first` s before any has."""

    def __init__(self, first):
        self.first = first
        self.took = []

    def ended(self, seconds):
        """A run that ended by itself took this long."""
        self.took = (self.took + [seconds])[-10:]

    def delay(self, rng):
        if not self.took:
            return rng.uniform(0.05, self.first)
        typical = sorted(self.took)[len(self.took) // 2]
        return rng.uniform(0.02, max(0.05, typical))

    def kill(self, proc, rng):
        """SIGKILL proc (started with its stderr piped) after a delay(),
        unless it ends first. Returns (stderr, the delay)."""
        t0 = time.monotonic()
        delay = self.delay(rng)
        try:
            _, err = proc.communicate(timeout=delay)
            self.ended(time.monotonic() - t0)
        except subprocess.TimeoutExpired:
            proc.send_signal(signal.SIGKILL)
            _, err = proc.communicate(timeout=60)
        return err, delay


def kill_at_random(ws, kills, low, high, once=False, env=None, seed=11):
    """Start ws's pipeline (`sync`, or `sync --once`) `kills` times, each
    run SIGKILLed after a random delay in [low, high) s unless it ended
    first. Returns how many runs were killed."""
    rng = random.Random(seed)
    killed = 0
    for _ in range(kills):
        p = subprocess.Popen([SKIPPRD, "sync", "--pipeline",
                              "gdpr_compliant_migration", "--config",
                              ws.config] + (["--once"] if once else []),
                             stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL, env=env)
        try:
            p.wait(rng.uniform(low, high))
        except subprocess.TimeoutExpired:
            p.send_signal(signal.SIGKILL)
            p.wait()
            killed += 1
    return killed


def files_snapshot(root):
    snap = {}
    for dirpath, _, files in os.walk(root):
        for fn in files:
            p = os.path.join(dirpath, fn)
            st = os.stat(p)
            snap[p] = (st.st_size, st.st_mtime_ns)
    return snap


def run_seed(default=None):
    """The seed a randomized test uses: `--seed N` on the command line (see
    main), else SKIPPR_SEED, else `default`, else a fresh one. Tests print
    it, so a failure can be run again exactly."""
    if "--seed" in sys.argv:  # read here too: tests may ask before main()
        return int(sys.argv[sys.argv.index("--seed") + 1])
    s = os.environ.get("SKIPPR_SEED")
    if s:
        return int(s)
    return default if default is not None else random.randrange(1 << 30)


def main(tests):
    """Run test functions; print a summary line; exit non-zero on failure.
    Arguments: `--seed N` fixes run_seed(); `-k NAME` runs only the tests
    whose names contain NAME."""
    args = sys.argv[1:]
    if "--seed" in args:
        os.environ["SKIPPR_SEED"] = args[args.index("--seed") + 1]
    if "-k" in args:
        name = args[args.index("-k") + 1]
        tests = [t for t in tests if name in t.__name__]
    failed = skipped = 0
    for t in tests:
        start = time.time()
        try:
            t()
            print("PASS %s (%.1fs)" % (t.__name__, time.time() - start))
        except Skipped as e:
            skipped += 1
            print("SKIP %s: %s" % (t.__name__, e))
        except Exception as e:  # noqa: BLE001 - report every failure kind
            failed += 1
            print("FAIL %s: %s" % (t.__name__, e))
            import traceback
            traceback.print_exc()
    print("%d passed, %d skipped, %d failed" % (
        len(tests) - failed - skipped, skipped, failed))
    sys.exit(1 if failed else 0)
