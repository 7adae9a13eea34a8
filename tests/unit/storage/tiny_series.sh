#!/bin/bash
# storage_chunks_live: real tiny series for test_storage_chunks (issue 12
# item 6). Collects mutex, block, threadcreate, goroutine and heap profiles from
# the real Go demo (examples/demo, net/http/pprof, built with Debian's
# golang-go) with bench/storage_size/collect.sh — 25 per type, then the demo
# is restarted (a new process: its cumulative counters start again) and 25
# more are taken — and runs test_storage_chunks on them (PD_TINY_SERIES).
#
#   tiny_series.sh TEST_BINARY WORK_DIR
set -euo pipefail
T=${1:?usage: tiny_series.sh TEST_BINARY WORK_DIR}
W=${2:?usage: tiny_series.sh TEST_BINARY WORK_DIR}
SRC=$(cd "$(dirname "$0")/../../.." && pwd)
rm -rf "$W"
mkdir -p "$W/gocache"
export GOCACHE="$W/gocache" # one build of the demo for both runs
TYPES="mutex block threadcreate goroutine heap"
for run in 1 2; do
    LOAD_RATE=30 LOAD_WORKERS=2 TYPES="$TYPES" \
        "$SRC/bench/storage_size/collect.sh" "$W/run$run" 25 0.2 1 >/dev/null
done
for t in $TYPES; do # run 2 after run 1, in one series per type
    mkdir -p "$W/series/$t"
    i=0
    for f in "$W"/run1/$t/*.pb.gz "$W"/run2/$t/*.pb.gz; do
        i=$((i + 1))
        cp "$f" "$W/series/$t/$(printf %06d $i).pb.gz"
    done
    [ "$i" = 50 ] || { echo "tiny_series.sh: $t: $i profiles, want 50" >&2; exit 1; }
done
PD_TINY_SERIES="$W/series" "$T"
