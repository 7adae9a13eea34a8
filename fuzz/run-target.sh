#!/bin/sh
# Runs one libFuzzer target for a few seconds on its seed corpus (ctest's
# fuzz_*_runs, issue 34 item 3): from the repository root (cwd), new inputs
# into OUT (never into fuzz/corpus/), crashes as OUT-crash-*. Fails when the
# target does not start, crashes, or executes no input.
# Usage: fuzz/run-target.sh FUZZER CORPUS_DIR OUT_DIR SECONDS
set -u
fuzzer=$1 corpus=$2 out=$3 secs=$4
[ -x "$fuzzer" ] || { echo "run-target: $fuzzer is not built"; exit 1; }
[ -d "$corpus" ] || { echo "run-target: no seed corpus $corpus"; exit 1; }
mkdir -p "$out"
log="$out.log"
"$fuzzer" -max_total_time="$secs" -rss_limit_mb=2048 -timeout=60 -print_final_stats=1 \
    -artifact_prefix="$out-" "$out" "$corpus" >"$log" 2>&1
rc=$?
runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
if [ "$rc" != 0 ] || [ -z "$runs" ] || [ "$runs" -eq 0 ]; then
    tail -n 60 "$log"
    echo "run-target: $(basename "$fuzzer") exit $rc, ${runs:-no} inputs executed (log $log)"
    exit 1
fi
echo "run-target: $(basename "$fuzzer"): $runs inputs in ${secs} s, seeds $(ls "$corpus" | wc -l), no crash"
