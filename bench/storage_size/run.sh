#!/bin/bash
# Storage size benchmark: collects real series from examples/demo (unless
# bench/out/storage_size/data exists), then prints bytes per profile of
# (a) gzip bodies as served, (b) conprof's raw-groups-of-12 + zstd -3,
# (d) zstd -19 --long of each whole series of raw profiles, (c) profd blocks, per type and all types in one block, with the split
# index / symbols / time / values, reading every profile back (--verify).
#
#   bench/storage_size/run.sh [BUILD_DIR=build] [N=700] [INTERVAL_S=1] [--sweep]
set -euo pipefail
cd "$(dirname "$0")/../.."
B=${1:-build}; N=${2:-700}; IV=${3:-1}; EXTRA=${4:-}
cmake --build "$B" --target bench_storage_size -j2 >/dev/null
D=bench/out/storage_size/data
[ -d "$D/heap" ] || bench/storage_size/collect.sh "$D" "$N" "$IV" 1
rm -rf bench/out/storage_size/blocks
echo "machine: $(nproc) cores, $(awk -F': ' '/model name/{print $2; exit}' /proc/cpuinfo)"
"$B"/tests/unit/storage/bench_storage_size "$D" bench/out/storage_size/blocks --verify $EXTRA
