#!/usr/bin/env bash
# Build the libFuzzer targets with clang (ASan + UBSan) and run each for a
# bounded time, seeded from the conformance data and the example configs. A crash fails the run and
# leaves its input under build-fuzz/crashes/.
#   scripts/fuzz.sh [SECONDS_PER_TARGET [RUNS_PER_TARGET [TARGET...]]]
# With RUNS, each target stops after that many executions (or SECONDS):
# the long run recorded in docs/RELIABILITY.md is
#   scripts/fuzz.sh 7200 10000000
# Targets run nproc at a time (SKIPPR_FUZZ_JOBS=N to change that).
set -euo pipefail
cd "$(dirname "$0")/.."
SECS=${1:-30}
RUNS=${2:-0}
shift $(( $# > 2 ? 2 : $# ))
TARGETS=${*:-fuzz_csv fuzz_convert fuzz_xml fuzz_json fuzz_time fuzz_escape fuzz_yaml fuzz_wal}
B=build-fuzz
CC=clang cmake -S . -B "$B" -DSKIPPR_FUZZ=ON -DSKIPPR_TESTS=OFF \
    -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
# shellcheck disable=SC2086
cmake --build "$B" -j"$(nproc)" --target $TARGETS >/dev/null
TESTDATA=${SKIPPR_TESTDATA:-../shared/testdata}
if [ ! -d "$TESTDATA" ]; then
    # The seeds come from ../shared; CI checks it out, a bare clone may not.
    if [ "${CI:-}" = true ] || [ "${CI:-}" = 1 ]; then
        echo "fuzz: $TESTDATA is missing (CI=true needs ../shared)" >&2
        exit 1
    fi
    echo "fuzz: $TESTDATA not found: seeding from the examples only"
fi
mkdir -p "$B/crashes"
rm -f "$B"/*.summary
for t in $TARGETS; do
    corpus="$B/corpus/$t"
    mkdir -p "$corpus"
    # Seeds: csv-spectrum's files and a few JSON test cases, each behind a
    # mode byte (see the targets' headers).
    if [ -d "$TESTDATA/csv-spectrum/csvs" ]; then
        for f in "$TESTDATA"/csv-spectrum/csvs/*.csv; do
            { printf '\001'; cat "$f"; } >"$corpus/$(basename "$f")"
        done
    fi
    if [ "$t" = fuzz_xml ]; then
        printf '\000<?xml version="1.0"?><r xmlns:p="u"><a b="1"><c>x&amp;y</c></a><!--c--><p:a/><a><![CDATA[z]]></a></r>' >"$corpus/seed1.xml"
        printf '\001<r><e><a>1</a><e/></e><x><e b="2"/></x></r>' >"$corpus/seed2.xml"
        printf '\002<!DOCTYPE r [<!ELEMENT r ANY>]><r><?pi x?><a d="q">t</a></r>' >"$corpus/seed3.xml"
    fi
    if [ -d "$TESTDATA/JSONTestSuite/test_parsing" ]; then
        for f in "$TESTDATA"/JSONTestSuite/test_parsing/y_object*.json; do
            { printf '\000'; cat "$f"; } >"$corpus/$(basename "$f")"
        done
        if [ "$t" = fuzz_json ]; then # every case: accepted, refused, either
            for f in "$TESTDATA"/JSONTestSuite/test_parsing/*.json; do
                { printf '\001'; cat "$f"; } >"$corpus/$(basename "$f")"
            done
        fi
    fi
    case "$t" in
    fuzz_yaml)
        find examples tests -name '*.yml' -size -64k | while read -r f; do
            cp "$f" "$corpus/$(echo "$f" | tr / _)"
        done ;;
    fuzz_time)
        for s in 2021-10-03T01:02:03Z '2021-10-03 01:02:03.5+02:00' \
                 2021-10-03t01:02z 1633222923 1633222923123 \
                 1633222923123456789 0000-01-01T00:00:00-01:00; do
            printf '%s' "$s" >"$corpus/$(printf '%s' "$s" | md5sum | cut -c1-8)"
        done ;;
    esac
done

# Each target is one process on one core: run nproc of them at a time.
# A crash stops the run once the targets already started have finished.
run_target() {
    local t=$1 rc=0
    UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
        "$B/tests/fuzz/$t" -max_total_time="$SECS" -runs="$([ "$RUNS" -gt 0 ] && echo "$RUNS" || echo -1)" \
        -max_len=65536 \
        -artifact_prefix="$B/crashes/$t-" -print_final_stats=1 \
        "$B/corpus/$t" >"$B/$t.log" 2>&1 || rc=$?
    {
        echo "== $t: ${SECS}s$([ "$RUNS" -gt 0 ] && echo " or $RUNS runs")"
        grep -E "stat::number_of_executed_units|stat::peak_rss_mb" "$B/$t.log" || true
        if [ "$rc" -ne 0 ]; then
            tail -40 "$B/$t.log"
            echo "fuzz: $t failed (exit $rc); the input is under $B/crashes/"
        fi
    } >"$B/$t.summary"
    return "$rc"
}
PARALLEL=${SKIPPR_FUZZ_JOBS:-$(nproc)}
failed=0
running=0
finish_one() {
    wait -n || failed=1
    running=$((running - 1))
}
for t in $TARGETS; do
    [ "$running" -lt "$PARALLEL" ] || finish_one
    [ "$failed" -eq 0 ] || break
    run_target "$t" &
    running=$((running + 1))
done
while [ "$running" -gt 0 ]; do finish_one; done
for t in $TARGETS; do
    [ ! -f "$B/$t.summary" ] || cat "$B/$t.summary"
done
exit "$failed"
