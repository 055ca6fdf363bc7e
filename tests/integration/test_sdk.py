#!/usr/bin/env python3
"""The plugin author's kit, used as an author would: install the SDK with
`cmake --install`, build the example Tar sink out of tree against it (CMake
package) and the template (pkg-config), run the testkit on them, watch the
testkit fail a sink that is not idempotent, and copy a pipeline through
the out-of-tree plugin with skipprd."""
import collections
import os
import re
import shutil
import subprocess
import tarfile

from skippr_test import (SEED_TRANSFORM, SKIPPRD, SOURCE_PREFIX, Workspace,
                         check, expected_records, frame, main)

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE = os.path.normpath(os.path.join(HERE, "..", ".."))
BUILD = os.path.dirname(os.path.dirname(SKIPPRD))
TESTKIT = os.environ.get("TESTKIT",
                         os.path.join(BUILD, "sdk", "c", "skippr-testkit"))
BROKEN = os.environ.get("BROKEN_SINK",
                        os.path.join(BUILD, "tests", "skippr_broken_sink.so"))


def sh(args, **kw):
    p = subprocess.run(args, capture_output=True, text=True, **kw)
    check(p.returncode == 0, "%s failed (%d):\n%s%s" % (
        " ".join(args), p.returncode, p.stdout[-3000:], p.stderr[-3000:]))
    return p


def install_sdk(ws):
    prefix = os.path.join(ws.root, "prefix")
    sh(["cmake", "--install", BUILD, "--prefix", prefix])
    # Nothing may land outside the prefix (an absolute DESTINATION would).
    with open(os.path.join(BUILD, "install_manifest.txt")) as f:
        outside = [l.strip() for l in f if not l.startswith(prefix + "/")]
    check(not outside, "installed outside the prefix: %s" % outside[:5])
    for f in ("include/skippr/plugin.h", "bin/skippr-testkit",
              "lib/cmake/skippr/skipprConfig.cmake",
              "lib/pkgconfig/skippr.pc", "share/skippr/template/my_sink.c",
              "share/man/man1/skipprd.1"):
        check(os.path.exists(os.path.join(prefix, f)), "%s not installed" % f)
    return prefix


def build_tar_sink(ws, prefix):
    """The example, configured in a fresh folder against the prefix only."""
    bt = os.path.join(ws.root, "tar-build")
    sh(["cmake", "-S", os.path.join(SOURCE, "examples", "tar-sink"),
        "-B", bt, "-DCMAKE_PREFIX_PATH=" + prefix])
    sh(["cmake", "--build", bt])
    so = os.path.join(bt, "skippr_tar.so")
    check(os.path.exists(so), "no %s" % so)
    return bt, so


def test_example_plugin_out_of_tree_passes_testkit():
    ws = Workspace("sdk-tar")
    try:
        prefix = install_sdk(ws)
        bt, so = build_tar_sink(ws, prefix)
        # The example's own ctest runs the installed testkit on it.
        sh(["ctest", "--test-dir", bt, "--output-on-failure"])
        archive = os.path.join(ws.root, "kit.tar")
        p = subprocess.run(
            [os.path.join(prefix, "bin", "skippr-testkit"), so,
             "-o", "path=" + archive, "--big-mib", "64",
             "--read", "tar -xOf '%s' \"$SKIPPR_KEY\"" % archive],
            capture_output=True, text=True, timeout=300)
        check(p.returncode == 0, "testkit failed the Tar sink:\n" + p.stderr)
        check("# 12 checks, 0 failed" in p.stderr, p.stderr)
        check(re.search(r"64 MiB object: memory grew by [0-9.]+ MiB",
                        p.stderr), p.stderr)
        # The archive is a plain tar: the standard reader lists every
        # object once.
        with tarfile.open(archive) as t:
            names = t.getnames()
        check(len(names) == len(set(names)) == 1 + 1 + 1 + 1 + 4 * 8,
              "archive members: %d (%d distinct)" % (len(names),
                                                     len(set(names))))
    finally:
        ws.cleanup()


