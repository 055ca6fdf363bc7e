#!/usr/bin/env python3
"""The docs match the code: the man page renders cleanly and names every
command and option that `skipprd --help` lists, every relative link in
README.md, docs/ and examples/ points at a file that exists, and the
README's local S3 walkthrough runs as written."""
import os
import re
import shutil
import signal
import subprocess
import tempfile

from skippr_test import SKIPPRD, check, main, shared_path

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
MAN = os.path.join(ROOT, "docs", "man", "skipprd.1")


def test_man_page_renders_and_is_complete():
    p = subprocess.run(["groff", "-man", "-Tutf8", "-ww", "-z", MAN],
                       capture_output=True, text=True, timeout=60)
    check(p.returncode == 0 and not p.stderr.strip(),
          "groff warns about the man page:\n" + p.stderr)
    text = subprocess.run(["groff", "-man", "-Tascii", "-P", "-cbou", MAN],
                          capture_output=True, text=True, timeout=60).stdout
    text = re.sub(r"-\n\s*", "-", text)
    usage = subprocess.run([SKIPPRD, "--help"], capture_output=True,
                           text=True, timeout=60).stdout
    opts = set(re.findall(r"(?<![\w-])--[a-z][a-z-]+", usage))
    cmds = re.findall(r"^  ([a-z]+) ", usage.split("options:")[0], re.M)
    check(len(opts) >= 8 and len(cmds) == 5, "parsed %s %s" % (opts, cmds))
    missing = [o for o in sorted(opts) if o not in text]
    missing += [c for c in cmds if "skipprd %s" % c not in text]
    check(not missing, "the man page lacks %s" % missing)


def test_relative_links_resolve():
    files = [os.path.join(ROOT, "README.md")]
    for top in ("docs", "examples", "sdk"):
        for dirpath, dirs, names in os.walk(os.path.join(ROOT, top)):
            dirs[:] = [d for d in dirs if d not in ("out", "node_modules")]
            files += [os.path.join(dirpath, n) for n in names
                      if n.endswith(".md")]
    bad = []
    for f in files:
        with open(f) as fh:
            text = fh.read()
        for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", text):
            if re.match(r"[a-z]+:", target):
                continue
            path = os.path.normpath(os.path.join(os.path.dirname(f), target))
            if not os.path.exists(path):
                bad.append("%s -> %s" % (os.path.relpath(f, ROOT), target))
    check(len(files) >= 10, "found only %d markdown files" % len(files))
    check(not bad, "broken links:\n" + "\n".join(bad))


def test_local_s3_walkthrough():
    """README, "Try the S3 walkthrough on a local S3": the script's
    export line, then the seed's YAML unchanged; Ctrl-C stops the
    server."""
    with open(os.path.join(ROOT, "README.md")) as f:
        readme = f.read()
    check("scripts/local-s3.sh --sample" in readme and
          "skipprd sync --pipeline gdpr_compliant_migration --once" in
          readme, "the README lost the walkthrough")
    script = subprocess.Popen(
        [os.path.join(ROOT, "scripts", "local-s3.sh"), "--port", "0",
         "--sample"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        text=True, start_new_session=True)
    walk = tempfile.mkdtemp(prefix="skippr-walk-")
    try:
        export = objects = None
        for line in script.stdout:
            m = re.search(r"\(objects in (\S+)\)", line)
            objects = m.group(1) if m else objects
            if line.startswith("export "):
                export = line
                break
        check(export, "no export line from local-s3.sh")
        env = dict(os.environ)
        env.update(kv.split("=", 1) for kv in export.split()[1:])
        shutil.copy(shared_path("seed", "skippr.yml"), walk)
        p = subprocess.run([SKIPPRD, "sync", "--pipeline",
                            "gdpr_compliant_migration", "--once"], cwd=walk,
                           env=env, capture_output=True, text=True,
                           timeout=300)
        check(p.returncode == 0 and "done: 40 units copied" in p.stderr,
              p.stderr[-2000:])
        os.killpg(script.pid, signal.SIGINT)
        check(script.wait(timeout=30) == 0, "local-s3.sh did not stop")
        check(objects, "local-s3.sh did not say where its objects are")
        left = subprocess.run(["pgrep", "-f", "s3server.js --dir %s " %
                               objects], capture_output=True,
                              text=True).stdout
        check(not left.strip(), "the server outlived the script: %s" % left)
        print("  " + [l for l in p.stderr.splitlines() if "done:" in l][0])
    finally:
        if script.poll() is None:
            os.killpg(script.pid, signal.SIGKILL)
        shutil.rmtree(walk, ignore_errors=True)


if __name__ == "__main__":
    main([test_man_page_renders_and_is_complete, test_local_s3_walkthrough,
          test_relative_links_resolve])
