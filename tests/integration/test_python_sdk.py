#!/usr/bin/env python3
"""The Python config SDK (sdk/python): the seed's snippet runs and writes
the seed's YAML (equal as data), skipprd accepts what it writes, bad
options fail in Python with the valid ones named, `pip install` works
offline into a fresh venv (where PyYAML is absent, so the built-in writer
is used), and Config.run drives skipprd to an exact copy."""
import json
import os
import subprocess
import sys
import textwrap

import yaml

from skippr_test import (SKIPPRD, Skipped, Workspace, assert_exact, check,
                         main, shared_path)

HERE = os.path.dirname(os.path.abspath(__file__))
SDK = os.path.normpath(os.path.join(HERE, "..", "..", "sdk", "python"))

# A config in the builder style with what a YAML reader could misread,
# for the writer checks: in the venv (no PyYAML) and with PyYAML it must
# give the same data.
BUILDER_PY = textwrap.dedent('''\
    from skippr import *
    cfg = Config().workspace("w").storage(LocalStorage(state_dir="${HOME}/s"))
    a = cfg.data_source("a", DataSourceFile(path="/in", prefix="0123"))
    b = cfg.data_sink("b", DataSinkHTTP(url="http://x/y?a=1#f",
                                        header={"X-K": "yes"}))
    cfg.pipeline("p", Pipeline(data_source=a, data_sink=b,
                               buffer_threshold_seconds=60,
                               transform=Transform(batch_time_fields="t",
                                   batch_time_unit=BatchTimeUnit.HOUR)))
    cfg.save("builder.yml")
    ''')


def seed():
    """The seed's snippet (text) and its YAML (data), from ../shared/seed."""
    with open(shared_path("seed", "snippet.py")) as f:
        py = f.read()
    with open(shared_path("seed", "skippr.yml")) as f:
        return py, yaml.safe_load(f)


def run_py(code, cwd, python=sys.executable, path=SDK, env=None):
    e = dict(os.environ, **(env or {}))
    if path:
        e["PYTHONPATH"] = path
    else:
        e.pop("PYTHONPATH", None)
    return subprocess.run([python, "-c", code], cwd=cwd, env=e,
                          capture_output=True, text=True, timeout=120)


def test_seed_snippet_writes_the_seed_yaml():
    ws = Workspace("pysdk-seed")
    try:
        seed_py, seed_yaml = seed()
        p = run_py(seed_py, ws.root)
        check(p.returncode == 0, "the seed snippet failed:\n" + p.stderr)
        with open(os.path.join(ws.root, "skippr.yml")) as f:
            written = f.read()
        check(yaml.safe_load(written) == seed_yaml,
              "the YAML differs from the seed's:\n" + written)
        # skipprd accepts it (S3 options are checked, nothing is fetched).
        v = subprocess.run([SKIPPRD, "validate", "--config", "skippr.yml"],
                           cwd=ws.root, capture_output=True, text=True,
                           timeout=60, env=dict(os.environ,
                                                AWS_ACCESS_KEY_ID="k",
                                                AWS_SECRET_ACCESS_KEY="s",
                                                AWS_REGION="us-east-1"))
        check(v.returncode == 0, "skipprd validate refused it:\n" + v.stderr)
    finally:
        ws.cleanup()