def test_template_builds_with_pkg_config_and_passes():
    ws = Workspace("sdk-template")
    try:
        prefix = install_sdk(ws)
        env = dict(os.environ,
                   PKG_CONFIG_PATH=os.path.join(prefix, "lib", "pkgconfig"))
        cflags = sh(["pkg-config", "--cflags", "skippr"], env=env).stdout
        inc = cflags.split()[0][2:]
        check(os.path.samefile(inc, os.path.join(prefix, "include")), cflags)
        kit = sh(["pkg-config", "--variable=testkit", "skippr"],
                 env=env).stdout.strip()
        check(os.path.samefile(kit, os.path.join(prefix, "bin",
                                                 "skippr-testkit")), kit)
        so = os.path.join(ws.root, "skippr_my_sink.so")
        sh(["cc", "-std=c11", "-Wall", "-Wextra", "-Werror", "-shared",
            "-fPIC"] + cflags.split() +
           [os.path.join(prefix, "share", "skippr", "template", "my_sink.c"),
            "-o", so])
        p = subprocess.run([kit, so, "--big-mib", "2"], capture_output=True,
                           text=True, timeout=120)
        check(p.returncode == 0, "testkit failed the template:\n" + p.stderr)
        # Nothing could be read back from stdout: the kit says so.
        check("# SKIP neither --read nor object_check" in p.stderr, p.stderr)
        # The template's own CMake project builds from the installed copy.
        bt = os.path.join(ws.root, "tpl-build")
        sh(["cmake", "-S", os.path.join(prefix, "share", "skippr",
                                        "template"),
            "-B", bt, "-DCMAKE_PREFIX_PATH=" + prefix])
        sh(["cmake", "--build", bt])
        check(os.path.exists(os.path.join(bt, "skippr_my_sink.so")),
              "template build made no plugin")
    finally:
        ws.cleanup()


def test_testkit_fails_a_sink_that_is_not_idempotent():
    """The broken sink appends instead of replacing, and its state store
    ignores conditions: the testkit fails both checks, and only those."""
    ws = Workspace("sdk-broken")
    try:
        out = os.path.join(ws.root, "objs")
        os.makedirs(out)
        read = "cat '%s'/\"$(printf %%s \"$SKIPPR_KEY\" | tr / _)\"" % out
        p = subprocess.run([TESTKIT, BROKEN, "-o", "dir=" + out,
                            "--big-mib", "4", "--read", read],
                           capture_output=True, text=True, timeout=120)
        check(p.returncode == 1, "exit %d, expected 1:\n%s" % (
            p.returncode, p.stderr))
        lines = p.stderr.splitlines()
        bad = [l for l in lines if l.startswith("not ok")]
        check(len(bad) == 2 and bad[0].startswith(
            "not ok 4 - re-write the same slice after a crash") and
              bad[1].startswith("not ok 12 - state store"),
              "expected the re-write and the store checks to fail:\n" +
              p.stderr)
        check("instead of replacing it" in bad[0], bad[0])
        # Its store ignores the conditions of a write: two processes could
        # both take a pipeline's lease.
        check('with "*" returned OK, not CHANGED' in bad[1], bad[1])
        for n in (3, 5, 6, 7):  # the rest of the sink is right
            check(any(l.startswith("ok %d " % n) for l in lines),
                  "check %d did not pass:\n%s" % (n, p.stderr))
        # A sink whose init() starts refusing after the first two: every
        # later check says it had no instance, none passes by default
        # (a capability the sink does not declare is a SKIP).
        p = subprocess.run([TESTKIT, BROKEN, "-o", "dir=" + out,
                            "-o", "fail_init_after=2", "--big-mib", "4",
                            "--read", read], capture_output=True, text=True,
                           timeout=120)
        lines = p.stderr.splitlines()
        check(p.returncode == 1 and
              any(l.startswith("not ok 3 - open, write and commit an "
                               "object: init() with the given options "
                               "returned FATAL") for l in lines) and
              not any(l.startswith("ok %d " % n) and "# SKIP" not in l
                      for l in lines for n in range(3, 10)),
              "a refused init() did not fail every later check:\n" +
              p.stderr)
        # A missing required option is named, not guessed.
        p = subprocess.run([TESTKIT, BROKEN], capture_output=True,
                           text=True, timeout=60)
        check(p.returncode == 1 and "option 'dir' is required: pass -o "
              "dir=VALUE" in p.stderr, p.stderr)
        p = subprocess.run([TESTKIT, os.path.join(ws.root, "none.so")],
                           capture_output=True, text=True, timeout=60)
        check(p.returncode == 2 and "cannot load" in p.stderr, p.stderr)
    finally:
        ws.cleanup()


