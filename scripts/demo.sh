#!/usr/bin/env bash
# Set up, make a sample Firehose-like archive, and run the seed's GDPR
# migration on local files: ./demo/in -> ./demo/out, exactly once; then
# skipprd verify checks the copy against the archive.
#   scripts/demo.sh [DEMO_DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh build
export SKIPPR_DEMO_DIR=$(realpath -m "${1:-demo}")
if [ ! -d "$SKIPPR_DEMO_DIR/in" ]; then
    python3 tests/tools/gen_firehose.py "$SKIPPR_DEMO_DIR/in" --objects 200 --records 500
fi
build/runtime/skipprd sync --pipeline gdpr_compliant_migration --once \
    --config examples/gdpr-files/skippr.yml
out="$SKIPPR_DEMO_DIR/out/copy/phew-thats-a-month-and-a-gdpr-fine-saved"
echo
echo "output: $(find "$out" -type f -name '*.jsonl' | wc -l) JSON Lines objects (.jsonl)," \
     "$(find "$out" -type f -name '*.json' -not -path '*/_skippr/*' | wc -l) beside them for records that span lines (.json),"
echo "under $out, e.g."
find "$out" -type f -name '*.jsonl' | sort | sed -n "1,5s|$SKIPPR_DEMO_DIR/||p"
echo
echo "checking the copy against the archive, record by record (skipprd verify):"
build/runtime/skipprd verify --pipeline gdpr_compliant_migration -q \
    --config examples/gdpr-files/skippr.yml | sed -n '1,4p;$p'
echo "run it again: nothing is re-read; drop new files into $SKIPPR_DEMO_DIR/in to copy just those."
