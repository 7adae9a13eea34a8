#!/bin/bash
# Collects real profile series from the real demo target (examples/demo, a Go
# program with net/http/pprof) for the storage size benchmark.
#
#   bench/storage_size/collect.sh OUT_DIR [N=700] [INTERVAL_S=0.5] [CPU_SECONDS=1]
#
# Builds examples/demo and bench/storage_size/loadgen with `go build` in a
# temporary GOCACHE, starts the demo on a random loopback port and keeps it
# busy with loadgen (LOAD_WORKERS clients, LOAD_RATE requests/s of a mix of
# net/http + pprof requests: see loadgen/main.go; LOAD_RATE=0: no load), then scrapes
# /debug/pprof/{heap,allocs,goroutine} every INTERVAL_S seconds (one curl loop
# per type, in parallel) until each has N consecutive profiles, while a fourth
# loop takes cpu profiles (/debug/pprof/profile?seconds=CPU_SECONDS) back to
# back until it also has N (and the others are done).
# TYPES (default "heap allocs goroutine cpu"): which of heap, allocs,
# goroutine, mutex, block, threadcreate (each scraped every INTERVAL_S) and cpu
# to collect; e.g. TYPES="mutex block threadcreate" for the tiny cumulative ones.
# Files: OUT_DIR/<type>/NNNNNN.pb.gz, exactly as served.
set -euo pipefail
cd "$(dirname "$0")/../.."
OUT=${1:?usage: collect.sh OUT_DIR [N] [INTERVAL_S] [CPU_SECONDS]}
N=${2:-700}
IV=${3:-0.5}
CPUS=${4:-1}
tmp=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$tmp"' EXIT
export GOCACHE="${GOCACHE:-$tmp/gocache}" GOPATH="$tmp/gopath" HOME="${HOME:-$tmp}"
(cd examples/demo && go build -o "$tmp/demo" .)
(cd bench/storage_size/loadgen && go build -o "$tmp/loadgen" .)
port=${PORT:-$((20000 + RANDOM % 10000))} # PORT: a fixed loopback port
"$tmp/demo" -listen=127.0.0.1:$port >/dev/null 2>&1 &
for _ in $(seq 50); do curl -fsS -o /dev/null "http://127.0.0.1:$port/debug/pprof/" 2>/dev/null && break; sleep 0.1; done
# (an `if`, not `[ ] || cmd &`: that backgrounds a subshell, and the EXIT trap
# killed the subshell but left loadgen running)
if [ "${LOAD_RATE:-150}" != 0 ]; then
    "$tmp/loadgen" -target=http://127.0.0.1:$port \
        -workers=${LOAD_WORKERS:-8} -rate=${LOAD_RATE:-150} >/dev/null 2>&1 &
fi
TYPES=${TYPES:-heap allocs goroutine cpu}
sleep 2 # let the demo warm up
scrape() { # type path
    local t=$1 p=$2 i
    for i in $(seq -f %06g 1 "$N"); do
        curl -fsS --retry 3 -o "$OUT/$t/$i.pb.gz" "http://127.0.0.1:$port$p"
        sleep "$IV"
    done
}
pids=()
for t in $TYPES; do
    mkdir -p "$OUT/$t"
    case $t in
    heap | allocs | goroutine | mutex | block | threadcreate) scrape "$t" "/debug/pprof/$t" & pids+=($!) ;;
    cpu) ;;
    *) echo "collect.sh: unknown type $t in TYPES" >&2; exit 2 ;;
    esac
done
alive() { local p; for p in "${pids[@]}"; do kill -0 "$p" 2>/dev/null && return 0; done; return 1; }
if [[ " $TYPES " == *" cpu "* ]]; then
    (i=0; while [ $i -lt "$N" ] || alive; do
        i=$((i + 1)); curl -fsS -o "$OUT/cpu/$(printf %06d $i).pb.gz" \
            "http://127.0.0.1:$port/debug/pprof/profile?seconds=$CPUS"
    done) & pids+=($!)
fi
wait "${pids[@]}"
for t in $TYPES; do echo "$t: $(ls "$OUT/$t" | wc -l) profiles"; done
