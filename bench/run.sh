#!/usr/bin/env bash
# The benchmark: one command, every figure in docs/PERFORMANCE.md from one
# run. Prints figures, asserts nothing. Not part of the tests.
#
#   bench/run.sh [MB] [--quick]
#
# 1. bench/peers.py: peek + route on one core next to a simdjson On-Demand
#    program (three framings, validate true and false), then the same job
#    by cat, cp -r, jq, a naive Python script, DuckDB and skipprd, with
#    GB/s, CPU-s per GB, peak RSS and byte-equality, and the ratios.
#    Then CSV: csvpeek + route next to libcsv's full parse, same bytes;
#    and XML: xmlpeek + route next to libxml2's xmlReader.
# 2. Instructions per input byte of the peek path under callgrind, which do
#    not depend on how busy the machine is.
# 3. End to end on a generated archive of mixed framings: cp -r + sync and
#    skipprd file -> file --once (1 thread pinned to 1 CPU, 2 threads,
#    validate: false, WAL zstd 3), median of 3 runs each; then the same
#    tree gzipped, next to gzip -dc of every object.
# 4. bench/scale.py: memory against input size (1 and 4 GiB against a
#    256 MiB budget), and how time and RSS grow with objects and partitions.
#    --quick skips this part (it takes several minutes and 15 GB of disk).
# 5. bench/plugins.py: the Kafka, MQTT and HTTP plugins against local
#    servers, next to kcat and mosquitto_pub/mosquitto_sub; then
#    bench/mqtt_rate.py: the MQTT source live against a broker at its
#    defaults, next to mosquitto_sub.
# 6. bench/buffer.py: a date-ordered backfill with 5,600 partition-days and
#    adversarial tenant names, file -> file next to cp -r + sync: speed,
#    user and system time, bytes written to disk per input byte, the state
#    folder's peak, objects per partition-day; the same volume again in 42
#    partition-days of about 7 MB; then file -> S3 (s3rver): bytes skipprd
#    writes to local disk per input byte.
#    6c. bench/verify.py: skipprd verify next to the sync --once it checks
#    (1 GB; --quick: 256 MB), clean and with one record deleted; and
#    bench/units.py (run apart) prints verify after each first run.
# 7. tests/integration/test_crash_points.py at four times the suite's
#    input: a kill at each crash point's first, middle and last hit on
#    file->file, file->S3, S3->S3 and file->Kafka (--quick skips it).
set -euo pipefail
cd "$(dirname "$0")/.."
MB=128
QUICK=0
for a in "$@"; do
    case "$a" in
    --quick) QUICK=1 ;;
    *) MB=$a ;;
    esac
done
scripts/setup.sh build >/dev/null
command -v valgrind >/dev/null || {
    SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO=sudo
    $SUDO apt-get install -y -qq valgrind >/dev/null
}
B=build/bench/bench_peek
echo "skippr bench, $(date -u +%Y-%m-%dT%H:%MZ), commit $(git rev-parse --short HEAD 2>/dev/null || echo '?'), $(nproc) CPUs"

echo "== 1. peek next to simdjson, and the peers"
python3 bench/peers.py --mb "$MB" --runs 3

echo
echo "== 1b. CSV peek + route next to libcsv's full parse (one core)"
taskset -c 0 build/bench/bench_csv "$MB" 5
echo "== 1c. XML peek + route next to libxml2's xmlReader (one core)"
taskset -c 0 build/bench/bench_xml "$MB" 5

echo
echo "== 2. instructions per byte of peek + route (callgrind, 16 MB)"
for skim in 0 1; do
    for f in lines concat pretty; do
        out=$(mktemp)
        SKIPPR_BENCH_SKIM=$skim valgrind --tool=callgrind --callgrind-out-file="$out" \
            --toggle-collect=sk_json_next --toggle-collect=sk_route_memo \
            "$B" 16 1 "$f" 2>/dev/null >"$out.txt"
        ir=$(callgrind_annotate "$out" 2>/dev/null | awk '/PROGRAM TOTALS/ {gsub(",","",$1); print $1}')
        bytes=$(sed -n 's/.*(\([0-9.]*\) MB,.*/\1/p' "$out.txt")
        awk -v ir="$ir" -v mb="$bytes" -v f="$f" -v v="$([ $skim = 1 ] && echo false || echo true)" \
            'BEGIN { printf "%-7s validate: %-5s %.2f instructions/byte (%d in %.1f MB)\n", f, v, ir / (mb * 1e6), ir, mb }'
        rm -f "$out" "$out.txt"
    done
done

echo
echo "== 3. end to end: file -> file --once, page cache warm, median of 3"
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
find "$W/in" -type f -exec cat {} + >/dev/null   # warm the page cache

