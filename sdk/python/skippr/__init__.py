"""skippr: compose skipprd pipelines in Python and save them as YAML.

The builder style, as the product's article writes it:

    from skippr import (BatchTimeUnit, Config, DataSinkS3, DataSourceS3,
                        LocalStorage, Pipeline, PipelineType, Transform)

    cfg = Config().workspace("copy-demo").storage(LocalStorage())
    src = cfg.data_source("sample", DataSourceS3(s3_bucket="in"))
    dst = cfg.data_sink("landing", DataSinkS3(s3_bucket="out",
                                                format="jsonl"))
    cfg.pipeline("copy_all", Pipeline(
        data_source=src, data_sink=dst, type=PipelineType.COPY,
        transform=Transform(batch_time_fields="time",
                            batch_time_unit=BatchTimeUnit.DAY)))
    cfg.save("skippr.yml")
    cfg.run("copy_all")             # optional: `skipprd sync --once` on
                                    # skippr.yml, its log streamed

The keyword style works too: endpoints and pipelines named where they are
made (`DataSourceFile(name="a", path=...)`, `Pipeline(name="p",
source=..., sink=...)`) and added with `cfg.add_pipeline(...)`.

Every source and sink checks its options against the plugin's option table
(generated from skipprd itself), so a misspelt option fails here, with the
list of valid ones, not later in skipprd. Pure Python; PyYAML (Debian's
python3-yaml) is used when present, else a small built-in writer.
"""
import enum
import os
import re
import shutil
import subprocess
import sys
import threading

from . import _options
from ._yaml import dump as _dump_yaml

__all__ = [
    "BatchTimeUnit", "Config", "DataSink", "DataSinkFile", "DataSinkHTTP",
    "DataSinkKafka", "DataSinkMQTT", "DataSinkS3", "DataSinkStdout",
    "DataSource", "DataSourceFile", "DataSourceHTTP", "DataSourceHTTPPull",
    "DataSourceKafka", "DataSourceMQTT", "DataSourceS3", "LocalStorage",
    "Pipeline", "PipelineType", "S3Storage", "SkipprError", "Transform",
]
__version__ = _options.SKIPPRD_VERSION


class SkipprError(Exception):
    """skipprd refused a config or a run failed; the message is its own."""


class PipelineType(str, enum.Enum):
    """A pipeline's `type`. skipprd runs COPY; the others are refused."""
    COPY = "copy"
    INGEST = "ingest"
    CDC = "cdc"


class BatchTimeUnit(str, enum.Enum):
    """How finely `batch_time_fields` split the output folders."""
    HOUR = "hour"
    DAY = "day"
    MONTH = "month"
    YEAR = "year"


def _fields(value, what):
    """A field list: "a,b", ["a", "b"] or ("a", "b") -> "a,b"."""
    if value is None:
        return None
    if isinstance(value, str):
        items = [v.strip() for v in value.split(",")]
    else:
        items = [str(v).strip() for v in value]
    if not items or any(not v for v in items):
        raise ValueError("%s: empty field name in %r" % (what, value))
    return ",".join(items)


class Transform:
    """The `transform:` of a pipeline: how records are routed to keys."""

    def __init__(self, namespace_fields=None, batch_partition_fields=None,
                 batch_time_fields=None, batch_time_unit=None,
                 time_partition_prefix=None, batch_partition_name=None,
                 batch_partition_naming=None):
        self.namespace_fields = _fields(namespace_fields, "namespace_fields")
        self.batch_partition_fields = _fields(batch_partition_fields,
                                              "batch_partition_fields")
        # The partition column's folder name (default: the last segment
        # of the first path, detail.tenant_id -> p_tenant_id=), and
        # "per_path" naming for states written by skippr 0.1.
        if batch_partition_name is not None and (
                not isinstance(batch_partition_name, str) or
                not 0 < len(batch_partition_name) <= 64 or
                "/" in batch_partition_name):
            raise ValueError("batch_partition_name must be 1-64 characters "
                             "without '/', not %r" % (batch_partition_name,))
        if batch_partition_naming not in (None, "column", "per_path"):
            raise ValueError("batch_partition_naming must be 'column' or "
                             "'per_path', not %r" % (batch_partition_naming,))
        self.batch_partition_name = batch_partition_name
        self.batch_partition_naming = batch_partition_naming
        self.batch_time_fields = _fields(batch_time_fields,
                                         "batch_time_fields")
        self.batch_time_unit = (None if batch_time_unit is None
                                else BatchTimeUnit(batch_time_unit))
        self.time_partition_prefix = time_partition_prefix

    def to_dict(self):
        d = {}
        for k in ("namespace_fields", "batch_partition_fields",
                  "batch_partition_name", "batch_partition_naming",
                  "batch_time_fields", "batch_time_unit",
                  "time_partition_prefix"):
            v = getattr(self, k)
            if v is not None:
                d[k] = v.value if isinstance(v, enum.Enum) else v
        return d