def test_builtin_file_sink_passes_testkit():
    ws = Workspace("sdk-file")
    try:
        so = os.path.join(BUILD, "plugins", "skippr_file.so")
        p = subprocess.run(
            # "on" is a boolean to the engine, so to the testkit too.
            [TESTKIT, so, "-o", "path=" + ws.out, "-o", "prefix=kit",
             "-o", "fsync=on",
             "--big-mib", "64", "--read",
             "cat '%s/kit/'\"$SKIPPR_KEY\"" % ws.out],
            capture_output=True, text=True, timeout=300)
        check(p.returncode == 0, "testkit failed the File sink:\n" + p.stderr)
    finally:
        ws.cleanup()


def test_s3_sink_passes_testkit_through_faults():
    """The S3 sink against s3rver with 3% of requests failing (500 or a
    cut connection) and no retries of its own: every fault reaches the
    testkit as RETRY, which aborts and writes again as the engine does,
    and every check still sees each object stored once. One object gets
    1,005 staging pieces, more than a listing page (1,000): stage_clear
    must page through them all, and no piece may be left. The state store
    (conditional writes) passes under the same faults with the sink's own
    retries."""
    from s3_test import S3Server
    s3 = S3Server(["kit"])
    try:
        s3.faults(0.03, ["500", "reset"], seed=5)
        # Reads meet the injected faults too: try again on anything but
        # 200 (the bytes) and 404 (not there).
        read = ('t=$(mktemp); for i in 1 2 3 4 5 6 7 8; do '
                'c=$(curl -s -o "$t" -w "%%{http_code}" '
                '"%s/kit/pre/$SKIPPR_KEY"); '
                '[ "$c" = 200 ] && { cat "$t"; rm -f "$t"; exit 0; }; '
                '[ "$c" = 404 ] && break; done; rm -f "$t"; exit 1'
                % s3.endpoint)
        p = subprocess.run(
            [TESTKIT, os.path.join(BUILD, "plugins", "skippr_s3.so"),
             "-o", "s3_bucket=kit", "-o", "s3_prefix=pre",
             "-o", "max_attempts=1", "--big-mib", "64",
             "--stage-pieces", "1005", "--read", read, "--no-store"],
            env=dict(os.environ, **s3.env()), capture_output=True,
            text=True, timeout=600)
        injected = sum(s3.stats().get("injected", {}).values())
        check(p.returncode == 0, "testkit failed the S3 sink:\n" + p.stderr)
        m = re.search(r"# 12 checks, 0 failed; (\d+) calls retried",
                      p.stderr)
        check(m and injected > 0 and int(m.group(1)) > 0,
              "no fault reached the sink as RETRY (%d injected):\n%s" % (
                  injected, p.stderr))
        left = [k for k in s3.objects("kit") if "skippr-staging/" in k]
        check("ok 9 - staging pieces" in p.stderr and
              "ok 10 - copying staged pieces: a piece made" in p.stderr and
              not left,
              "staging pieces not checked, or left: %s" % left[:5])
        # The state store retries inside the sink (max_attempts), so it
        # is checked with the sink's own retries, under the same faults.
        s3.reset_stats()
        q = subprocess.run(
            [TESTKIT, os.path.join(BUILD, "plugins", "skippr_s3.so"),
             "-o", "s3_bucket=kit", "-o", "s3_prefix=store",
             "-o", "max_attempts=8", "--big-mib", "1", "--instances", "1"],
            env=dict(os.environ, **s3.env()), capture_output=True,
            text=True, timeout=600)
        check(q.returncode == 0 and "ok 12 - state store: conditional "
              "writes" in q.stderr and "a file sent by store_put_file" in
              q.stderr, "the S3 store failed the testkit:\n" + q.stderr)
        print("  %d faults injected, %s calls retried after RETRY; the "
              "state store passed under %d more" % (
                  injected, m.group(1),
                  sum(s3.stats().get("injected", {}).values())))
    finally:
        s3.close()


