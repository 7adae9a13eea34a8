#!/bin/bash
# A merge right after a restart (issue 35 item 3, "no slow window after a
# restart"): the same merge of a 10,000-series store of real heap profiles
# (10 per series, all in the head: 1000h blocks), timed
#   steady       before any restart (the head decomposed by the appends)
#   clean        the first request after /-/ready answers 200 following a
#                SIGTERM stop and a start
#   clean+60s    the same a minute later
#   kill9        the first request after /-/ready answers 200 following a
#                kill -9 and a start
#   kill9+60s    the same a minute later
# and, for each start, the time from spawn to /-/ready 200 and the gauge
# profd_storage_head_wal_only_profiles at that moment (0: nothing is read from
# the WAL by merges any more). Goal: clean and kill9 within 1.5x of their
# +60s. Run by hand (not part of ctest):
#
#   [DELTA=false] bench/startup/restart.sh PROFD [SERIES=10000] [PER=10] [RUNS=3]
#
# DELTA=false merges the stored counters (delta=false: a plain sum, where the
# head groups' sums apply to every series; the default delta=true sums Go's
# cumulative alloc_* as deltas, which read 2 profiles per series, not sums).
#
# Profiles: ../shared/testdata/pprof/go-demo-series/heap-*.pb.gz (30 real Go
# heap profiles, cycled), pushed through profefe's API (curl, 4 connections).
set -euo pipefail
PROFD=$(realpath "${1:-build/profd}") SERIES=${2:-10000} PER=${3:-10} RUNS=${4:-3}
here=$(cd "$(dirname "$0")" && pwd)
TESTDATA=${PD_TESTDATA:-$here/../../../shared/testdata}
tmp=$(mktemp -d)
port=$((30000 + RANDOM % 10000))
base=http://127.0.0.1:$port
pid=
cleanup() {
    [ -n "$pid" ] && { kill -9 "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; }
    rm -rf "$tmp"
}
trap cleanup EXIT
now_ms() { date +%s%3N; }
start() {
    local t0
    t0=$(now_ms)
    "$PROFD" serve --storage.path="$tmp/data" --web.listen-address=127.0.0.1:$port \
        --log.level=info --storage.retention.time=100y --storage.block-duration=1000h \
        2>>"$tmp/profd.log" &
    pid=$!
    until curl -fsS -o /dev/null "$base/-/ready" 2>/dev/null; do
        kill -0 "$pid" 2>/dev/null || { tail "$tmp/profd.log"; exit 1; }
        sleep 0.05
    done
    ready_ms=$(($(now_ms) - t0))
    wal_only=$(curl -fsS "$base/metrics" | awk '/^profd_storage_head_wal_only_profiles /{print $2}')
}
T0=$(($(date +%s) - PER * 60 - 120))
q="%7Bservice%3D%22big%22%2C__name__%3D%22heap%22%7D"
url="$base/api/v1/query?mode=merge&query=$q&from=$T0&to=$((T0 + PER * 60))&report=proto${DELTA:+&delta=$DELTA}"
merge_s() { curl -fsS -o "$tmp/$1.pb.gz" -w '%{time_total}\n' "$url"; }
median() { sort -g | awk '{a[NR]=$1} END{print a[int((NR+1)/2)]}'; }

echo "machine: $(nproc) cores, $(awk -F': ' '/model name/{print $2; exit}' /proc/cpuinfo); load: $(cut -d' ' -f1-3 /proc/loadavg)"
start
mapfile -t src < <(ls "$TESTDATA"/pprof/go-demo-series/heap-*.pb.gz)
for c in 0 1 2 3; do
    : >"$tmp/push$c.curl"
    first=1
    for ((i = c; i < SERIES; i += 4)); do
        for ((j = 0; j < PER; j++)); do
            f=${src[$(((i * PER + j) % ${#src[@]}))]}
            ((first)) || echo next >>"$tmp/push$c.curl"
            first=0
            printf 'url = "%s/api/0/profiles?service=big&type=heap&instance_id=i%d&created_at=%d"\ndata-binary = "@%s"\nheader = "Content-Type: application/octet-stream"\noutput = "/dev/null"\nfail\n' \
                "$base" "$i" $((T0 + 30 + j * 60)) "$f" >>"$tmp/push$c.curl"
        done
    done
done
t0=$(now_ms)
for c in 0 1 2 3; do curl -sS -K "$tmp/push$c.curl" & done
wait %2 %3 %4 %5 2>/dev/null || wait
echo "pushed $((SERIES * PER)) profiles ($SERIES series x $PER) in $(($(now_ms) - t0)) ms; load $(cut -d' ' -f1-3 /proc/loadavg)"
n=$(curl -fsS "$base/api/v1/query_range?query=$q&from=$T0&to=$((T0 + PER * 60))" | jq '[.data[].timestamps | length] | add')
[ "$n" = "$((SERIES * PER))" ] || { echo "stored $n profiles, want $((SERIES * PER))" >&2; exit 1; }
steady=$(for _ in $(seq "$RUNS"); do merge_s steady; done | median)
printf '%-10s %9s %9s %12s\n' when merge_s ready_ms wal_only@ready
printf '%-10s %9.3f %9s %12s\n' steady "$steady" - -
for how in clean kill9; do
    if [ $how = clean ]; then
        t0=$(now_ms); kill -TERM "$pid"; wait "$pid" || true
        stop_ms=$(($(now_ms) - t0))
        echo "  head snapshot after the clean stop: $(stat -c %s "$tmp/data/head.snapshot" 2>/dev/null || echo none) bytes"
    else
        kill -9 "$pid"; wait "$pid" 2>/dev/null || true
        stop_ms=-
    fi
    pid=
    start
    first=$(merge_s "$how")
    printf '%-10s %9.3f %9d %12s   (stop took %s ms; load %s)\n' "$how" "$first" "$ready_ms" "$wal_only" "$stop_ms" "$(cut -d' ' -f1-3 /proc/loadavg)"
    sleep 60
    later=$(for _ in $(seq "$RUNS"); do merge_s "$how-later"; done | median)
    printf '%-10s %9.3f %9s %12s   ratio first/later %.2fx (goal <= 1.5x)\n' "$how+60s" "$later" - \
        "$(curl -fsS "$base/metrics" | awk '/^profd_storage_head_wal_only_profiles /{print $2}')" \
        "$(echo "$first / $later" | bc -l)"
    cmp -s "$tmp/steady.pb.gz" "$tmp/$how.pb.gz" && same=identical || same=differ
    echo "  answer bytes after the $how restart vs steady: $same"
done
grep -E 'head snapshot' "$tmp/profd.log" | sed 's/^/  log: /'
grep -E 'decomposed' "$tmp/profd.log" | sed 's/^/  log: /' | tail -2
