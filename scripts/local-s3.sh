#!/usr/bin/env bash
# A local S3 for the S3 walkthrough without AWS: the server the tests use
# (s3rver behind the tests' proxy, tests/tools/s3/s3server.js), in the
# foreground until Ctrl-C. It prints the endpoint and the credentials to
# export in the shell that runs skipprd.
#
#   scripts/local-s3.sh [--port N] [--dir DIR] [--sample] [BUCKET...]
#
# Buckets: the seed's my-source-bucket and your-output-bucket, and any
# named. --sample fills my-source-bucket/ill-just-dump-this-here with a
# generated Firehose-style archive whose records carry their time under the
# seed's batch_time_fields. --port: default 9000 (0: any free port).
# --dir: where the objects live (default: a new temporary folder, removed
# at exit).
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
port=9000 dir="" sample=0
buckets=(my-source-bucket your-output-bucket)
while (($#)); do
    case "$1" in
        --port) port="$2"; shift 2 ;;
        --dir) dir="$2"; shift 2 ;;
        --sample) sample=1; shift ;;
        -h|--help) sed -n '2,16p' "$0"; exit 0 ;;
        -*) echo "local-s3: unknown option $1" >&2; exit 2 ;;
        *) buckets+=("$1"); shift ;;
    esac
done
if [ ! -d "$ROOT/tests/tools/s3/node_modules/s3rver" ]; then
    echo "local-s3: installing the S3 test server (npm ci)" >&2
    npm ci --prefix "$ROOT/tests/tools/s3" --no-audit --no-fund >/dev/null
fi
own_dir=0
if [ -z "$dir" ]; then
    dir="$(mktemp -d -t skippr-local-s3-XXXXXX)"
    own_dir=1
fi
IFS=, list="${buckets[*]}"
unset IFS
# s3rver makes continuation tokens with a cipher that OpenSSL 3 keeps in
# its legacy provider.
coproc S3 { exec node --openssl-legacy-provider \
    "$ROOT/tests/tools/s3/s3server.js" --dir "$dir" --buckets "$list" \
    --port "$port" --foreground --verify-signatures; }
pid=$S3_PID
cleanup() {
    kill "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
    if ((own_dir)); then rm -rf "$dir"; fi
}
trap cleanup EXIT
trap 'exit 0' INT TERM
read -r ready <&"${S3[0]}" || { echo "local-s3: the server did not start" >&2; exit 1; }
endpoint="$(python3 -c 'import json,sys; print(json.loads(sys.argv[1])["endpoint"])' "$ready")"
export AWS_ENDPOINT_URL="$endpoint" AWS_ACCESS_KEY_ID=S3RVER \
       AWS_SECRET_ACCESS_KEY=S3RVER AWS_REGION=us-east-1
if ((sample)); then
    gen="$(mktemp -d -t skippr-local-s3-sample-XXXXXX)"
    python3 "$ROOT/tests/tools/gen_firehose.py" "$gen" --objects 40 \
        --records 250 --time-fields time,system_datetime,date >/dev/null
    python3 - "$gen" <<'PY'
import os, sys
import boto3
root = sys.argv[1]
s3 = boto3.client("s3")
n = 0
for d, _, files in os.walk(root):
    for f in files:
        path = os.path.join(d, f)
        s3.upload_file(path, "my-source-bucket", os.path.relpath(path, root))
        n += 1
print("local-s3: %d sample objects in s3://my-source-bucket/"
      "ill-just-dump-this-here/" % n)
PY
    rm -rf "$gen"
fi
echo "local-s3: S3 at $endpoint, buckets: $list (objects in $dir)"
echo "local-s3: in the shell that runs skipprd:"
echo "export AWS_ENDPOINT_URL=$endpoint AWS_ACCESS_KEY_ID=S3RVER AWS_SECRET_ACCESS_KEY=S3RVER AWS_REGION=us-east-1"
echo "local-s3: Ctrl-C stops it"
wait "$pid"