def test_skipprd_copies_through_the_out_of_tree_plugin():
    ws = Workspace("sdk-e2e")
    try:
        prefix = install_sdk(ws)
        bt, _ = build_tar_sink(ws, prefix)
        ws.generate(objects=12, records=400, seed=31)
        cfg = ws.write_config()
        archive = os.path.join(ws.root, "out.tar")
        with open(cfg) as f:
            text = f.read()
        head, sinks = text.split("data_sinks:\n")
        head = head.replace("skippr:\n", "skippr:\n  plugin_dirs: [%s]\n"
                            % bt, 1)
        sinks = ("  tenant_layout:\n    Tar:\n      path: %s\n" % archive)
        with open(cfg, "w") as f:
            f.write(head + "data_sinks:\n" + sinks)
        p = sh([SKIPPRD, "plugins", "--config", cfg])
        check(os.path.join(bt, "skippr_tar.so") in p.stdout, p.stdout)
        for _ in range(2):  # the second run finds everything done
            sh([SKIPPRD, "sync", "--pipeline", "gdpr_compliant_migration",
                "--once", "--config", cfg])
        got = collections.Counter()
        with tarfile.open(archive) as t:
            names = t.getnames()
            check(len(names) == len(set(names)), "a member twice")
            for m in t.getmembers():
                folder = m.name.rsplit("/", 1)[0]
                for raw, _ in frame(t.extractfile(m).read()):
                    got[(folder, raw)] += 1
        want = expected_records(ws.inp)
        check(got == want, "archive records differ: %d kinds missing, %d "
              "extra" % (len(want - got), len(got - want)))
        check(sum(want.values()) > 12 * 300, "input %d" % sum(want.values()))
        by_flags(ws, prefix, bt, want)
    finally:
        ws.cleanup()


def by_flags(ws, prefix, bt, want):
    """The plugin's own URL form (tar://) on the command line: installed
    where the installed skipprd looks, it copies by flags alone into a
    relative archive path, made absolute from the working folder."""
    dirs = [d for d, _, fs in os.walk(prefix) if d.endswith("skippr/plugins")
            and "skippr_file.so" in fs]
    check(len(dirs) == 1, "installed plugin folders: %s" % dirs)
    shutil.copy(os.path.join(bt, "skippr_tar.so"), dirs[0])
    skipprd = os.path.join(prefix, "bin", "skipprd")
    args = [skipprd, "sync", "--once", "--source", ws.inp, "--sink",
            "tar://flags.tar", "--state-dir", os.path.join(ws.root, "st")]
    for k, v in SEED_TRANSFORM.items():
        args += ["--" + k.replace("_", "-"), v]
    args += ["--source-opt", "prefix=" + SOURCE_PREFIX]
    sh(args, cwd=ws.root)
    got = collections.Counter()
    with tarfile.open(os.path.join(ws.root, "flags.tar")) as t:
        for m in t.getmembers():
            folder = m.name.rsplit("/", 1)[0]
            for raw, _ in frame(t.extractfile(m).read()):
                got[(folder, raw)] += 1
    check(got == want, "by flags: %d kinds missing, %d extra" %
          (len(want - got), len(got - want)))
    p = subprocess.run([skipprd, "validate", "--source", ws.inp, "--sink",
                        "tar://"], capture_output=True, text=True)
    check(p.returncode != 0 and "expected tar://ARCHIVE" in p.stderr,
          p.stderr)


if __name__ == "__main__":
    main([test_example_plugin_out_of_tree_passes_testkit,
          test_template_builds_with_pkg_config_and_passes,
          test_testkit_fails_a_sink_that_is_not_idempotent,
          test_builtin_file_sink_passes_testkit,
          test_s3_sink_passes_testkit_through_faults,
          test_skipprd_copies_through_the_out_of_tree_plugin])
