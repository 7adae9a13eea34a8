#!/bin/bash
# Measures what continuous scraping of the example costs: disk used by the
# storage and CPU time used by profd after N minutes of scraping the example
# Go program (examples/demo) with examples/profd.yaml's settings (every
# profile type every 5 s, cpu with a 4 s window), against the baseline of
# keeping every scraped body as served (sum of the gzip bodies).
#
#   bench/scrape_footprint.sh [MINUTES=5] [PROFD=build/profd] [PROFD_FLAGS...]
#
# Extra arguments go to profd serve, e.g. --storage.block-duration=2m to see
# the disk of blocks (cut, compacted) within the run instead of the WAL only.
#
# Prints one row per minute, then a summary:
#   min          minutes since profd started
#   profiles     profiles stored (/metrics profd_storage_profiles)
#   disk_B       bytes under --storage.path (du -sb: WAL segments, blocks, lock)
#   B/profile    disk_B / profiles
#   served_B     bytes of the bodies as served (profd_ingested_bytes_total)
#   disk/served  disk_B / served_B
#   cpu_s        profd's user+sys CPU seconds (/proc/PID/stat utime+stime)
#   cpu_%core    cpu_s / wall seconds, as a percentage of one core
#   rss_MiB      profd's resident set (/proc/PID/status VmRSS)
#   load1        the machine's 1-minute load average (others' work shows here)
# The demo is the burner of examples/demo, so it keeps one core partly busy
# itself; profd's CPU is measured for profd's process only.
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
    --web.listen-address=127.0.0.1:$port_profd --log.level=warn "${@:3}" 2>"$tmp/profd.log" &
pid=$!
start=$(date +%s.%N)
hz=$(getconf CLK_TCK)

echo "machine: $(nproc) cores, $(awk -F': ' '/model name/{print $2; exit}' /proc/cpuinfo)"
echo "profd: $PROFD  config: examples/profd.yaml (target on 127.0.0.1:$port_demo)"
printf '%4s %9s %11s %10s %11s %11s %8s %9s %8s %6s\n' \
    min profiles disk_B B/profile served_B disk/served cpu_s cpu_%core rss_MiB load1
row() {
    local m=$1 metrics profiles served disk ut st cpu rss wall
    kill -0 "$pid" 2>/dev/null || { echo "profd exited; its log:" >&2; cat "$tmp/profd.log" >&2; exit 1; }
    metrics=$(curl -fsS "http://127.0.0.1:$port_profd/metrics")
    profiles=$(awk '/^profd_storage_profiles /{print $2}' <<<"$metrics")
    served=$(awk '/^profd_ingested_bytes_total/{s+=$2} END{printf "%d", s}' <<<"$metrics")
    disk=$(du -sb "$tmp/data" | cut -f1)
    read -r ut st <<<"$(awk '{print $14, $15}' /proc/$pid/stat)"
    cpu=$(awk -v u="$ut" -v s="$st" -v hz="$hz" 'BEGIN{printf "%.2f", (u+s)/hz}')
    rss=$(awk '/VmRSS/{printf "%.1f", $2/1024}' /proc/$pid/status)
    wall=$(awk -v s="$start" -v n="$(date +%s.%N)" 'BEGIN{printf "%.1f", n-s}')
    printf '%4s %9s %11s %10s %11s %11s %8s %9s %8s %6s\n' "$m" "$profiles" "$disk" \
        "$(awk -v a="$disk" -v b="$profiles" 'BEGIN{if(b>0)printf "%.0f", a/b; else print "n/a"}')" \
        "$served" \
        "$(awk -v a="$disk" -v b="$served" 'BEGIN{if(b>0)printf "%.3f", a/b; else print "n/a"}')" \
        "$cpu" "$(awk -v c="$cpu" -v w="$wall" 'BEGIN{printf "%.2f", 100*c/w}')" "$rss" \
        "$(cut -d' ' -f1 /proc/loadavg)"
}
for m in $(seq 1 "$MIN"); do
    sleep_until=$(awk -v s="$start" -v m="$m" 'BEGIN{printf "%.3f", s + 60*m}')
    now=$(date +%s.%N)
    sleep "$(awk -v a="$sleep_until" -v b="$now" 'BEGIN{d=a-b; printf "%.3f", (d > 0 ? d : 0)}')"
    row "$m"
done
echo "scrape outcomes: $(curl -fsS "http://127.0.0.1:$port_profd/metrics" |
    awk '/^profd_scrapes_total\{/{match($0,/outcome="[^"]*"/); o=substr($0,RSTART+9,RLENGTH-10); n[o]+=$2}
         END{for(o in n) printf "%s=%d ", o, n[o]}')"
echo "warnings in profd's log: $(grep -c 'level=warn\|level=error' "$tmp/profd.log" || true)"
