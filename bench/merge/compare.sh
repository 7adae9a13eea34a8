#!/bin/bash
# Side by side on the SAME stored data: two profd binaries (e.g. before and
# after a change) serve one storage directory in turn, and `go tool pprof
# -proto` merges the very same files. Run by hand (not part of ctest):
#
#   bench/merge/compare.sh FILES_DIR DATA_DIR PROFD_A PROFD_B [NS] [RUNS]
#
# FILES_DIR holds heap/*.pb.gz and cpu/*.pb.gz (e.g. collected as run.sh
# does); DATA_DIR is created on first use by pushing every file of both
# kinds to PROFD_A (profefe API, created_at 1700000001, 2, ...), then reused.
# Per binary and N: median latency of RUNS requests, CPU ms per request
# (/proc/PID/stat), VmHWM after the requests; pprof: median of 3 runs of
# /usr/bin/time (elapsed, user+sys, max RSS). Also report=top/flamegraph of
# the largest N.
set -euo pipefail
FILES=$(realpath "$1") DATA=$2 A=$(realpath "$3") B=$(realpath "$4")
NS=${5:-"10 100 1000"} RUNS=${6:-10}
port=$((30000 + RANDOM % 10000))
T0=1700000000
hz=$(getconf CLK_TCK)
MAXN=0
for n in $NS; do ((n > MAXN)) && MAXN=$n; done
pid=
stop() {
    if [ -n "$pid" ]; then
        kill "$pid" 2>/dev/null || true
        wait "$pid" 2>/dev/null || true
    fi
    pid=
}
trap stop EXIT
start() {
    "$1" serve --storage.path="$DATA" --web.listen-address=127.0.0.1:$port --log.level=warn \
        >/dev/null 2>>"$DATA.log" &
    pid=$!
    for _ in $(seq 600); do curl -fsS -o /dev/null "http://127.0.0.1:$port/-/ready" 2>/dev/null && return; sleep 0.2; done
    echo "profd did not start" >&2
    exit 1
}
url() { echo "http://127.0.0.1:$port/api/v1/query?mode=merge&query=%7Bservice%3D%22bench%22%2C__name__%3D%22$1%22%7D&from=$((T0 + 1))&to=$((T0 + $2))&report=$3"; }
# req URL -> "median_ms cpu_ms peak_MiB"
req() {
    curl -fsS -o /dev/null "$1"
    echo 5 >/proc/$pid/clear_refs 2>/dev/null || true
    local c0 c1 lat
    c0=$(awk '{print $14 + $15}' /proc/$pid/stat)
    lat=$(for _ in $(seq "$RUNS"); do curl -fsS -o /dev/null -w '%{time_total}\n' "$1"; done | sort -g |
        awk '{a[NR]=$1} END{print a[int((NR+1)/2)]}')
    c1=$(awk '{print $14 + $15}' /proc/$pid/stat)
    awk -v l="$lat" -v c=$((c1 - c0)) -v hz="$hz" -v r="$RUNS" -v h="$(awk '/VmHWM/{print $2}' /proc/$pid/status)" \
        'BEGIN{printf "%.1f %.1f %.1f", l*1000, c*1000/hz/r, h/1024}'
}
if [ ! -d "$DATA" ]; then
    start "$A"
    echo "pushing $FILES/{heap,cpu} to $DATA..." >&2
    for kind in heap cpu; do
        i=0
        for f in "$FILES/$kind"/*.pb.gz; do
            i=$((i + 1))
            ((i > MAXN)) && break
            curl -fsS -o /dev/null --data-binary @"$f" \
                "http://127.0.0.1:$port/api/0/profiles?service=bench&type=$kind&instance_id=a&created_at=$((T0 + i))"
        done
    done
    stop
fi
echo "machine: $(nproc) cores,$(awk -F: '/model name/{print $2; exit}' /proc/cpuinfo); load: $(cut -d' ' -f1-3 /proc/loadavg)"
printf '%-5s %6s | %-30s | %-30s | %-22s\n' kind N "A: ms cpu_ms peakMiB" "B: ms cpu_ms peakMiB" "pprof: ms cpu_ms peakMiB"
declare -A res
for bin in A B; do
    start "${!bin}"
    for kind in heap cpu; do
        for n in $NS; do res[$bin.$kind.$n]=$(req "$(url $kind $n proto)"); done
        for rep in top flamegraph; do res[$bin.$kind.$rep]=$(req "$(url $kind $MAXN $rep)"); done
    done
    stop
done
for kind in heap cpu; do
    for n in $NS; do
        all=("$FILES/$kind"/*.pb.gz)
        files=("${all[@]:0:n}")
        g=$(for _ in 1 2 3; do
            /usr/bin/time -f '%e %U %S %M' -o /tmp/compare-time.$$ go tool pprof -proto "${files[@]}" >/dev/null 2>&1
            cat /tmp/compare-time.$$
        done | awk '{print $1*1000, ($2+$3)*1000, $4/1024}' | sort -g | awk '{a[NR]=$0} END{print a[int((NR+1)/2)]}')
        printf '%-5s %6d | %-30s | %-30s | %-22s\n' "$kind" "$n" "${res[A.$kind.$n]}" "${res[B.$kind.$n]}" "$g"
    done
    for rep in top flamegraph; do
        printf '%-5s %6s | %-30s | %-30s |\n' "$kind" "$rep" "${res[A.$kind.$rep]}" "${res[B.$kind.$rep]}"
    done
done
rm -f /tmp/compare-time.$$
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
