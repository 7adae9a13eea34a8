#!/bin/bash
# Measures what continuous scraping of the example costs: disk used by the
# storage and CPU time used by profd after N minutes of scraping the example
# Go program (examples/demo) with examples/profd.yaml's settings, against the
# baseline of keeping every scraped body as served (sum of the gzip bodies).
#
#   bench/scrape_footprint.sh [MINUTES=5] [PROFD=build/profd]
#
# Prints: minutes, profiles stored, storage bytes, bytes of the bodies as
# served (from /metrics profd_ingested_bytes_total), ratio, profd CPU seconds,
# CPU % of one core, RSS.
set -euo pipefail
cd "$(dirname "$0")/.."
MIN=${1:-5}
PROFD=$(realpath "${2:-build/profd}")
tmp=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$tmp"' EXIT

export GOCACHE="$tmp/gocache" GOPATH="$tmp/gopath" HOME="${HOME:-$tmp}"
(cd examples/demo && go build -o "$tmp/demo" .)
port_demo=$((20000 + RANDOM % 10000)); port_profd=$((port_demo + 1))
"$tmp/demo" -listen=127.0.0.1:$port_demo >/dev/null 2>&1 &
sed -e "s/127.0.0.1:6060/127.0.0.1:$port_demo/" examples/profd.yaml >"$tmp/profd.yaml"
"$PROFD" serve --config.file="$tmp/profd.yaml" --storage.path="$tmp/data" \
    --web.listen-address=127.0.0.1:$port_profd --log.level=warn 2>"$tmp/profd.log" &
pid=$!
sleep $((MIN * 60))
metrics=$(curl -fsS "http://127.0.0.1:$port_profd/metrics")
profiles=$(awk '/^profd_storage_profiles /{print $2}' <<<"$metrics")
served=$(awk '/^profd_ingested_bytes_total/{s+=$2} END{printf "%d", s}' <<<"$metrics")
disk=$(du -sb "$tmp/data" | cut -f1)
read -r ut st <<<"$(awk '{print $14, $15}' /proc/$pid/stat)"
hz=$(getconf CLK_TCK)
cpu=$(awk -v u="$ut" -v s="$st" -v hz="$hz" 'BEGIN{printf "%.2f", (u+s)/hz}')
rss=$(awk '/VmRSS/{print $2*1024}' /proc/$pid/status)
echo "machine: $(nproc) cores, $(awk '/model name/{$1=$2=$3="";print;exit}' /proc/cpuinfo)"
echo "minutes=$MIN profiles=$profiles storage_bytes=$disk served_gzip_bytes=$served" \
     "ratio_storage_to_served=$(awk -v a="$disk" -v b="$served" 'BEGIN{if(b>0)printf "%.3f", a/b; else print "n/a"}')"
echo "profd_cpu_seconds=$cpu cpu_pct_of_one_core=$(awk -v c="$cpu" -v m="$MIN" 'BEGIN{printf "%.2f", 100*c/(m*60)}') rss_bytes=$rss"
