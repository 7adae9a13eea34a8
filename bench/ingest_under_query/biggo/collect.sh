#!/bin/bash
# Collects N (default 30) heap profiles of ~75 KB (gzip) from a real Go
# program (main.go: allocations from 16,384 distinct stacks, MemProfileRate
# 1) into DIR, for load.mjs's PD_IUQ_PROFILES: the issue's load was 100
# pushes/s at 7.4 MB/s, i.e. profiles of ~74 KB; testdata's are 3.5 KB.
#   bench/ingest_under_query/biggo/collect.sh DIR [N]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out=$1; n=${2:-30}
mkdir -p "$out"
tmp=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$tmp"' EXIT
cp "$here/main.go" "$tmp/"
printf 'module biggo\n\ngo 1.19\n' >"$tmp/go.mod"
(cd "$tmp" && HOME=$tmp GOPATH=$tmp/gopath GOCACHE=$tmp/cache GOFLAGS=-mod=mod go build -o biggo .)
"$tmp/biggo" &
sleep 8
for i in $(seq -w 1 "$n"); do
    curl -sf -o "$out/heap-$i.pb.gz" "http://127.0.0.1:21031/debug/pprof/heap"
    sleep 0.3
done
ls -la "$out" | awk '/heap-/ {s += $5; n++} END {printf "%d profiles, %.1f KB each on average\n", n, s / n / 1024}'