def test_builder_and_keyword_styles_agree():
    """The article's builder and the keyword style write the same data;
    the builder's mistakes are named."""
    ws = Workspace("pysdk-builder")
    try:
        p = run_py(textwrap.dedent('''\
            import yaml
            from skippr import *
            b = Config().workspace("w")
            s = b.data_source("in", DataSourceFile(path="/i"))
            k = b.data_sink("out", DataSinkStdout())
            b.pipeline("p", Pipeline(data_source=s, data_sink=k,
                                     buffer_threshold_seconds=5))
            b.pipeline("q", Pipeline(data_source="data_sources.in",
                                     data_sink="data_sinks.out"))
            c = Config(workspace="w")
            c.add_pipeline(Pipeline(name="p",
                                    source=DataSourceFile(name="in",
                                                          path="/i"),
                                    sink=DataSinkStdout(name="out"),
                                    buffer_threshold_seconds=5))
            c.add_pipeline(Pipeline(name="q", source="data_sources.in",
                                    sink="data_sinks.out"))
            print(b.to_dict() == c.to_dict())
            print(yaml.safe_dump(b.to_dict()))
            '''), ws.root)
        check(p.returncode == 0 and p.stdout.startswith("True"),
              p.stdout + p.stderr)
        cases = [
            ('c = Config(); c.pipeline("p", Pipeline(data_source='
             'DataSourceFile(path="/i"), data_sink=DataSinkStdout())); '
             'c.to_dict()', "a File source has no name: register it with "
             "cfg.data_source(NAME, ...)"),
            ('c = Config(); c.pipeline("p", Pipeline(data_source='
             '"data_sources.x", data_sink=c.data_sink("o", '
             'DataSinkStdout()))); c.to_dict()',
             "pipeline 'p': no source named 'x'"),
            ('Pipeline(data_sink=DataSinkStdout())',
             "a pipeline needs a data_source"),
            ('c = Config(); c.data_source("a", DataSourceFile(path="/i")); '
             'c.data_source("a", DataSourceFile(path="/j"))',
             "a source named 'a' is already defined"),
            ('Config().storage("s3")', "storage: LocalStorage or S3Storage"),
            ('S3Storage(DataSinkFile(path="/o"))',
             "store must be a DataSinkS3"),
            ('S3Storage(DataSinkS3(s3_bucket="b"), lease_seconds=1)',
             "lease_seconds must be 3 to 3600"),
            ('Config().workspace(7)', "workspace must be a non-empty string"),
            ('Config().add_pipeline(Pipeline(data_source="data_sources.a", '
             'data_sink="data_sinks.b"))', "the pipeline has no name"),
        ]
        for code, want in cases:
            p = run_py("from skippr import *\n" + code, ws.root)
            check(p.returncode != 0 and want in p.stderr,
                  "%s: expected %r in:\n%s" % (code, want, p.stderr))
        # The partition column's name reaches the YAML as given.
        p = run_py("from skippr import *\nprint(Transform(batch_partition_"
                   "fields='detail.tenant_id', batch_partition_name='tenant',"
                   " batch_partition_naming='column').to_dict())", ws.root)
        check("'batch_partition_name': 'tenant'" in p.stdout and
              "'batch_partition_naming': 'column'" in p.stdout,
              p.stdout + p.stderr)
    finally:
        ws.cleanup()


def test_bad_options_fail_in_python():
    ws = Workspace("pysdk-bad")
    try:
        cases = [
            ('DataSinkS3(name="x", s3_bucket="b", s3_bukket="y")',
             "S3 sink has no option 's3_bukket'; its options: "
             "access_key_id,"),
            ('DataSourceFile(name="x")', "File source 'x' needs path"),
            ('DataSinkFile(name="x", path="/o", fsync="yes")',
             "File option 'fsync' is true or false, not 'yes'"),
            ('DataSinkS3(name="x", s3_bucket="b", part_size="5T")',
             "S3 option 'part_size' is a whole number (or a size such as "
             "'16MiB'), not '5T'"),
            ('DataSinkHTTP(name="h", url="http://x", header="k")',
             "option 'header' takes a dict"),
            ('Pipeline(name="p", source=DataSourceFile(name="a", path="/i"),'
             ' sink=DataSinkStdout(name="b"), buffer_treshold_seconds=1)',
             "pipelines have no setting 'buffer_treshold_seconds'"),
            ('Config(plugin_dirs=["rel/dir"])',
             "plugin_dirs must be absolute"),
            ('Transform(batch_time_unit="week")',
             "'week' is not a valid BatchTimeUnit"),
            ('Transform(batch_partition_naming="by_path")',
             "batch_partition_naming must be 'column' or 'per_path'"),
            ('Transform(batch_partition_name="a/b")',
             "batch_partition_name must be 1-64 characters without '/'"),
            ('c = Config(); c.add_pipeline(Pipeline(name="p", type="cdc", '
             'source=DataSourceFile(name="a", path="/i"), '
             'sink=DataSinkStdout(name="b"))); c.to_yaml()',
             "skipprd runs only copy pipelines, not cdc"),
        ]
        for code, want in cases:
            p = run_py("from skippr import *\n" + code, ws.root)
            check(p.returncode != 0 and want in p.stderr,
                  "%s: expected %r in:\n%s" % (code, want, p.stderr))
        # The partition column's name reaches the YAML as given.
        p = run_py("from skippr import *\nprint(Transform(batch_partition_"
                   "fields='detail.tenant_id', batch_partition_name='tenant',"
                   " batch_partition_naming='column').to_dict())", ws.root)
        check("'batch_partition_name': 'tenant'" in p.stdout and
              "'batch_partition_naming': 'column'" in p.stdout,
              p.stdout + p.stderr)
        # A map option and an out-of-tree plugin come out as skipprd wants.
        p = run_py(textwrap.dedent('''\
            from skippr import *
            c = Config(plugin_dirs=["/opt/plugins"])
            c.add_pipeline(Pipeline(
                name="p", source=DataSourceHTTPPull(name="a",
                                                    urls="http://x/a"),
                sink=DataSinkHTTP(name="b", url="http://y",
                                  batch_bytes="2MB",
                                  header={"X-Api-Key": "k"})))
            c.add_pipeline(Pipeline(
                name="q", source=DataSourceFile(name="f", path="/in"),
                sink=DataSink("Tar", name="t", path="/out.tar")))
            print(c.to_yaml())'''), ws.root)
        check(p.returncode == 0, p.stderr)
        d = yaml.safe_load(p.stdout)
        check(d["data_sinks"]["b"]["HTTP"]["header.X-Api-Key"] == "k" and
              d["data_sinks"]["b"]["HTTP"]["batch_bytes"] == "2MB" and
              d["data_sinks"]["t"] == {"Tar": {"path": "/out.tar"}} and
              d["skippr"]["plugin_dirs"] == ["/opt/plugins"], p.stdout)
    finally:
        ws.cleanup()


