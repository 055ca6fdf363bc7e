#!/usr/bin/env python3
"""The command line: help, version, validate with file:line:col errors,
refused pipeline types, plugin discovery and its safety rules."""
import os
import subprocess

from skippr_test import SOURCE_DIR, Workspace, check, main, run

BASE = """skippr:
  workspace: w
  skipprd_el_storage_mode: local
pipelines:
  p:
    type: copy
    data_source: data_sources.s
    data_sink: data_sinks.d
data_sources:
  s:
    File:
      path: /tmp
data_sinks:
  d:
    File:
      path: /tmp/x
"""


def write(ws, text):
    with open(ws.config, "w") as f:
        f.write(text)
    return ws.config


def test_help_and_version():
    p = run(["--version"])
    check(p.out.startswith("skipprd 0.") and "plugin ABI 2" in p.out, p.out)
    p = run(["--help"])
    for word in ("sync --pipeline NAME", "validate", "status", "plugins",
                 "--once"):
        check(word in p.out, "help lacks %s" % word)
    p = run(["frobnicate"], check_rc=False)
    check(p.returncode == 2 and "unknown command" in p.err, p.err)
    p = run(["sync", "--config", "/nonexistent.yml", "-p", "x"],
            check_rc=False)
    check(p.returncode == 1 and "/nonexistent.yml: cannot open" in p.err,
          p.err)


def test_validate_errors_have_positions():
    ws = Workspace("cli")
    try:
        cases = [
            (BASE.replace("      path: /tmp\n", "      path: /tmp\n      pth: x\n", 1),
             ":13:7:", "unknown option 'pth' for File source"),
            (BASE.replace("type: copy", "type: ingest"), ":6:11:",
             "'ingest' is not supported"),
            (BASE.replace("    File:\n      path: /tmp\n",
                          "    Nope:\n      path: /tmp\n", 1),
             ":11:5:", "no source plugin named 'Nope'"),
            (BASE.replace("      path: /tmp/x\n", "      fsync: maybe\n"
                          "      path: /tmp/x\n"), ":16:14:",
             "wants true or false"),
            (BASE.replace("      path: /tmp/x\n", ""), ":15:5:",
             "needs option 'path'"),
            (BASE.replace("      path: /tmp/x\n", "      path: /tmp/x\n"
                          "      format: parquet\n"), ":17:15:",
             "format 'parquet' is not supported"),
            (BASE + "  extra: [\n", ":", "did not find expected"),
        ]
        for text, pos, words in cases:
            p = run(["validate", "--config", write(ws, text)], check_rc=False)
            check(p.returncode == 1, "accepted: %s" % words)
            check(ws.config + pos in p.err and words in p.err,
                  "want %s%s ... %s, got: %s" % (ws.config, pos, words, p.err))
        p = run(["validate", "--config", write(ws, BASE)])
        check("pipeline p: ok (File -> File)" in p.out, p.out)
        # The state's store (skipprd_el_storage_mode: s3) is checked as
        # sync would: a plugin that can hold state, with options it takes.
        s3 = BASE.replace("local\n", "s3\n  state_store: data_sinks.%s\n"
                          ) + "  st:\n    S3:\n      s3_bucket: b\n      %s\n"
        for store, opt, pos, words in (
                ("d", "region: x", ":16:5:",
                 "state_store: the File plugin cannot hold state"),
                ("st", "regon: x", ":21:7:",
                 "unknown option 'regon' for S3 sink (data_sinks.st)")):
            p = run(["validate", "--config", write(ws, s3 % (store, opt))],
                    check_rc=False)
            check(p.returncode == 1 and ws.config + pos in p.err and
                  words in p.err, "state store: want %s%s ... %s, got: %s" %
                  (ws.config, pos, words, p.err))
        p = run(["validate", "--config", write(ws, s3 % ("st", "region: x"))])
        check("pipeline p: ok (File -> File)" in p.out, p.out)
        os.environ["SKIPPR_T_DIR"] = "/tmp/from-env"
        p = run(["validate", "--config",
                 write(ws, BASE.replace("/tmp/x", "${SKIPPR_T_DIR}"))])
        check("ok" in p.out, p.out)
    finally:
        ws.cleanup()


