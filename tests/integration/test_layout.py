#!/usr/bin/env python3
"""The partition column's name, and states written in the old layout.

Shows:
- the seed's transform names the column after the last segment of its
  first path (p_tenant_id=) for records under detail. and truck. alike;
  batch_partition_name renames it; batch_partition_naming: per_path gives
  the old layout (a folder name per path);
- a state written in the old layout (its definition has no layout line,
  or it has no definition at all) is refused under the new one, with one
  line naming batch_partition_naming, and nothing is read or written; with
  per_path it goes on in the layout it wrote, exactly;
- a state whose paths give the same folders in both layouts (one path
  without dots) goes on without a word;
- by flags, --batch-partition-naming keeps the pipeline's state: the same
  copy run in another layout is refused, never a second copy beside it.
"""
import glob
import os

from skippr_test import (SEED_TRANSFORM, Workspace, assert_exact, check,
                         files_snapshot, main, output_records, run)

PER_PATH = dict(SEED_TRANSFORM, batch_partition_naming="per_path")


def definition_file(ws):
    found = glob.glob(os.path.join(ws.state, "**", "definition"),
                      recursive=True)
    check(len(found) == 1, "definitions: %s" % found)
    return found[0]


def make_old_state(ws, drop_definition=False):
    """A state as skippr 0.1 left it: objects in the per-path layout, and a
    definition without the layout line (or none)."""
    ws.write_config(transform=PER_PATH)
    ws.sync("--once")
    path = definition_file(ws)
    with open(path) as f:
        lines = f.read().splitlines(True)
    check(lines[-1].startswith("layout:partition=p_detail.tenant_id=,"
                               "p_truck.tenant_id="), "layout: %s" % lines)
    if drop_definition:
        os.unlink(path)
    else:
        with open(path, "w") as f:
            f.write("".join(lines[:-1]))
    folders = set(k[0].split("/")[1].split("=")[0]
                  for k in output_records(ws.sink_root))
    check(folders == {"p_detail.tenant_id", "p_truck.tenant_id"},
          "old layout: %s" % folders)


def add_input(ws):
    extra = os.path.join(ws.inp, "ill-just-dump-this-here", "2021", "10",
                         "20", "00")
    os.makedirs(extra)
    with open(os.path.join(extra, "new"), "wb") as f:
        f.write(b'{"event_type":"truck_ping","timestamp":"2021-10-20",'
                b'"truck":{"tenant_id":"acme"}}\n'
                b'{"event_type":"login","timestamp":"2021-10-20",'
                b'"detail":{"tenant_id":"acme"}}\n')


def check_old_state(drop_definition):
    ws = Workspace("layout-old")
    try:
        ws.generate(objects=6, records=80, seed=39)
        make_old_state(ws, drop_definition)
        add_input(ws)
        before = files_snapshot(ws.out)
        ws.write_config()
        p = ws.sync("--once", check_rc=False)
        errors = [l for l in p.err.splitlines() if "error" in l.lower()]
        check(p.returncode == 1 and len(errors) == 1 and
              "batch_partition_naming: per_path" in errors[0] and
              "p_detail.tenant_id=,p_truck.tenant_id=" in errors[0] and
              "p_tenant_id=" in errors[0] and
              "Nothing was read or written" in errors[0],
              "exit %d:\n%s" % (p.returncode, p.err[-2000:]))
        check(files_snapshot(ws.out) == before, "the refused run wrote")
        # The key the message names: the old layout goes on, exactly.
        ws.write_config(transform=PER_PATH)
        p = ws.sync("--once")
        check("1 units copied, 6 already done" in p.err, p.err[-1500:])
        assert_exact(ws, transform=PER_PATH)
        with open(definition_file(ws)) as f:
            check(f.read().endswith("layout:partition=p_detail.tenant_id=,"
                                    "p_truck.tenant_id=\n"), "not upgraded")
        print("  old state (%s): refused with one line, nothing written; "
              "per_path goes on exactly" %
              ("no definition" if drop_definition else "no layout line"))
    finally:
        ws.cleanup()


def test_old_state_without_layout_line():
    check_old_state(drop_definition=False)


def test_old_state_without_definition():
    check_old_state(drop_definition=True)


def test_old_state_same_folders_goes_on():
    one = dict(SEED_TRANSFORM, batch_partition_fields="tenant")
    ws = Workspace("layout-same")
    try:
        ws.generate(objects=3, records=40, seed=9)
        ws.write_config(transform=one)
        ws.sync("--once")
        path = definition_file(ws)
        with open(path) as f:
            text = f.read()
        with open(path, "w") as f:
            f.write(text[:text.index("layout:")])
        add_input(ws)
        p = ws.sync("--once")
        check("1 units copied, 3 already done" in p.err, p.err[-1500:])
        with open(path) as f:
            check(f.read() == text, "definition not upgraded")
        assert_exact(ws, transform=one)
    finally:
        ws.cleanup()


def test_partition_name():
    named = dict(SEED_TRANSFORM, batch_partition_name="tenant")
    ws = Workspace("layout-name")
    try:
        ws.generate(objects=4, records=60, seed=5)
        ws.write_config(transform=named)
        ws.sync("--once")
        assert_exact(ws, transform=named)
        folders = set(k[0].split("/")[1].split("=")[0]
                      for k in output_records(ws.sink_root))
        check(folders == {"p_tenant"}, "folders: %s" % folders)
        # Renaming the column of a state that wrote is another layout.
        before = files_snapshot(ws.out)
        add_input(ws)
        ws.write_config()
        p = ws.sync("--once", check_rc=False)
        check(p.returncode == 1 and "wrote partition folders p_tenant=..."
              in p.err and "names them p_tenant_id=..." in p.err and
              "batch_partition_name" in p.err,
              "exit %d: %s" % (p.returncode, p.err[-1500:]))
        check(files_snapshot(ws.out) == before, "the refused run wrote")
    finally:
        ws.cleanup()


def test_flags_keep_their_state():
    ws = Workspace("layout-flags")
    try:
        ws.generate(objects=4, records=50, seed=6)
        flags = ["sync", "--once", "--source", "file://" + ws.inp,
                 "--sink", "file://" + ws.out, "--state-dir", ws.state,
                 "--namespace-fields", "event_type",
                 "--batch-partition-fields",
                 "detail.tenant_id,truck.tenant_id",
                 "--batch-time-fields", "timestamp",
                 "--time-partition-prefix", "p_"]
        run(flags + ["--batch-partition-naming", "per_path"])
        before = files_snapshot(ws.out)
        p = run(flags, check_rc=False)
        check(p.returncode == 1 and "names them p_tenant_id=..." in p.err and
              "--batch-partition-naming per_path" in p.err,
              "exit %d: %s" % (p.returncode, p.err[-1500:]))
        check(files_snapshot(ws.out) == before, "a second layout was written")
        p = run(flags + ["--batch-partition-naming", "per_path"])
        check("0 units copied, 4 already done" in p.err, p.err[-1500:])
    finally:
        ws.cleanup()


if __name__ == "__main__":
    main([test_old_state_without_layout_line,
          test_old_state_without_definition,
          test_old_state_same_folders_goes_on,
          test_partition_name,
          test_flags_keep_their_state])