_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]*$")


def _check_name(what, name):
    if not isinstance(name, str) or not _NAME.match(name):
        raise ValueError("%s name %r: use letters, digits, '_', '-' "
                         "and '.'" % (what, name))
    return name


class _Endpoint:
    role = None    # "source" or "sink"
    plugin = None  # the plugin's YAML key, e.g. "S3"

    def __init__(self, name, options):
        # name may wait for Config.data_source()/data_sink() to give it.
        self.name = None if name is None else _check_name(self.role, name)
        self.options = self._check(options)

    def _table(self):
        own = _options.PLUGINS.get(self.plugin, {}).get(self.role)
        return None if own is None else own + _options.COMMON[self.role]

    def _check(self, options):
        """Options as skipprd's YAML takes them. A plugin this SDK does not
        know (table None) gets them unchecked, a dict as a map option."""
        table = self._table()
        by_name = {o[0]: o for o in table or ()}
        prefixes = {o[0][:-1]: o for o in table or () if o[1] == "map"}
        out = {}
        for k, v in options.items():
            if v is None:
                continue
            if k in prefixes or (table is None and isinstance(v, dict)):
                if not isinstance(v, dict):
                    raise TypeError("%s %s option %r takes a dict (it "
                                    "becomes %s.KEY: VALUE)" % (
                                        self.plugin, self.role, k, k))
                for sub, sv in v.items():
                    out["%s.%s" % (k, sub)] = _scalar(sv)
                continue
            if table is None:
                out[k] = _scalar(v)
                continue
            opt = by_name.get(k)
            if opt is None:
                valid = sorted(by_name) + sorted(p + "={...}"
                                                 for p in prefixes)
                raise TypeError("%s %s has no option %r; its options: %s" % (
                    self.plugin, self.role, k, ", ".join(valid)))
            out[k] = _typed(self.plugin, k, opt[1], v)
        missing = [o[0] for o in table or () if o[3] and o[0] not in out]
        if missing:
            label = "" if self.name is None else " %r" % self.name
            raise TypeError("%s %s%s needs %s" % (
                self.plugin, self.role, label, ", ".join(missing)))
        return out

    def to_dict(self):
        return {self.plugin: dict(self.options)}


def _scalar(v):
    if isinstance(v, enum.Enum):
        return v.value
    if isinstance(v, (list, tuple)):
        return ",".join(str(x) for x in v)
    return v


# What skipprd takes for an int option (runtime/base/optval.c): a whole number,
# or a size with one of its suffixes.
_INT = re.compile(r"\s*([-+]?\d+|\+?\d+ *(k|K|KB|KiB|M|MB|MiB|G|GB|GiB|TiB))")


def _typed(plugin, key, kind, v):
    v = _scalar(v)
    if kind == "bool":
        if not isinstance(v, bool):
            raise TypeError("%s option %r is true or false, not %r" % (
                plugin, key, v))
    elif kind == "int":
        if isinstance(v, bool) or not (
                isinstance(v, int) or (isinstance(v, str) and
                                       _INT.fullmatch(v))):
            raise TypeError("%s option %r is a whole number (or a size "
                            "such as '16MiB'), not %r" % (plugin, key, v))
    elif not isinstance(v, (str, int, float)) or isinstance(v, bool):
        raise TypeError("%s option %r is text, not %r" % (plugin, key, v))
    return v


