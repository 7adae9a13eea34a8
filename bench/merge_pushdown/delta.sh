#!/bin/bash
# Merge of deltas of cumulative profiles (issue 12 item 2), run by hand (not
# in ctest):
#
#   bench/merge_pushdown/delta.sh [BUILD_DIR=build]     env: N=858 RUNS=10
#
# N consecutive real heap profiles of Debian's prometheus 2.42 (scraping
# itself every second; collected over HTTP from /debug/pprof/heap one every
# ~20 ms, kept in bench/out/merge_pushdown/heap-prometheus as run.sh keeps
# them) are written as one block of one series at 10 s apart, marked as
# profd's scraper marks Go heap profiles scraped as served (__delta__="false":
# alloc_objects/alloc_space count since process start). Side by side over
# HTTP on the same block: the merge of the N as stored (delta=false: every
# profile summed) and the merge of their deltas (delta=true:
# pd_storage_aggregate_delta — per lifetime + the last profile - the
# baseline; every profile still decoded, two summed), wall and CPU; and the
# delta merge's samples against `go tool pprof -proto -base FIRST LAST` on
# the same files (go tool pprof -raw, normalized by normalize_raw.py).
# Ports 21160 (prometheus) and 21161 (profd), loopback only.
set -euo pipefail
cd "$(dirname "$0")/../.."
B=${1:-build}
N=${N:-858}
RUNS=${RUNS:-10}
PROFD=$(realpath "$B/profd")
MK=$(realpath "$B/tests/unit/storage/bench_mkblock")
OUT=bench/out/merge_pushdown
mkdir -p "$OUT/heap-prometheus"
H=$(realpath "$OUT/heap-prometheus")
tmp=$(mktemp -d)
cleanup() {
    kill $(jobs -p) 2>/dev/null || true
    wait 2>/dev/null || true
    rm -rf "$tmp"
}
trap cleanup EXIT
export GOCACHE="$tmp/gocache" GOPATH="$tmp/gopath" GOFLAGS=

if (($(ls "$H" | wc -l) < N)); then
    printf 'global: {scrape_interval: 1s}\nscrape_configs: [{job_name: self, static_configs: [{targets: ["127.0.0.1:21160"]}]}]\n' >"$tmp/prom.yml"
    prometheus --config.file="$tmp/prom.yml" --storage.tsdb.path="$tmp/prom" \
        --web.listen-address=127.0.0.1:21160 >/dev/null 2>&1 &
    for _ in $(seq 100); do curl -fsS -o /dev/null "http://127.0.0.1:21160/debug/pprof/" 2>/dev/null && break; sleep 0.1; done
    sleep 5
    echo "collecting $N heap profiles from prometheus ..." >&2
    rm -f "$H"/*
    for i in $(seq 1 "$N"); do
        curl -fsS -o "$(printf '%s/heap-%05d.pb.gz' "$H" "$i")" "http://127.0.0.1:21160/debug/pprof/heap"
        sleep 0.02
    done
    kill $(jobs -p) 2>/dev/null || true
fi
FILES=$(ls "$H"/*.pb.gz | head -n "$N")
FIRST=$(echo "$FILES" | head -n 1)
LAST=$(echo "$FILES" | tail -n 1)

now_ms=$(($(date +%s) * 1000))
T0=$((now_ms - 6 * 3600 * 1000))
mkdir -p "$tmp/d"
MKBLOCK_CUMULATIVE=1 "$MK" "$tmp/d" 1 "$N" "$T0" 10000 heap $FILES >/dev/null

hz=$(getconf CLK_TCK)
median() { sort -g | awk '{a[NR]=$1} END{print a[int((NR+1)/2)]}'; }
"$PROFD" serve --storage.path="$tmp/d" --web.listen-address=127.0.0.1:21161 --log.level=warn 2>>"$tmp/profd.log" &
pid=$!
for _ in $(seq 100); do curl -fsS -o /dev/null "http://127.0.0.1:21161/-/ready" 2>/dev/null && break; sleep 0.1; done
sleep 3
cpu_ticks() { awk '{print $14 + $15}' /proc/$pid/stat; }
profd_req() { # URL -> "median_ms cpu_ms_per_req"
    local url=$1 c0 c1 lat
    curl -fsS -o /dev/null "$url"
    c0=$(cpu_ticks)
    lat=$(for _ in $(seq "$RUNS"); do curl -fsS -o /dev/null -w '%{time_total}\n' "$url"; done | median)
    c1=$(cpu_ticks)
    awk -v l="$lat" -v c=$((c1 - c0)) -v hz="$hz" -v r="$RUNS" 'BEGIN{printf "%.1f %.1f", l*1000, c*1000/hz/r}'
}

echo "machine: $(nproc) cores,$(awk -F: '/model name/{print $2; exit}' /proc/cpuinfo), load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "profd: $PROFD ($(git log -1 --format=%h)); go: $(go version)"
from=$(((T0 - 1000) / 1000)); to=$(((T0 + N * 10000) / 1000 + 1))
q="%7Bjob%3D%22bench%22%2C__name__%3D%22heap%22%7D"
base="http://127.0.0.1:21161/api/v1/query?mode=merge&query=$q&from=$from&to=$to&report=proto"
hdr() { curl -fsS -D - -o "$2" "$1" | awk -v h="$3" 'tolower($1)==h":"{sub("\r","",$2); print $2}'; }
[ "$(hdr "$base&delta=true" "$tmp/delta.pb.gz" x-profd-delta)" = true ] || { echo "no deltas taken" >&2; exit 1; }
[ "$(hdr "$base&delta=false" "$tmp/raw.pb.gz" x-profd-delta)" = false ] || { echo "deltas taken for delta=false" >&2; exit 1; }
read -r rl rc <<<"$(profd_req "$base&delta=false")"
read -r dl dc <<<"$(profd_req "$base&delta=true")"
echo
echo "merge of $N consecutive heap profiles of prometheus (one series, one block, marked cumulative), over HTTP, median of $RUNS"
printf '   %-44s %10s %10s\n' "" "wall ms" "CPU ms"
printf '   %-44s %10.1f %10.1f\n' "delta=false (the $N profiles summed)" "$rl" "$rc"
printf '   %-44s %10.1f %10.1f\n' "delta=true (last - first, on stack ids)" "$dl" "$dc"
go tool pprof -proto -base "$FIRST" "$LAST" >"$tmp/base.pb.gz" 2>/dev/null
go tool pprof -raw "$tmp/delta.pb.gz" 2>/dev/null | python3 bench/merge_pushdown/normalize_raw.py >"$tmp/a.txt"
go tool pprof -raw "$tmp/base.pb.gz" 2>/dev/null | python3 bench/merge_pushdown/normalize_raw.py >"$tmp/b.txt"
if [ -s "$tmp/a.txt" ] && cmp -s "$tmp/a.txt" "$tmp/b.txt"; then
    echo "   delta=true samples = go tool pprof -proto -base FIRST LAST (-raw, normalized): $(wc -l <"$tmp/a.txt") distinct stacks"
else
    echo "   DELTA SAMPLES DIFFER from go tool pprof -base FIRST LAST:"; diff "$tmp/a.txt" "$tmp/b.txt" | head -8; exit 1
fi