def test_s3_storage():
    """S3Storage writes skipprd_el_storage_mode: s3 with its state_store
    (the store's sink among data_sinks), which skipprd validates."""
    ws = Workspace("pysdk-s3state")
    try:
        p = run_py(textwrap.dedent('''\
            from skippr import *
            import json
            st = DataSinkS3(s3_bucket="state-bucket", s3_prefix="skippr")
            cfg = Config(workspace="w",
                         storage=S3Storage(st, state_dir="/var/lib/skippr",
                                           lease_seconds=20))
            a = cfg.data_source("a", DataSourceFile(path="/in"))
            b = cfg.data_sink("b", DataSinkFile(path="/out"))
            cfg.pipeline("p", Pipeline(data_source=a, data_sink=b))
            cfg.save("s3state.yml")
            d = cfg.to_dict()
            print(json.dumps([d["skippr"], d["data_sinks"]["state"]],
                             sort_keys=True))
            '''), ws.root)
        check(p.returncode == 0, p.stderr)
        top, store = json.loads(p.stdout)
        check(top == {"workspace": "w", "skipprd_el_storage_mode": "s3",
                      "state_store": "data_sinks.state",
                      "state_lease_seconds": 20,
                      "state_dir": "/var/lib/skippr"}, "skippr: %r" % top)
        check(store == {"S3": {"s3_bucket": "state-bucket",
                               "s3_prefix": "skippr"}}, "store: %r" % store)
        v = subprocess.run([SKIPPRD, "validate", "--config", "s3state.yml"],
                           cwd=ws.root, capture_output=True, text=True)
        check(v.returncode == 0, "skipprd validate refused it:\n" + v.stderr)
    finally:
        ws.cleanup()