class DataSource(_Endpoint):
    """A source of any plugin, e.g. one built out of tree:
    DataSource("MyPlugin", name="x", option=value)."""
    role = "source"

    def __init__(self, plugin, name=None, **options):
        self.plugin = plugin
        super().__init__(name, options)


class DataSink(_Endpoint):
    """A sink of any plugin: DataSink("Tar", name="x", path="/out.tar")."""
    role = "sink"

    def __init__(self, plugin, name=None, **options):
        self.plugin = plugin
        super().__init__(name, options)


def _endpoint_class(base, plugin, cls_name, what):
    def __init__(self, name=None, **options):
        base.__init__(self, plugin, name, **options)
    table = (_options.PLUGINS.get(plugin, {}).get(base.role, []) +
             _options.COMMON[base.role])
    doc = "%s (plugin %s). Options:\n%s" % (what, plugin, "\n".join(
        "  %s (%s%s): %s" % (o[0].rstrip(".") + ("={...}" if o[1] == "map"
                                                  else ""),
                             o[1], ", required" if o[3] else
                             (", default %s" % o[2] if o[2] is not None
                              else ""), o[4]) for o in table))
    return type(cls_name, (base,), {"__init__": __init__, "__doc__": doc})


DataSourceS3 = _endpoint_class(DataSource, "S3", "DataSourceS3",
                               "Objects in an S3 bucket")
DataSinkS3 = _endpoint_class(DataSink, "S3", "DataSinkS3",
                             "Objects written to an S3 bucket")
DataSourceFile = _endpoint_class(DataSource, "File", "DataSourceFile",
                                 "Files in a local folder")
DataSinkFile = _endpoint_class(DataSink, "File", "DataSinkFile",
                               "Files written to a local folder")
DataSourceKafka = _endpoint_class(DataSource, "Kafka", "DataSourceKafka",
                                  "Kafka topics")
DataSinkKafka = _endpoint_class(DataSink, "Kafka", "DataSinkKafka",
                                "A Kafka topic, in transactions")
DataSourceMQTT = _endpoint_class(DataSource, "MQTT", "DataSourceMQTT",
                                 "MQTT subscriptions")
DataSinkMQTT = _endpoint_class(DataSink, "MQTT", "DataSinkMQTT",
                               "MQTT publications")
DataSourceHTTP = _endpoint_class(DataSource, "HTTP", "DataSourceHTTP",
                                 "HTTP bodies pushed to skipprd")
DataSinkHTTP = _endpoint_class(DataSink, "HTTP", "DataSinkHTTP",
                               "HTTP POSTs to an endpoint")
DataSourceHTTPPull = _endpoint_class(DataSource, "HTTPPull",
                                     "DataSourceHTTPPull",
                                     "HTTP URLs fetched by skipprd")
DataSinkStdout = _endpoint_class(DataSink, "Stdout", "DataSinkStdout",
                                 "Standard output")

# Pipeline keys besides type, source, sink and transform, and their kinds:
# the engine's table (runtime/config/options.c), through _options.py.
_PIPELINE_KEYS = _options.PIPELINE_SETTINGS


