#!/usr/bin/env bash
# Install what skippr needs on Debian 12 (idempotent) and build it.
#   scripts/setup.sh [BUILD_DIR] [extra cmake args...]
set -euo pipefail
cd "$(dirname "$0")/.."

PACKAGES=(build-essential cmake pkg-config python3 zstd
          libyaml-dev libjansson-dev libcmocka-dev libzstd-dev libxxhash-dev zlib1g-dev
          libcurl4-openssl-dev libssl-dev libxml2-dev libcsv-dev python3-boto3
          openssl clang libclang-rt-14-dev libxml2-utils
          librdkafka-dev kcat libmosquitto-dev mosquitto mosquitto-clients
          libmicrohttpd-dev python3-yaml python3-venv python3-pip
          groff-base strace python3-zstandard)

missing=()
for p in "${PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" ||
        missing+=("$p")
done
if ((${#missing[@]})); then
    echo "setup: installing ${missing[*]}"
    SUDO=""
    [ "$(id -u)" -eq 0 ] || SUDO="sudo"
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
fi

# The S3 test server (s3rver), pinned by tests/tools/s3/package-lock.json.
if [ ! -d tests/tools/s3/node_modules/s3rver ]; then
    echo "setup: installing the S3 test server (npm ci)"
    npm ci --prefix tests/tools/s3 --no-audit --no-fund >/dev/null
fi
# DuckDB (@duckdb/node-api), pinned by bench/duckdb/package-lock.json: the
# bench's peer, and the tests' second reader of converted CSV.
if [ ! -d bench/duckdb/node_modules/@duckdb/node-api ]; then
    echo "setup: installing DuckDB for node (npm ci)"
    npm ci --prefix bench/duckdb --no-audit --no-fund >/dev/null
fi

# promtool, to check the metrics endpoint's output: unpacked from
# Debian's prometheus package rather than installed, so that no
# Prometheus server is enabled on the machine.
PROMTOOL_DIR=tests/tools/.promtool
if [ ! -x "$PROMTOOL_DIR/usr/bin/promtool" ]; then
    echo "setup: unpacking promtool from Debian's prometheus package"
    tmp=$(mktemp -d)
    chmod 755 "$tmp"
    if ! (cd "$tmp" && apt-get download prometheus >/dev/null 2>&1); then
        SUDO=""
        [ "$(id -u)" -eq 0 ] || SUDO="sudo"
        $SUDO apt-get update -qq
        (cd "$tmp" && apt-get download prometheus >/dev/null 2>&1)
    fi
    mkdir -p "$PROMTOOL_DIR"
    dpkg-deb -x "$tmp"/prometheus_*.deb "$PROMTOOL_DIR"
    rm -rf "$tmp"
fi

BUILD=${1:-build}
shift || true
cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=RelWithDebInfo "$@" >/dev/null
cmake --build "$BUILD" -j"$(nproc)" >/dev/null
echo "setup: built $BUILD/runtime/skipprd"