def test_pip_install_offline_into_a_venv():
    ws = Workspace("pysdk-pip")
    try:
        venv = os.path.join(ws.root, "venv")
        subprocess.run(["/usr/bin/python3", "-m", "venv", venv], check=True,
                       capture_output=True, timeout=300)
        py = os.path.join(venv, "bin", "python")
        p = subprocess.run([py, "-m", "pip", "install", "--no-index",
                            "--no-cache-dir", SDK], capture_output=True,
                           text=True, timeout=300,
                           env=dict(os.environ, PIP_NO_INDEX="1"))
        check(p.returncode == 0, "pip install failed:\n" + p.stdout[-2000:] +
              p.stderr[-2000:])
        # The venv has no PyYAML: the built-in writer must give the same
        # data.
        p = run_py("import yaml", ws.root, python=py, path=None)
        check(p.returncode != 0, "the venv unexpectedly has PyYAML")
        p = run_py(BUILDER_PY, ws.root)
        check(p.returncode == 0, "the builder config failed:\n" + p.stderr)
        with open(os.path.join(ws.root, "builder.yml")) as f:
            with_pyyaml = yaml.safe_load(f)
        p = run_py(BUILDER_PY, ws.root, python=py, path=None)
        check(p.returncode == 0, "the builder config failed in the venv:\n"
              + p.stderr)
        with open(os.path.join(ws.root, "builder.yml")) as f:
            written = f.read()
        check(yaml.safe_load(written) == with_pyyaml,
              "built-in writer's YAML differs:\n" + written)
        # The seed's snippet, as a new user runs it after pip install.
        try:
            seed_py, seed_yaml = seed()
        except Skipped as e:
            print("  (seed snippet in the venv skipped: %s)" % e)
        else:
            p = run_py(seed_py, ws.root, python=py, path=None)
            check(p.returncode == 0, "the seed snippet failed after pip "
                  "install:\n" + p.stderr)
            with open(os.path.join(ws.root, "skippr.yml")) as f:
                check(yaml.safe_load(f) == seed_yaml,
                      "the seed snippet's YAML differs in the venv")
        # Text a YAML reader could misread is quoted by the built-in writer.
        p = run_py(textwrap.dedent('''\
            from skippr._yaml import dump
            print(dump({"a": ["yes", "0123", "1e5", "a: b", "-x", "",
                              "x #y", "naïve", "${HOME}/in", 7, True]}))
            '''), ws.root, python=py, path=None)
        check(p.returncode == 0, p.stderr)
        check(yaml.safe_load(p.stdout) == {"a": [
            "yes", "0123", "1e5", "a: b", "-x", "", "x #y", "naïve",
            "${HOME}/in", 7, True]}, p.stdout)
    finally:
        ws.cleanup()


def test_config_run_copies_with_skipprd():
    ws = Workspace("pysdk-run")
    try:
        ws.generate(objects=8, records=300, seed=41)
        code = textwrap.dedent('''\
            import os, sys
            from skippr import *
            src = DataSourceFile(name="firehose_archive", path=%r,
                                 prefix="ill-just-dump-this-here")
            dst = DataSinkFile(name="tenant_layout", path=%r,
                               prefix="copy/phew-thats-a-month-and-a-gdpr-fine-saved")
            cfg = Config(workspace="test", storage=LocalStorage(state_dir=%r))
            cfg.add_pipeline(Pipeline(
                name="gdpr_compliant_migration", source=src, sink=dst,
                buffer_threshold_seconds=86400,
                transform=Transform(
                    namespace_fields="event_type",
                    batch_partition_fields="detail.tenant_id,truck.tenant_id",
                    batch_time_fields="timestamp",
                    batch_time_unit=BatchTimeUnit.DAY,
                    time_partition_prefix="p_")))
            cfg.save("py.yml")
            p = cfg.run("gdpr_compliant_migration", skipprd=%r)
            print("captured:", "records" in p.stderr)
            print("wrote skippr.yml:", os.path.exists("skippr.yml"))
            cfg.validate("py.yml", skipprd=%r)
            try:
                cfg.run("nope", skipprd=%r)
            except SkipprError as e:
                print("refused:", e)
            # Never saved, and ./skippr.yml holds another config: refused.
            with open("skippr.yml", "w") as f:
                f.write("# the user's own\\n")
            other = Config(workspace="other")
            other.add_pipeline(Pipeline(name="x", source=src, sink=dst))
            try:
                other.run("x", skipprd=%r)
            except SkipprError as e:
                print("kept:", open("skippr.yml").read() == "# the user's own\\n",
                      e)
            ''') % (ws.inp, ws.out, ws.state, SKIPPRD, SKIPPRD, SKIPPRD,
                    SKIPPRD)
        p = run_py(code, ws.root)
        check(p.returncode == 0, "Config.run failed:\n" + p.stderr)
        check("refused: no pipeline named 'nope'" in p.stdout, p.stdout)
        # skipprd's log reached the caller's stderr as it ran, and the
        # returned process holds it too.
        check("done: 8 units copied" in p.stderr and "captured: True" in
              p.stdout, "no summary from skipprd:\n" + p.stderr)
        check("wrote skippr.yml: False" in p.stdout,
              "run() wrote a file it was not given: " + p.stdout)
        check("kept: True ./skippr.yml exists and holds another config"
              in p.stdout, p.stdout)
        assert_exact(ws)
    finally:
        ws.cleanup()


if __name__ == "__main__":
    main([test_seed_snippet_writes_the_seed_yaml,
          test_builder_and_keyword_styles_agree,
          test_bad_options_fail_in_python,
          test_s3_storage,
          test_pip_install_offline_into_a_venv,
          test_config_run_copies_with_skipprd])