class Pipeline:
    """One pipeline: a source, a sink, a transform and its settings.

    Pipeline(data_source=src, data_sink=dst, ...) takes the references
    Config.data_source()/data_sink() return (or their names, as
    "data_sources.NAME"), and gets its name from Config.pipeline(name, p).
    Pipeline(name=..., source=..., sink=...) is the keyword style, for
    Config.add_pipeline(p)."""

    def __init__(self, name=None, source=None, sink=None,
                 type=PipelineType.COPY, transform=None, data_source=None,
                 data_sink=None, **settings):
        self.name = None if name is None else _check_name("pipeline", name)
        self.source = _one_of("source", source, "data_source", data_source,
                              DataSource, "data_sources.")
        self.sink = _one_of("sink", sink, "data_sink", data_sink, DataSink,
                            "data_sinks.")
        self.type = PipelineType(type)
        if transform is not None and not isinstance(transform, Transform):
            raise TypeError("transform must be a Transform, not %r" %
                            (transform,))
        self.transform = transform
        for k, v in settings.items():
            if k not in _PIPELINE_KEYS:
                raise TypeError("pipelines have no setting %r; they have: "
                                "%s" % (k, ", ".join(sorted(_PIPELINE_KEYS))))
            _typed("pipeline", k, _PIPELINE_KEYS[k], v)
        self.settings = {k: v for k, v in settings.items() if v is not None}

    def to_dict(self):
        d = {"type": self.type.value,
             "data_source": "data_sources." + _ref_name(self.source),
             "data_sink": "data_sinks." + _ref_name(self.sink)}
        d.update(self.settings)
        if self.transform is not None:
            d["transform"] = self.transform.to_dict()
        return d


def _one_of(kw, a, data_kw, b, cls, ref_prefix):
    """The endpoint given as `kw` or as `data_kw` (not both): an instance
    of cls, or a reference string "data_sources.NAME"."""
    if a is not None and b is not None:
        raise TypeError("give %s or %s, not both" % (kw, data_kw))
    v = a if a is not None else b
    if v is None:
        raise TypeError("a pipeline needs a %s" % data_kw)
    if isinstance(v, str):
        if not v.startswith(ref_prefix):
            raise ValueError("%s %r: a reference reads %sNAME" % (
                data_kw, v, ref_prefix))
        _check_name(cls.role, v[len(ref_prefix):])
        return v
    if not isinstance(v, cls):
        raise TypeError("%s must be a %s..., not %r" % (data_kw,
                                                       cls.__name__, v))
    return v


def _ref_name(ep):
    """An endpoint's name; a reference string's NAME."""
    if isinstance(ep, str):
        return ep.split(".", 1)[1]
    if ep.name is None:
        raise SkipprError("a %s %s has no name: register it with "
                          "cfg.data_%s(NAME, ...) or give name=" % (
                              ep.plugin, ep.role, ep.role))
    return ep.name


class LocalStorage:
    """Pipeline state (WAL, ledger, buffers) in a local folder."""
    mode = "local"

    def __init__(self, state_dir=None):
        self.state_dir = state_dir


class S3Storage:
    """Pipeline state in a bucket (skipprd_el_storage_mode: s3), with the
    state folder as a working copy: store is a DataSinkS3 whose bucket and
    prefix hold it (named "state" unless it has a name already);
    lease_seconds is state_lease_seconds."""
    mode = "s3"

    def __init__(self, store, state_dir=None, lease_seconds=None):
        if not isinstance(store, DataSink) or store.plugin != "S3":
            raise TypeError("S3Storage(store): store must be a DataSinkS3, "
                            "not %r" % (store,))
        if lease_seconds is not None and (
                not isinstance(lease_seconds, int) or
                not 3 <= lease_seconds <= 3600):
            raise ValueError("lease_seconds must be 3 to 3600, not %r" %
                             (lease_seconds,))
        self.store = store
        self.state_dir = state_dir
        self.lease_seconds = lease_seconds


