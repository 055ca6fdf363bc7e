#!/usr/bin/env bash
# Build every CMake build type (Release, RelWithDebInfo, Debug, MinSizeRel)
# with gcc and with clang. Warnings are errors in every one (-Werror is in
# the top-level CMakeLists.txt), so this fails on the first new warning that
# only one optimiser level or one compiler reports.
#   scripts/build-types.sh [OUT_DIR]     (default: build-types)
# SKIPPR_BUILD_TYPES_SKIP="gcc-RelWithDebInfo ..." leaves those out
# (scripts/test.sh: its first stage built that one already).
# Expects the packages of scripts/setup.sh to be installed.
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${1:-build-types}
JOBS=$(nproc)
failed=()
for cc in gcc clang; do
    for type in Release RelWithDebInfo Debug MinSizeRel; do
        dir="$OUT/$cc-$type"
        log="$OUT/$cc-$type.log"
        if [[ " ${SKIPPR_BUILD_TYPES_SKIP:-} " == *" $cc-$type "* ]]; then
            echo "build-types: $cc $type skipped (built before)"
            continue
        fi
        mkdir -p "$OUT"
        if cmake -S . -B "$dir" -DCMAKE_BUILD_TYPE="$type" \
                -DCMAKE_C_COMPILER="$cc" >"$log" 2>&1 &&
            cmake --build "$dir" -j"$JOBS" >>"$log" 2>&1; then
            echo "build-types: $cc $type ok"
        else
            echo "build-types: $cc $type FAILED; the errors:"
            grep -E "error|warning" "$log" | head -20 || tail -20 "$log"
            failed+=("$cc-$type")
        fi
    done
done
if ((${#failed[@]})); then
    echo "build-types: failed: ${failed[*]}"
    exit 1
fi
