#!/usr/bin/env bash
# The benchmark: prints figures, asserts nothing. Not part of the tests.
#
#   bench/run.sh [MB]
#
# 1. Peek + route on one core (bench_peek): JSONL, concatenated and
#    pretty-printed Firehose-like records, median of 7 runs each.
# 2. Instructions per input byte of the same path under callgrind, which do
#    not depend on how busy the machine is.
# 3. End to end: skipprd file -> file --once with 1 and 2 threads, and 2
#    threads with the WAL zstd-compressed (level 3), on a generated
#    uncompressed archive, next to `cp -r` of the same tree.
# 4. The same tree gzipped: gzip -dc of every object, then skipprd -t 1, -t 2.
set -euo pipefail
cd "$(dirname "$0")/.."
MB=${1:-128}
scripts/setup.sh build >/dev/null
command -v valgrind >/dev/null || {
    SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO=sudo
    $SUDO apt-get install -y -qq valgrind >/dev/null
}
B=build/bench/bench_peek

echo "== peek + route, one core"
for f in lines concat pretty; do "$B" "$MB" 7 "$f"; done

echo "== instructions per byte (callgrind, 16 MB)"
for f in lines concat pretty; do
    out=$(mktemp)
    valgrind --tool=callgrind --callgrind-out-file="$out" \
        --toggle-collect=sk_json_next --toggle-collect=sk_route_memo \
        "$B" 16 1 "$f" 2>/dev/null >"$out.txt"
    ir=$(callgrind_annotate "$out" 2>/dev/null | awk '/PROGRAM TOTALS/ {gsub(",","",$1); print $1}')
    bytes=$(sed -n 's/.*(\([0-9.]*\) MB,.*/\1/p' "$out.txt")
    awk -v ir="$ir" -v mb="$bytes" -v f="$f" \
        'BEGIN { printf "%-7s %.2f instructions/byte (%d in %.1f MB)\n", f, ir / (mb * 1e6), ir, mb }'
    rm -f "$out" "$out.txt"
done

echo "== end to end: file -> file --once (uncompressed, page cache warm)"
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
python3 tests/tools/gen_firehose.py "$W/in" --objects 400 --records 2000 --seed 42 >/dev/null
# Plain framings only: the generator's gzip/zstd objects are decompressed
# here so the tree is uncompressed.
find "$W/in" -type f | while read -r f; do
    if head -c2 "$f" | od -An -tx1 | grep -q '1f 8b'; then gzip -dc <"$f" >"$f.tmp" && mv "$f.tmp" "$f";
    elif head -c4 "$f" | od -An -tx1 | grep -q '28 b5 2f fd'; then zstd -dqc <"$f" >"$f.tmp" && mv "$f.tmp" "$f"; fi
done
bytes=$(du -sb "$W/in" | cut -f1)
cat "$W/in"/*/*/*/*/*/* >/dev/null   # warm the page cache
t0=$(date +%s.%N); cp -r "$W/in" "$W/cp"; sync "$W/cp"; t1=$(date +%s.%N)
echo "cp -r + sync     $(awk -v b="$bytes" -v a="$t0" -v z="$t1" 'BEGIN{printf "%.0f MB/s (%.1f MB in %.2f s)", b/1e6/(z-a), b/1e6, z-a}')"
for run in "1 0" "2 0" "2 3"; do
    set -- $run
    threads=$1 zstd=$2
    rm -rf "$W/out" "$W/state"
    sed -e "s|\${SKIPPR_DEMO_DIR}/in|$W/in|; s|\${SKIPPR_DEMO_DIR}/out|$W/out|; s|\${SKIPPR_DEMO_DIR}/.skippr|$W/state|" \
        -e "s|^    buffer_threshold_seconds: .*|&\n    wal_zstd_level: $zstd|" \
        examples/gdpr-files/skippr.yml >"$W/skippr.yml"
    t0=$(date +%s.%N)
    build/runtime/skipprd sync -p gdpr_compliant_migration --once -q -t "$threads" -c "$W/skippr.yml"
    t1=$(date +%s.%N)
    label="skipprd $threads thread$( [ "$threads" = 1 ] || echo s)"
    [ "$zstd" = 0 ] || label="$label, WAL zstd $zstd"
    printf '%-30s %s\n' "$label" "$(awk -v b="$bytes" -v a="$t0" -v z="$t1" 'BEGIN{printf "%.0f MB/s (%.2f s)", b/1e6/(z-a), z-a}')"
done

echo "== gzip corpus: the same tree, every object gzip -6 (MB/s of uncompressed bytes)"
rm -rf "$W/gz" "$W/out" "$W/state" "$W/cp"
cp -r "$W/in" "$W/gz"
find "$W/gz" -type f -exec gzip -6 -n {} +
find "$W/gz" -type f -name '*.gz' | while read -r f; do mv "$f" "${f%.gz}"; done
mapfile -t gzfiles < <(find "$W/gz" -type f | sort)
t0=$(date +%s.%N); gzip -dc "${gzfiles[@]}" >/dev/null; t1=$(date +%s.%N)
printf '%-30s %s\n' "gzip -dc >/dev/null" "$(awk -v b="$bytes" -v a="$t0" -v z="$t1" 'BEGIN{printf "%.0f MB/s (%.2f s)", b/1e6/(z-a), z-a}')"
for threads in 1 2; do
    rm -rf "$W/out" "$W/state"
    sed -e "s|\${SKIPPR_DEMO_DIR}/in|$W/gz|; s|\${SKIPPR_DEMO_DIR}/out|$W/out|; s|\${SKIPPR_DEMO_DIR}/.skippr|$W/state|" \
        examples/gdpr-files/skippr.yml >"$W/skippr.yml"
    t0=$(date +%s.%N)
    build/runtime/skipprd sync -p gdpr_compliant_migration --once -q -t "$threads" -c "$W/skippr.yml"
    t1=$(date +%s.%N)
    printf '%-30s %s\n' "skipprd $threads thread$( [ "$threads" = 1 ] || echo s), gzip input" "$(awk -v b="$bytes" -v a="$t0" -v z="$t1" 'BEGIN{printf "%.0f MB/s (%.2f s)", b/1e6/(z-a), z-a}')"
done