class Config:
    """A whole skippr.yml: settings, pipelines and their endpoints.

    Config(workspace=..., storage=...) or, as a builder,
    Config().workspace(...).storage(...)."""

    def __init__(self, workspace="default", storage=None, plugin_dirs=None,
                 threads=None):
        self._workspace = None
        self._storage = None
        self._saved = None  # the path save() last wrote
        self._endpoints = {"source": {}, "sink": {}}
        self.workspace(workspace)
        self.storage(storage if storage is not None else LocalStorage())
        self.plugin_dirs = ([plugin_dirs] if isinstance(plugin_dirs, str)
                            else list(plugin_dirs or []))
        for d in self.plugin_dirs:
            if not os.path.isabs(d):
                raise ValueError("plugin_dirs must be absolute: %r" % d)
        self.threads = threads
        self.pipelines = []

    def workspace(self, name):
        """Set the workspace name; returns the config."""
        if not isinstance(name, str) or not name:
            raise ValueError("workspace must be a non-empty string, not %r"
                             % (name,))
        self._workspace = name
        return self

    def storage(self, storage):
        """Set where pipeline state lives; returns the config."""
        if not isinstance(storage, (LocalStorage, S3Storage)):
            raise TypeError("storage: LocalStorage or S3Storage, not %r" %
                            (storage,))
        if isinstance(storage, S3Storage):
            self.data_sink(storage.store.name or "state", storage.store)
        self._storage = storage
        return self

    def data_source(self, name, source):
        """Register a source under name; returns it, for Pipeline()."""
        return self._register("source", name, source, DataSource)

    def data_sink(self, name, sink):
        """Register a sink under name; returns it, for Pipeline()."""
        return self._register("sink", name, sink, DataSink)

    def _register(self, role, name, ep, cls):
        _check_name(role, name)
        if not isinstance(ep, cls):
            raise TypeError("data_%s(%r, ...) takes a %s..., not %r" % (
                role, name, cls.__name__, ep))
        if ep.name is not None and ep.name != name:
            raise ValueError("this %s is already named %r" % (role, ep.name))
        have = self._endpoints[role].get(name)
        if have is not None and have is not ep:
            raise ValueError("a %s named %r is already defined" % (role,
                                                                  name))
        ep.name = name
        self._endpoints[role][name] = ep
        return ep

    def pipeline(self, name, pipeline):
        """Add pipeline under name; returns it."""
        if not isinstance(pipeline, Pipeline):
            raise TypeError("pipeline(%r, ...) takes a Pipeline, not %r" % (
                name, pipeline))
        _check_name("pipeline", name)
        if pipeline.name is not None and pipeline.name != name:
            raise ValueError("this pipeline is already named %r" %
                             pipeline.name)
        pipeline.name = name
        return self.add_pipeline(pipeline)

    def add_pipeline(self, pipeline):
        """Add a named pipeline (and its source and sink); returns it."""
        if pipeline.name is None:
            raise ValueError("the pipeline has no name: use "
                             "cfg.pipeline(NAME, p) or Pipeline(name=...)")
        if any(p.name == pipeline.name for p in self.pipelines):
            raise ValueError("pipeline %r is already defined" % pipeline.name)
        for ep in (pipeline.source, pipeline.sink):
            if isinstance(ep, str):
                continue
            role = ep.role
            name = _ref_name(ep)
            other = self._endpoint(role, name)
            if other is not None and other is not ep and \
                    other.to_dict() != ep.to_dict():
                raise ValueError("two different %ss are named %r" % (
                    role, name))
        self.pipelines.append(pipeline)
        return pipeline

    def _endpoint(self, role, name):
        if name in self._endpoints[role]:
            return self._endpoints[role][name]
        for p in self.pipelines:
            ep = p.source if role == "source" else p.sink
            if not isinstance(ep, str) and ep.name == name:
                return ep
        return None

    def to_dict(self):
        """The config as plain data, in skippr.yml's shape."""
        for p in self.pipelines:
            if p.type is not PipelineType.COPY:
                raise SkipprError("pipeline %r: skipprd runs only copy "
                                  "pipelines, not %s" % (p.name,
                                                         p.type.value))
        top = {"workspace": self._workspace,
               "skipprd_el_storage_mode": self._storage.mode}
        if isinstance(self._storage, S3Storage):
            top["state_store"] = "data_sinks." + self._storage.store.name
            if self._storage.lease_seconds is not None:
                top["state_lease_seconds"] = self._storage.lease_seconds
        if self._storage.state_dir is not None:
            top["state_dir"] = self._storage.state_dir
        if self.plugin_dirs:
            top["plugin_dirs"] = list(self.plugin_dirs)
        if self.threads is not None:
            top["threads"] = self.threads
        d = {"skippr": top, "pipelines": {}}
        found = {"source": dict(self._endpoints["source"]),
                 "sink": dict(self._endpoints["sink"])}
        for p in self.pipelines:
            d["pipelines"][p.name] = p.to_dict()
            for ep in (p.source, p.sink):
                role = "source" if ep is p.source else "sink"
                name = _ref_name(ep)
                if isinstance(ep, str):
                    if self._endpoint(role, name) is None:
                        raise SkipprError("pipeline %r: no %s named %r" % (
                            p.name, role, name))
                    continue
                found[role].setdefault(name, ep)
        d["data_sources"] = {n: e.to_dict()
                             for n, e in found["source"].items()}
        d["data_sinks"] = {n: e.to_dict() for n, e in found["sink"].items()}
        return d

    def to_yaml(self):
        return _dump_yaml(self.to_dict())

    def save(self, path):
        """Write the config to path (atomically: a temp file, then rename).
        Returns path; run() then uses it."""
        text = self.to_yaml()
        tmp = "%s.tmp-%d" % (path, os.getpid())
        with open(tmp, "w") as f:
            f.write(text)
        os.replace(tmp, path)
        self._saved = path
        return path

    # Running skipprd -------------------------------------------------------

    @staticmethod
    def _skipprd(skipprd):
        exe = skipprd or os.environ.get("SKIPPRD") or shutil.which("skipprd")
        if not exe:
            raise SkipprError("skipprd not found: install it, put it on "
                              "PATH, or pass skipprd=PATH")
        return exe

    def _call(self, args, path, skipprd, check, **kw):
        if path is None:
            raise SkipprError("save the config first, or pass path=")
        p = subprocess.run([self._skipprd(skipprd)] + args +
                           ["--config", path], capture_output=True,
                           text=True, **kw)
        if check and p.returncode != 0:
            raise SkipprError(p.stderr.strip() or "skipprd exited %d" %
                              p.returncode)
        return p

    def validate(self, path, skipprd=None):
        """Ask skipprd whether it accepts the config saved at path: returns
        None, or raises SkipprError with skipprd's message."""
        self._call(["validate"], path, skipprd, True)

    def _run_path(self, path):
        """Where run() saves the config: the path given, else the one last
        saved to, else ./skippr.yml when it is absent or holds this very
        config. A file the user did not name is never overwritten: its
        folder is where the state lives, so a config in the wrong place
        would start a second copy."""
        if path is not None:
            return path
        if self._saved:
            return self._saved
        path = "skippr.yml"
        if os.path.exists(path):
            with open(path) as f:
                if f.read() != self.to_yaml():
                    raise SkipprError(
                        "./skippr.yml exists and holds another config; "
                        "save this one where it belongs (cfg.save(PATH)) "
                        "or pass path=")
        return path

    def run(self, pipeline, path=None, once=True, skipprd=None,
            threads=None, timeout=None):
        """Save the config (to path; by default where save() last wrote
        it, see _run_path) and run `skipprd sync` on one pipeline (drain
        and exit with once=True). skipprd's log (its progress and summary)
        streams to sys.stderr as it comes. Returns the CompletedProcess
        (stderr holds the log too); raises SkipprError when skipprd
        fails."""
        name = pipeline.name if isinstance(pipeline, Pipeline) else pipeline
        if not any(p.name == name for p in self.pipelines):
            raise SkipprError("no pipeline named %r" % (name,))
        path = self.save(self._run_path(path))
        args = [self._skipprd(skipprd), "sync", "--pipeline", name,
                "--no-progress", "--config", path]
        if once:
            args.append("--once")
        if threads:
            args += ["--threads", str(threads)]
        proc = subprocess.Popen(args, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)
        timer = threading.Timer(timeout, proc.kill) if timeout else None
        if timer:
            timer.start()
        out = []
        reader = threading.Thread(target=lambda: out.append(
            proc.stdout.read()))
        reader.start()
        err = []
        try:
            for line in proc.stderr:
                err.append(line)
                sys.stderr.write(line)
                sys.stderr.flush()
            proc.wait()
        finally:
            if timer:
                timer.cancel()
            reader.join()
        p = subprocess.CompletedProcess(args, proc.returncode,
                                        "".join(out), "".join(err))
        if p.returncode != 0:
            raise SkipprError(p.stderr.strip() or "skipprd exited %d" %
                              p.returncode)
        return p
