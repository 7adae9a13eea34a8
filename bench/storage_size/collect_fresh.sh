#!/bin/bash
# Collects *fresh* tiny profile series for the storage size benchmark (issue 27
# item 4): not from examples/demo (what the tiny-profile encoding was tuned on)
# but from bench/storage_size/workload, built with the Go toolchain $GO
# (default: `go` on PATH, Debian's golang-go 1.19; run_fresh.sh --install-go
# 1.22 installs a newer one from bookworm-backports). GOTOOLCHAIN=local: the
# toolchain given builds, none is downloaded. Two instances with other
# seeds and profile rates (a: every mutex and block event; b: 1 in 5 mutex
# events, block events of 10 µs and more) are scraped for mutex, block,
# threadcreate and goroutine with curl, every 1 s (N1 profiles) and every 10 s
# (N10 profiles) at once, on a fixed schedule (a scrape starts every interval,
# whatever the previous one took).
#
#   bench/storage_size/collect_fresh.sh OUT_DIR [N1=480] [N10=48]
#
# Files: OUT_DIR/<go version>-<instance>-<interval>/<type>/NNNNNN.pb.gz, exactly
# as served; the profile's time_nanos is the scrape's real time (what the
# benchmark uses as timestamp). Defaults take 8 minutes.
set -euo pipefail
cd "$(dirname "$0")/../.."
OUT=${1:?usage: collect_fresh.sh OUT_DIR [N1] [N10]}
N1=${2:-480}
N10=${3:-48}
GO=${GO:-go}
export GOTOOLCHAIN=local
tmp=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$tmp"' EXIT
export GOCACHE="${GOCACHE:-$tmp/gocache}" GOPATH="$tmp/gopath" HOME="${HOME:-$tmp}" GOFLAGS=-mod=mod
gv=$("$GO" env GOVERSION)
(cd bench/storage_size/workload && "$GO" build -o "$tmp/workload" .)
declare -A addr
start() { # name args...
    local n=$1; shift
    "$tmp/workload" -listen=127.0.0.1:0 "$@" >"$tmp/$n.addr" 2>"$tmp/$n.log" &
    for _ in $(seq 100); do [ -s "$tmp/$n.addr" ] && break; sleep 0.1; done
    addr[$n]=$(head -1 "$tmp/$n.addr")
    [ -n "${addr[$n]}" ] || { echo "collect_fresh.sh: workload $n did not start" >&2; cat "$tmp/$n.log" >&2; exit 1; }
}
start a -seed=1 -mutexfrac=1 -blockrate=1 -workers=6 -rate=40
start b -seed=2 -mutexfrac=5 -blockrate=10000 -workers=4 -rate=25
sleep 3 # let them warm up
scrape() { # dir url n interval
    local d=$1 url=$2 n=$3 iv=$4 i t0 next
    mkdir -p "$d"
    t0=$(date +%s.%N)
    for i in $(seq 1 "$n"); do
        curl -fsS --retry 3 -o "$d/$(printf %06d "$i").pb.gz" "$url"
        next=$(awk -v a="$t0" -v i="$i" -v v="$iv" -v now="$(date +%s.%N)" 'BEGIN { printf "%.3f", a + i * v - now }')
        [[ $next == -* ]] || sleep "$next"
    done
}
pids=()
for inst in a b; do
    for iv in 1 10; do
        n=$N1; [ "$iv" = 10 ] && n=$N10
        for t in mutex block threadcreate goroutine; do
            scrape "$OUT/$gv-$inst-${iv}s/$t" "http://${addr[$inst]}/debug/pprof/$t" "$n" "$iv" &
            pids+=($!)
        done
    done
done
wait "${pids[@]}"
for d in "$OUT"/*/; do for t in "$d"*/; do echo "$t: $(ls "$t" | wc -l) profiles"; done; done
