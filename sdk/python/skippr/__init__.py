"""skippr: compose skipprd pipelines in Python and save them as YAML.

    from skippr import Config, DataSourceFile, DataSinkFile, Pipeline

    src = DataSourceFile(name="archive", path="/data/in")
    dst = DataSinkFile(name="layout", path="/data/out")
    cfg = Config(workspace="demo")
    cfg.add_pipeline(Pipeline(name="copy_all", source=src, sink=dst))
    cfg.save("skippr.yml")
    cfg.run("copy_all")             # optional: runs `skipprd sync --once`

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

from . import _options
from ._yaml import dump as _dump_yaml

__all__ = [
    "BatchTimeUnit", "Config", "DataSink", "DataSinkFile", "DataSinkHTTP",
    "DataSinkKafka", "DataSinkMQTT", "DataSinkS3", "DataSinkStdout",
    "DataSource", "DataSourceFile", "DataSourceHTTP", "DataSourceHTTPPull",
    "DataSourceKafka", "DataSourceMQTT", "DataSourceS3", "LocalStorage",
    "Pipeline", "PipelineType", "SkipprError", "Transform",
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
                 time_partition_prefix=None):
        self.namespace_fields = _fields(namespace_fields, "namespace_fields")
        self.batch_partition_fields = _fields(batch_partition_fields,
                                              "batch_partition_fields")
        self.batch_time_fields = _fields(batch_time_fields,
                                         "batch_time_fields")
        self.batch_time_unit = (None if batch_time_unit is None
                                else BatchTimeUnit(batch_time_unit))
        self.time_partition_prefix = time_partition_prefix

    def to_dict(self):
        d = {}
        for k in ("namespace_fields", "batch_partition_fields",
                  "batch_time_fields", "batch_time_unit",
                  "time_partition_prefix"):
            v = getattr(self, k)
            if v is not None:
                d[k] = v.value if isinstance(v, enum.Enum) else v
        return d


_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]*$")


class _Endpoint:
    role = None    # "source" or "sink"
    plugin = None  # the plugin's YAML key, e.g. "S3"

    def __init__(self, name, options):
        if not isinstance(name, str) or not _NAME.match(name):
            raise ValueError("%s name %r: use letters, digits, '_', '-' "
                             "and '.'" % (self.role, name))
        self.name = name
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
            raise TypeError("%s %s %r needs %s" % (
                self.plugin, self.role, self.name, ", ".join(missing)))
        return out

    def to_dict(self):
        return {self.plugin: dict(self.options)}


def _scalar(v):
    if isinstance(v, enum.Enum):
        return v.value
    if isinstance(v, (list, tuple)):
        return ",".join(str(x) for x in v)
    return v


# What skipprd takes for an int option (runtime/optval.c): a whole number,
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

    def __init__(self, plugin, name, **options):
        self.plugin = plugin
        super().__init__(name, options)


class DataSink(_Endpoint):
    """A sink of any plugin: DataSink("Tar", name="x", path="/out.tar")."""
    role = "sink"

    def __init__(self, plugin, name, **options):
        self.plugin = plugin
        super().__init__(name, options)


def _endpoint_class(base, plugin, cls_name, what):
    def __init__(self, name, **options):
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

# Pipeline keys besides type, source, sink and transform, and their kinds.
_PIPELINE_KEYS = {
    "buffer_threshold_seconds": "int", "max_object_bytes": "int",
    "wal_disk_budget": "int", "memory_budget": "int",
    "max_record_bytes": "int", "poll_interval_seconds": "int",
    "commit_interval_ms": "int", "list_batch": "int",
    "upload_concurrency": "int", "wal_zstd_level": "int",
    "validate": "bool", "retry_backoff_ms": "int",
    "max_inflate_ratio": "int",
}


class Pipeline:
    """One pipeline: a source, a sink, a transform and its settings."""

    def __init__(self, name, source, sink, type=PipelineType.COPY,
                 transform=None, **settings):
        if not isinstance(name, str) or not _NAME.match(name):
            raise ValueError("pipeline name %r: use letters, digits, '_', "
                             "'-' and '.'" % (name,))
        if not isinstance(source, DataSource):
            raise TypeError("source must be a DataSource..., not %r" %
                            (source,))
        if not isinstance(sink, DataSink):
            raise TypeError("sink must be a DataSink..., not %r" % (sink,))
        self.name = name
        self.type = PipelineType(type)
        self.source = source
        self.sink = sink
        self.transform = transform
        for k, v in settings.items():
            if k not in _PIPELINE_KEYS:
                raise TypeError("pipelines have no setting %r; they have: "
                                "%s" % (k, ", ".join(sorted(_PIPELINE_KEYS))))
            _typed("pipeline", k, _PIPELINE_KEYS[k], v)
        self.settings = {k: v for k, v in settings.items() if v is not None}

    def to_dict(self):
        d = {"type": self.type.value,
             "data_source": "data_sources." + self.source.name,
             "data_sink": "data_sinks." + self.sink.name}
        d.update(self.settings)
        if self.transform is not None:
            d["transform"] = self.transform.to_dict()
        return d


class LocalStorage:
    """Pipeline state (WAL, ledger, buffers) in a local folder."""
    mode = "local"

    def __init__(self, state_dir=None):
        self.state_dir = state_dir


class Config:
    """A whole skippr.yml: settings, pipelines and their endpoints."""

    def __init__(self, workspace="default", storage=None, plugin_dirs=None,
                 threads=None):
        self.workspace = workspace
        self.storage = storage if storage is not None else LocalStorage()
        if not isinstance(self.storage, LocalStorage):
            raise TypeError("storage: only LocalStorage is supported")
        self.plugin_dirs = list(plugin_dirs or [])
        for d in self.plugin_dirs:
            if not os.path.isabs(d):
                raise ValueError("plugin_dirs must be absolute: %r" % d)
        self.threads = threads
        self.pipelines = []

    def add_pipeline(self, pipeline):
        """Add a pipeline (and its source and sink); returns it."""
        if any(p.name == pipeline.name for p in self.pipelines):
            raise ValueError("pipeline %r is already defined" % pipeline.name)
        for ep in (pipeline.source, pipeline.sink):
            other = self._endpoint(ep.role, ep.name)
            if other is not None and other is not ep and \
                    other.to_dict() != ep.to_dict():
                raise ValueError("two different %ss are named %r" % (
                    ep.role, ep.name))
        self.pipelines.append(pipeline)
        return pipeline

    def _endpoint(self, role, name):
        for p in self.pipelines:
            ep = p.source if role == "source" else p.sink
            if ep.name == name:
                return ep
        return None

    def to_dict(self):
        """The config as plain data, in skippr.yml's shape."""
        for p in self.pipelines:
            if p.type is not PipelineType.COPY:
                raise SkipprError("pipeline %r: skipprd runs only copy "
                                  "pipelines, not %s" % (p.name,
                                                         p.type.value))
        top = {"workspace": self.workspace,
               "skipprd_el_storage_mode": self.storage.mode}
        if self.storage.state_dir is not None:
            top["state_dir"] = self.storage.state_dir
        if self.plugin_dirs:
            top["plugin_dirs"] = list(self.plugin_dirs)
        if self.threads is not None:
            top["threads"] = self.threads
        d = {"skippr": top, "pipelines": {}}
        sources, sinks = {}, {}
        for p in self.pipelines:
            d["pipelines"][p.name] = p.to_dict()
            sources[p.source.name] = p.source.to_dict()
            sinks[p.sink.name] = p.sink.to_dict()
        d["data_sources"] = sources
        d["data_sinks"] = sinks
        return d

    def to_yaml(self):
        return _dump_yaml(self.to_dict())

    def save(self, path):
        """Write the config to path (atomically: a temp file, then rename).
        Returns path."""
        text = self.to_yaml()
        tmp = "%s.tmp-%d" % (path, os.getpid())
        with open(tmp, "w") as f:
            f.write(text)
        os.replace(tmp, path)
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

    def run(self, pipeline, path="skippr.yml", once=True, skipprd=None,
            threads=None, timeout=None):
        """Save the config to path and run `skipprd sync` on one pipeline
        (drain and exit with once=True). Returns the CompletedProcess;
        raises SkipprError when skipprd fails."""
        name = pipeline.name if isinstance(pipeline, Pipeline) else pipeline
        if not any(p.name == name for p in self.pipelines):
            raise SkipprError("no pipeline named %r" % (name,))
        self.save(path)
        args = ["sync", "--pipeline", name, "--no-progress"]
        if once:
            args.append("--once")
        if threads:
            args += ["--threads", str(threads)]
        return self._call(args, path, skipprd, True, timeout=timeout)