# median of three wall times of a command; "$@" is the command
median3() {
    local ts=()
    for _ in 1 2 3; do
        rm -rf "$W/out" "$W/state" "$W/cp"
        sync
        local t0 t1
        t0=$(date +%s.%N)
        "$@"
        t1=$(date +%s.%N)
        ts+=("$(awk -v a="$t0" -v z="$t1" 'BEGIN{print z-a}')")
    done
    printf '%s\n' "${ts[@]}" | sort -n | sed -n 2p
}
rate() { awk -v b="$bytes" -v s="$1" 'BEGIN{printf "%5.0f MB/s (%.3f s)", b/1e6/s, s}'; }
config() { # threads-independent config: $1 input dir, $2 extra pipeline line
    sed -e "s|\${SKIPPR_DEMO_DIR}/in|$1|; s|\${SKIPPR_DEMO_DIR}/out|$W/out|; s|\${SKIPPR_DEMO_DIR}/.skippr|$W/state|" \
        -e "s|^    buffer_threshold_seconds: .*|&\n    $2|" \
        examples/gdpr-files/skippr.yml >"$W/skippr.yml"
}
skipprd() { # $1 threads; one thread runs on one CPU
    local pin=()
    [ "$1" = 1 ] && pin=(taskset -c 0)
    "${pin[@]}" build/runtime/skipprd sync -p gdpr_compliant_migration --once -q -t "$1" -c "$W/skippr.yml"
}
cpr() { cp -r "$W/in" "$W/cp" && sync "$W/cp"; }
printf '%.1f MB in %d objects\n' "$(awk -v b="$bytes" 'BEGIN{print b/1e6}')" "$(find "$W/in" -type f | wc -l)"
printf '%-38s %s\n' "cp -r + sync" "$(rate "$(median3 cpr)")"
config "$W/in" "validate: true"
t1=$(median3 skipprd 1)
printf '%-38s %s\n' "skipprd 1 thread, 1 CPU" "$(rate "$t1")"
t2=$(median3 skipprd 2)
printf '%-38s %s\n' "skipprd 2 threads" "$(rate "$t2")"
config "$W/in" "validate: false"
t2s=$(median3 skipprd 2)
printf '%-38s %s\n' "skipprd 2 threads, validate: false" "$(rate "$t2s")"
config "$W/in" "wal_zstd_level: 3"
printf '%-38s %s\n' "skipprd 2 threads, WAL zstd 3" "$(rate "$(median3 skipprd 2)")"
awk -v a="$t1" -v b="$t2" -v c="$t2s" 'BEGIN{printf "1 CPU -> 2 threads: %.2fx (validate: false %.2fx)\n", a/b, a/c}'

echo "-- gzip: the same tree, every object gzip -6 (MB/s of uncompressed bytes)"
rm -rf "$W/out" "$W/state" "$W/cp"
cp -r "$W/in" "$W/gz"
find "$W/gz" -type f -exec gzip -6 -n {} +
find "$W/gz" -type f -name '*.gz' | while read -r f; do mv "$f" "${f%.gz}"; done
mapfile -t gzfiles < <(find "$W/gz" -type f | sort)
gunz() { gzip -dc "${gzfiles[@]}" >/dev/null; }
tg=$(median3 gunz)
printf '%-38s %s\n' "gzip -dc >/dev/null (one core)" "$(rate "$tg")"
config "$W/gz" "validate: true"
tz1=$(median3 skipprd 1)
printf '%-38s %s\n' "skipprd 1 thread, 1 CPU" "$(rate "$tz1")"
tz2=$(median3 skipprd 2)
printf '%-38s %s\n' "skipprd 2 threads" "$(rate "$tz2")"
awk -v g="$tg" -v a="$tz1" -v b="$tz2" 'BEGIN{printf "per worker thread vs gzip -dc: %.2fx (1 thread), %.2fx (2 threads)\n", g/a, g/(b*2)}'

if [ "$QUICK" = 0 ]; then
    echo
    echo "== 4. growth: bytes, objects, partitions"
    python3 bench/scale.py
fi

echo
echo "== 5. streaming plugins against local servers, median of 3"
python3 bench/plugins.py --records 200000 --runs 3
echo
echo "== 5b. MQTT source live, broker at its defaults, median of 3"
python3 bench/mqtt_rate.py --runs 3
echo
echo "== 6. buffer v2: a backfill with 5,600 partition-days, file -> file"
python3 bench/buffer.py --mb 300 --days 2 --tenants 400 --runs 3
echo "-- the same volume in 42 partition-days of about 7 MB (3 tenants)"
python3 bench/buffer.py --mb 300 --days 2 --tenants 3 --runs 3
echo
echo "== 6b. buffer v2: file -> S3 (s3rver), partitions mostly over a part"
python3 bench/buffer.py --mb 300 --days 2 --tenants 3 --runs 3 --sink s3

echo
echo "== 6c. skipprd verify next to the copy it checks, file -> file"
python3 bench/verify.py --mb "$([ "$QUICK" = 1 ] && echo 256 || echo 1024)"

if [ "$QUICK" = 0 ]; then
    echo
    echo "== 7. every crash point at its first, middle and last hit, 4x the suite's input"
    SKIPPR_CRASH_POINTS_SCALE=4 SKIPPRD=$PWD/build/runtime/skipprd \
        python3 tests/integration/test_crash_points.py
fi
