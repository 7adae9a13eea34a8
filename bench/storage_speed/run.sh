#!/bin/bash
# Storage speed benchmark (bench_storage_speed.c): append throughput vs raw
# write(2), head cut and compaction time, query_range latency over S series x
# P profiles (block and head), single-profile read latency, WAL replay of
# ~W MB vs cat, memory per series and per head profile. Uses the real
# profiles of /work/shared/testdata/pprof and, when present, the series
# collected by bench/storage_size/collect.sh (bench/out/storage_size/data).
#
#   bench/storage_speed/run.sh [BUILD_DIR=build] [extra flags of bench_storage_speed]
#
# Defaults: --series 1000 --points 720 --append-n 50000 --wal-mb 1024
# --cut-instances 4 --mem-series 10000 --reps 3 (about 10 min on 2 cores).
# Scale down e.g. with: --series 100 --wal-mb 128 --reps 1.
set -euo pipefail
cd "$(dirname "$0")/../.."
B=${1:-build}; shift || true
cmake --build "$B" --target bench_storage_speed -j2 >/dev/null
D=bench/out/storage_size/data
DATA=(); [ -d "$D/heap" ] && DATA=(--data "$D")
mkdir -p bench/out/storage_speed
echo "machine: $(nproc) cores, $(awk -F': ' '/model name/{print $2; exit}' /proc/cpuinfo), $(free -g | awk '/Mem:/{print $2}') GiB RAM, $(df -h bench/out | awk 'NR==2{print $1}')"
echo "command: $B/tests/unit/storage/bench_storage_speed --out bench/out/storage_speed/work --testdata /work/shared/testdata/pprof ${DATA[*]} $*"
time "$B"/tests/unit/storage/bench_storage_speed --out bench/out/storage_speed/work \
    --testdata /work/shared/testdata/pprof "${DATA[@]}" "$@"
