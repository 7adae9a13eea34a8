#!/bin/bash
# Fleet bench (issue 14): profd scraping N targets x 7 profile types
# (allocs, block, goroutine, heap, mutex, threadcreate, cpu) every 10 s for
# MINUTES, against bench/fleet/loadgen.mjs (one node process, N listeners on
# 127.0.0.1:30000.., real Go profiles from /work/shared/testdata).
#
#   bench/fleet/run.sh [MINUTES=10] [N=1000] [PROFD=build/profd] [PROFD_FLAGS...]
#
# Prints a row per minute (profd's CPU % of one core over that minute, RSS,
# profiles stored, load average) and a summary over the run minus the first
# 30 s (warm-up): scrapes seen by the targets, missed slots, lateness
# p50/p99/max against each series' schedule (loadgen.mjs explains), profd's
# CPU % of one core and peak RSS, and profd's own scrape outcomes.
# Ports: targets 30000..30000+N-1, profd 21351, loadgen control 21352.
set -euo pipefail
cd "$(dirname "$0")/../.."
MIN=${1:-10}
N=${2:-1000}
PROFD=$(realpath "${3:-build/profd}")
TESTDATA=${PD_TESTDATA:-/work/shared/testdata}/pprof/go-demo-once
BASE=30000 PPORT=21351 CPORT=21352
tmp=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$tmp"' EXIT

if ss -ltnH | awk '{print $4}' | grep -qE "^127\.0\.0\.1:(30[0-9]{3}|2135[12])$"; then
    echo "run.sh: a port in $BASE.. or $PPORT/$CPORT is in use" >&2; exit 1
fi
ulimit -n 65536 2>/dev/null || ulimit -n "$(ulimit -Hn)"
node bench/fleet/loadgen.mjs "$TESTDATA" $BASE "$N" $CPORT >"$tmp/loadgen.log" 2>&1 &
for _ in $(seq 100); do grep -q targets "$tmp/loadgen.log" && break; sleep 0.2; done
grep -q targets "$tmp/loadgen.log" || { cat "$tmp/loadgen.log" >&2; exit 1; }
{
    echo "global: {scrape_interval: 10s, scrape_timeout: 10s}"
    echo "scrape_configs:"
    echo "  - job_name: fleet"
    echo "    static_configs:"
    echo "      - targets:"
    for i in $(seq 0 $((N - 1))); do echo "          - 127.0.0.1:$((BASE + i))"; done
} >"$tmp/profd.yaml"
"$PROFD" serve --config.file="$tmp/profd.yaml" --storage.path="$tmp/data" \
    --web.listen-address=127.0.0.1:$PPORT --log.level=warn "${@:4}" 2>"$tmp/profd.log" &
pid=$!
start=$(date +%s.%N)
start_ms=$(date +%s%3N)
hz=$(getconf CLK_TCK)
cpu_s() { awk -v hz="$hz" '{printf "%.2f", ($14+$15)/hz}' /proc/$pid/stat; }
echo "machine: $(nproc) cores, $(awk -F': ' '/model name/{print $2; exit}' /proc/cpuinfo); load at start: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "profd: $PROFD  targets: $N x 7 types at 10s"
printf '%4s %9s %10s %8s %8s\n' min profiles cpu_%core rss_MiB load1
prev_cpu=0 prev_t=$start peak_rss=0 cpu_warm=""
for m in $(seq 1 "$MIN"); do
    if [ "$m" = 1 ]; then
        sleep 30; cpu_warm=$(cpu_s); t_warm=$(date +%s.%N); warm_ms=$(date +%s%3N)
        sleep "$(awk -v s="$start" -v n="$(date +%s.%N)" 'BEGIN{d=s+60-n; printf "%.3f", (d>0?d:0)}')"
    else
        sleep "$(awk -v s="$start" -v m="$m" -v n="$(date +%s.%N)" 'BEGIN{d=s+60*m-n; printf "%.3f", (d>0?d:0)}')"
    fi
    kill -0 "$pid" 2>/dev/null || { echo "profd exited; its log:" >&2; tail -20 "$tmp/profd.log" >&2; exit 1; }
    now=$(date +%s.%N); c=$(cpu_s)
    rss=$(awk '/VmRSS/{printf "%.1f", $2/1024}' /proc/$pid/status)
    peak_rss=$(awk -v a="$peak_rss" -v b="$rss" 'BEGIN{print (b>a)?b:a}')
    profiles=$(curl -fsS "http://127.0.0.1:$PPORT/metrics" | awk '/^profd_storage_profiles /{print $2}')
    printf '%4s %9s %10s %8s %8s\n' "$m" "${profiles:-?}" \
        "$(awk -v c="$c" -v p="$prev_cpu" -v n="$now" -v t="$prev_t" 'BEGIN{printf "%.1f", 100*(c-p)/(n-t)}')" \
        "$rss" "$(cut -d' ' -f1 /proc/loadavg)"
    prev_cpu=$c prev_t=$now
done
end_ms=$(date +%s%3N); c=$(cpu_s); now=$(date +%s.%N)
echo "window: from 30 s after start to the end ($(( (end_ms - warm_ms) / 1000 )) s)"
echo "targets saw: $(curl -fsS "http://127.0.0.1:$CPORT/stats?from=$warm_ms&to=$end_ms")"
echo "profd cpu: $(awk -v c="$c" -v p="$cpu_warm" -v n="$now" -v t="$t_warm" 'BEGIN{printf "%.1f", 100*(c-p)/(n-t)}') % of one core; peak rss ${peak_rss} MiB; load at end: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "profd scrape outcomes: $(curl -fsS "http://127.0.0.1:$PPORT/metrics" |
    awk '/^profd_scrapes_total\{/{match($0,/outcome="[^"]*"/); o=substr($0,RSTART+9,RLENGTH-10); n[o]+=$2}
         END{for(o in n) printf "%s=%d ", o, n[o]}')"
echo "warnings in profd's log: $(grep -c 'level=warn\|level=error' "$tmp/profd.log" || true)"
