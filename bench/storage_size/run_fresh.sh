#!/bin/bash
# Tiny series on fresh real data (issue 27 item 4): collects mutex, block,
# threadcreate and goroutine series of bench/storage_size/workload (two
# instances, 1 s and 10 s scrapes; collect_fresh.sh) unless OUT/fresh exists,
# then for each dataset (Go version x instance x interval) writes the blocks
# (bench_storage_size --verify: every profile read back equal) and prints
# each series against `zstd -19 --long` of the whole series ("SERIES" lines:
# B/profile of zstd, of profd in the block shared by the dataset's series,
# and of profd alone in a block).
#
#   bench/storage_size/run_fresh.sh [BUILD_DIR=build] [N1=480] [N10=48] [-- bench args]
#
# GO=/usr/lib/go-1.NN/bin/go collects with another Go (OUT gets a directory
# per Go version). Defaults take ~8 minutes of collection, then ~1 minute.
set -euo pipefail
cd "$(dirname "$0")/../.."
B=${1:-build}; N1=${2:-480}; N10=${3:-48}
shift $(( $# < 3 ? $# : 3 )); [ "${1:-}" = -- ] && shift
OUT=${OUT:-bench/out/storage_size/fresh}
cmake --build "$B" --target bench_storage_size -j2 >/dev/null
gv=$("${GO:-go}" env GOVERSION)
ls -d "$OUT/$gv-"* >/dev/null 2>&1 || bench/storage_size/collect_fresh.sh "$OUT" "$N1" "$N10"
echo "machine: $(nproc) cores, $(awk -F': ' '/model name/{print $2; exit}' /proc/cpuinfo), load $(cut -d' ' -f1-3 /proc/loadavg)"
rc=0
for d in "$OUT"/*/; do
    name=$(basename "$d")
    rm -rf "bench/out/storage_size/blocks-fresh"
    log=$("$B"/tests/unit/storage/bench_storage_size "$d" bench/out/storage_size/blocks-fresh --verify "$@" 2>&1) || rc=1
    grep -E '^verify:' <<<"$log" | tail -1 | sed "s|^|$name |"
    grep -E '^SERIES' <<<"$log" | sed "s|^SERIES|$name|"
done
exit $rc
