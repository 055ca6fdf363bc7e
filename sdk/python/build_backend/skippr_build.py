"""A PEP 517 build backend for the skippr package, so that installing it
needs nothing from PyPI: a wheel is a zip of the package with a
.dist-info folder, and an sdist a tar of the sources. Only the standard
library is used."""
import base64
import hashlib
import io
import os
import re
import tarfile
import zipfile

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
NAME = "skippr"


def _version():
    with open(os.path.join(HERE, NAME, "_options.py")) as f:
        return re.search(r"SKIPPRD_VERSION = '([^']+)'", f.read()).group(1)


def _metadata():
    return ("Metadata-Version: 2.1\nName: %s\nVersion: %s\nSummary: Compose "
            "skipprd pipelines in Python and save them as YAML\n"
            "Requires-Python: >=3.9\n" % (NAME, _version()))


def _package_files():
    pkg = os.path.join(HERE, NAME)
    return sorted(os.path.join(NAME, f) for f in os.listdir(pkg)
                  if f.endswith(".py"))


def get_requires_for_build_wheel(config_settings=None):
    return []


def get_requires_for_build_sdist(config_settings=None):
    return []


def build_wheel(wheel_directory, config_settings=None,
                metadata_directory=None):
    version = _version()
    dist_info = "%s-%s.dist-info" % (NAME, version)
    wheel_name = "%s-%s-py3-none-any.whl" % (NAME, version)
    entries = []
    for rel in _package_files():
        with open(os.path.join(HERE, rel), "rb") as f:
            entries.append((rel, f.read()))
    entries.append((dist_info + "/METADATA", _metadata().encode()))
    entries.append((dist_info + "/WHEEL", (
        "Wheel-Version: 1.0\nGenerator: skippr_build\nRoot-Is-Purelib: "
        "true\nTag: py3-none-any\n").encode()))
    entries.append((dist_info + "/top_level.txt", (NAME + "\n").encode()))
    record = []
    for rel, data in entries:
        digest = base64.urlsafe_b64encode(
            hashlib.sha256(data).digest()).rstrip(b"=").decode()
        record.append("%s,sha256=%s,%d" % (rel, digest, len(data)))
    record.append(dist_info + "/RECORD,,")
    entries.append((dist_info + "/RECORD", ("\n".join(record) +
                                            "\n").encode()))
    path = os.path.join(wheel_directory, wheel_name)
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        for rel, data in entries:
            info = zipfile.ZipInfo(rel, date_time=(2020, 1, 1, 0, 0, 0))
            info.external_attr = 0o644 << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            z.writestr(info, data)
    return wheel_name


def build_sdist(sdist_directory, config_settings=None):
    base = "%s-%s" % (NAME, _version())
    name = base + ".tar.gz"
    files = _package_files() + ["pyproject.toml", "README.md",
                                "build_backend/skippr_build.py"]
    with tarfile.open(os.path.join(sdist_directory, name), "w:gz") as t:
        for rel in files:
            t.add(os.path.join(HERE, rel), arcname=base + "/" + rel)
        info = tarfile.TarInfo(base + "/PKG-INFO")
        data = _metadata().encode()
        info.size = len(data)
        t.addfile(info, io.BytesIO(data))
    return name