def test_plugins_listing_and_dirs():
    ws = Workspace("plugins")
    try:
        p = run(["plugins", "--config", "/nonexistent"])
        check("File " in p.out and "(source, sink)" in p.out and
              "Stdout " in p.out, p.out)
        check("path" in p.out and "(required)" in p.out, p.out)
        # Each plugin lists only the options that mean something for it:
        # CSV and XML settings for sources that can give CSV or XML.
        import json
        listed = json.loads(run(["plugins", "--json", "--config",
                                 "/nonexistent"]).out)
        names = {(pl["name"], role): {o["name"] for o in pl[role]}
                 for pl in listed["plugins"] for role in ("source", "sink")
                 if role in pl}
        check("csv_columns" in names[("File", "source")] and
              "csv_columns" in names[("HTTP", "source")] and
              not {"csv_columns", "csv_delimiter", "xml_record_element"} &
              (names[("Kafka", "source")] | names[("MQTT", "source")]) and
              not any("compression" in v for v in names.values()),
              "options listed: %s" % names)
        # A relative plugin folder is refused, never searched.
        text = BASE.replace("  skipprd_el_storage_mode: local\n",
                            "  skipprd_el_storage_mode: local\n"
                            "  plugin_dirs: [plugins]\n")
        p = run(["validate", "--config", write(ws, text)], check_rc=False)
        check(p.returncode == 1 and "must be absolute" in p.err, p.err)
        # A broken .so in a configured folder is reported, not loaded.
        bad = os.path.join(ws.root, "plugs")
        os.makedirs(bad)
        with open(os.path.join(bad, "broken.so"), "wb") as f:
            f.write(b"not an ELF file")
        text = BASE.replace("  skipprd_el_storage_mode: local\n",
                            "  skipprd_el_storage_mode: local\n"
                            "  plugin_dirs: [%s]\n" % bad)
        p = run(["plugins", "--config", write(ws, text)])
        check("cannot load %s/broken.so" % bad in p.err, p.err)
        # One folder, not in a list, is taken as well.
        one = BASE.replace("  skipprd_el_storage_mode: local\n",
                           "  skipprd_el_storage_mode: local\n"
                           "  plugin_dirs: %s\n" % bad)
        p = run(["plugins", "--config", write(ws, one)])
        check("cannot load %s/broken.so" % bad in p.err, p.err)
        # A plugin built for another ABI version is refused, saying so.
        src = os.path.join(ws.root, "old.c")
        with open(src, "w") as f:
            f.write("#include <skippr/plugin.h>\n"
                    "static const skippr_plugin d = {99, sizeof(skippr_plugin),"
                    " \"Old\", 0, 0, 0, 0};\n"
                    "SKIPPR_PLUGIN_DEFINE(d)\n")
        subprocess.run(["cc", "-shared", "-fPIC", "-o",
                        os.path.join(bad, "old.so"), src, "-I",
                        os.path.join(SOURCE_DIR, "include")], check=True)
        p = run(["plugins", "--config", write(ws, text)])
        check("built for plugin ABI version 99, this skipprd speaks version 2"
              in p.err and "Old" not in p.out, p.err)
        # The working directory is never searched.
        cwd = os.path.join(ws.root, "cwd")
        os.makedirs(cwd)
        with open(os.path.join(cwd, "skippr_evil.so"), "wb") as f:
            f.write(b"x")
        p = run(["plugins", "--config", "/nonexistent"], cwd=cwd)
        check("evil" not in p.out + p.err, p.out + p.err)
    finally:
        ws.cleanup()


