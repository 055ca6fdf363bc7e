#!/usr/bin/env bash
# Set up (Debian packages, npm test server, build), then run one example
# against local test servers and check its output:
#   examples/run.sh gdpr-s3|file-to-bucket|bucket-to-kafka|kafka-to-bucket|json-to-csv
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh build >/dev/null
SKIPPRD="$PWD/build/runtime/skipprd" \
KAFKA_BROKER="$PWD/build/tests/kafka_broker" \
    exec /usr/bin/python3 examples/run.py "$@"