def test_stdout_sink():
    ws = Workspace("stdout")
    try:
        folder = os.path.join(ws.inp, "d")
        os.makedirs(folder)
        with open(os.path.join(folder, "f"), "w") as f:
            f.write('{"event_type":"a","n":1}\n{"event_type":"b","n":2}\n')
        text = BASE.replace("path: /tmp\n", "path: %s\n" % ws.inp, 1) \
                   .replace("    File:\n      path: /tmp/x\n",
                            "    Stdout:\n      header: true\n")
        text = text.replace("  workspace: w\n", "  workspace: w\n  state_dir: %s\n"
                            % ws.state)
        p = run(["sync", "-p", "p", "--once", "--config", write(ws, text)])
        check('{"event_type":"a","n":1}\n' in p.out and
              '{"event_type":"b","n":2}\n' in p.out and "# a/apply-" in p.out,
              p.out)
    finally:
        ws.cleanup()


def test_json_logs():
    """--log-format json: every stderr line is a JSON object with time,
    level and msg; a plugin's line names its instance in source; the
    summary line is there, its figures as fields; a config error is a
    JSON line too; a bad format is a usage error."""
    import json
    ws = Workspace("jsonlog")
    try:
        folder = os.path.join(ws.inp, "d")
        os.makedirs(folder)
        with open(os.path.join(folder, "f"), "w") as f:
            f.write('{"event_type":"a","n":1}\n')
        text = BASE.replace("path: /tmp\n", "path: %s\n" % ws.inp, 1)
        text = text.replace("path: /tmp/x\n", "path: %s\n" % ws.out)
        text = text.replace("  workspace: w\n", "  workspace: w\n  "
                            "state_dir: %s\n" % ws.state)
        p = run(["sync", "-p", "p", "--once", "-v", "--log-format", "json",
                 "--config", write(ws, text)])
        lines = [json.loads(l) for l in p.err.splitlines()]
        check(lines and all({"time", "level", "msg"} <= set(l)
                            for l in lines), p.err)
        done = [l for l in lines if l["msg"].startswith("done: ")]
        check(len(done) == 1 and done[0]["msg"].startswith(
            "done: 1 units copied"), p.err)
        # The summary's figures are fields, not only words.
        check(done[0]["units"] == 1 and done[0]["records"] == 1 and
              done[0]["objects_written"] == 1 and
              done[0]["dead_lettered"] == 0 and
              done[0]["bytes_read"] == 25 and
              isinstance(done[0]["seconds"], (int, float)), done[0])
        # A config error is a JSON line too.
        bad = write(ws, text.replace("  workspace: w\n",
                                     "  workspace: w\n  nonsense: 1\n"))
        p = run(["validate", "--log-format", "json", "--config", bad],
                check_rc=False)
        lines = [json.loads(l) for l in p.err.splitlines()]
        check(p.returncode == 1 and len(lines) == 1 and
              lines[0]["level"] == "error" and "nonsense" in
              lines[0]["msg"], p.err)
        # A missing source folder: the File plugin logs the error, and its
        # line names the plugin instance. (Another workspace: a state is
        # made for one source.)
        with open(ws.config, "w") as f:
            f.write(text.replace("path: %s\n" % ws.inp,
                                 "path: %s/gone\n" % ws.inp, 1)
                    .replace("  workspace: w\n", "  workspace: w2\n"))
        p = run(["sync", "-p", "p", "--once", "--log-format", "json",
                 "--config", ws.config], check_rc=False)
        lines = [json.loads(l) for l in p.err.splitlines()]
        check(p.returncode == 1 and
              any(l.get("source") and l["level"] == "error" and
                  "gone" in l["msg"] for l in lines), p.err)
        p = run(["--log-format", "yaml", "status"], check_rc=False)
        check(p.returncode == 2 and "text or json" in p.err, p.err)
    finally:
        ws.cleanup()


if __name__ == "__main__":
    main([test_help_and_version, test_validate_errors_have_positions,
          test_plugins_listing_and_dirs, test_stdout_sink, test_json_logs])
