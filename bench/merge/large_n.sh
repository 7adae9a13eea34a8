#!/bin/bash
# Merge of N = 10,000 (or any N) profiles: profd (one HTTP request: storage
# read + decode + merge + encode) against `go tool pprof -proto` on the same
# files, side by side on this machine. Run by hand (not part of ctest):
#
#   bench/merge/large_n.sh PROFD FILES_DIR [N=10000] [RUNS=3]
#
# FILES_DIR holds heap/*.pb.gz and cpu/*.pb.gz (real profiles, e.g.
# bench/out/storage_size/data from bench/storage_size/collect.sh). Each kind's
# files are cycled to N profiles; profile i is pushed (profefe API, one curl
# process and keep-alive connection for all of them) at created_at T0 + i s,
# so profd stores N distinct (series, time) points, and pprof is given the
# same N file paths in the same order (a file given twice is merged twice,
# as profd merges its two stored copies). Blocks of 1 h: most of the N
# profiles are read from blocks cut from the head, the rest from the head.
# Prints per kind: profd latency
# (median of RUNS), CPU ms per request and peak RSS; pprof elapsed, CPU
# (user+sys) and max RSS (/usr/bin/time, median of RUNS); the ratios; and
# report=top of the same merge.
set -euo pipefail
PROFD=$(realpath "$1") FILES=$(realpath "$2") N=${3:-10000} RUNS=${4:-3}
tmp=$(mktemp -d)
port=$((30000 + RANDOM % 10000))
T0=1700000000
hz=$(getconf CLK_TCK)
export HOME=$tmp GOCACHE=$tmp/gocache GOFLAGS=
pid=
cleanup() {
    [ -n "$pid" ] && { kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; }
    rm -rf "$tmp"
}
trap cleanup EXIT
"$PROFD" serve --storage.path="$tmp/data" --web.listen-address=127.0.0.1:$port --log.level=warn \
    --storage.retention.time=100y --storage.block-duration=1h 2>"$tmp/profd.log" &
pid=$!
for _ in $(seq 300); do curl -fsS -o /dev/null "http://127.0.0.1:$port/-/ready" 2>/dev/null && break; sleep 0.1; done
echo "machine: $(nproc) cores, $(awk -F': ' '/model name/{print $2; exit}' /proc/cpuinfo); load: $(cut -d' ' -f1-3 /proc/loadavg)"
for kind in heap cpu; do
    mapfile -t src < <(ls "$FILES/$kind"/*.pb.gz)
    : >"$tmp/$kind.list"
    : >"$tmp/$kind.curl"
    for ((i = 1; i <= N; i++)); do
        f=${src[$(((i - 1) % ${#src[@]}))]}
        echo "$f" >>"$tmp/$kind.list"
        ((i > 1)) && echo next >>"$tmp/$kind.curl"
        printf 'url = "http://127.0.0.1:%d/api/0/profiles?service=big&type=%s&instance_id=a&created_at=%d"\ndata-binary = "@%s"\nheader = "Content-Type: application/octet-stream"\noutput = "/dev/null"\n' \
            "$port" "$kind" $((T0 + i)) "$f" >>"$tmp/$kind.curl"
    done
    t0=$(date +%s.%N)
    curl -sS -K "$tmp/$kind.curl" >/dev/null
    echo "  pushed $N $kind profiles (${#src[@]} distinct files) in $(echo "$(date +%s.%N) - $t0" | bc) s"
done
# let the background head cuts and compactions of the pushed data finish
# (their CPU and memory would be counted as the merge's): quiet = the cut
# and compaction counters unchanged for 10 s
last= quiet=0
while ((quiet < 10)); do
    cur=$(curl -fsS "http://127.0.0.1:$port/metrics" | grep -E '^profd_storage_(head_cuts|compactions)_total' | tr '\n' ' ')
    if [ "$cur" = "$last" ]; then quiet=$((quiet + 1)); else quiet=0; last=$cur; fi
    sleep 1
done
echo "  storage settled: $last"
for kind in heap cpu; do
    n=$(curl -fsS "http://127.0.0.1:$port/api/v1/query_range?query=%7Bservice%3D%22big%22%2C__name__%3D%22$kind%22%7D&from=$((T0 + 1))&to=$((T0 + N))" |
        jq '[.data[].timestamps | length] | add')
    [ "$n" = "$N" ] || { echo "$kind: $n profiles stored, want $N" >&2; exit 1; }
done
url() { echo "http://127.0.0.1:$port/api/v1/query?mode=merge&query=%7Bservice%3D%22big%22%2C__name__%3D%22$1%22%7D&from=$((T0 + 1))&to=$((T0 + N))&report=$2"; }
median() { sort -g | awk '{a[NR]=$1} END{print a[int((NR+1)/2)]}'; }
printf '%-5s %6s | %10s %8s %8s | %10s %8s %8s | %8s %8s | %8s\n' kind N profd_ms cpu_ms peakMiB pprof_ms cpu_ms peakMiB x_wall x_cpu top_ms
for kind in heap cpu; do
    u=$(url "$kind" proto)
    curl -fsS -o "$tmp/$kind.merged.pb.gz" "$u"
    echo 5 >/proc/$pid/clear_refs 2>/dev/null || true
    c0=$(awk '{print $14 + $15}' /proc/$pid/stat)
    lat=$(for _ in $(seq "$RUNS"); do curl -fsS -o /dev/null -w '%{time_total}\n' "$u"; done | median)
    c1=$(awk '{print $14 + $15}' /proc/$pid/stat)
    hwm=$(awk '/VmHWM/{print $2}' /proc/$pid/status)
    top=$(for _ in $(seq "$RUNS"); do curl -fsS -o /dev/null -w '%{time_total}\n' "$(url "$kind" top)"; done | median)
    : >"$tmp/pprof.times"
    for _ in $(seq "$RUNS"); do
        /usr/bin/time -f '%e %U %S %M' -o "$tmp/t" go tool pprof -proto $(cat "$tmp/$kind.list") \
            >"$tmp/$kind.pprof.pb.gz" 2>"$tmp/pprof.err"
        cat "$tmp/t" >>"$tmp/pprof.times"
    done
    pe=$(awk '{print $1}' "$tmp/pprof.times" | median)
    pc=$(awk '{print $2 + $3}' "$tmp/pprof.times" | median)
    pm=$(awk '{print $4}' "$tmp/pprof.times" | median)
    # the two merges agree (totals per sample type, as go tool pprof prints them)
    a=$(go tool pprof -raw "$tmp/$kind.merged.pb.gz" 2>/dev/null | awk '/^Samples:/{s=1;next} /^Locations/{s=0} s&&NF' | wc -l)
    b=$(go tool pprof -raw "$tmp/$kind.pprof.pb.gz" 2>/dev/null | awk '/^Samples:/{s=1;next} /^Locations/{s=0} s&&NF' | wc -l)
    awk -v k="$kind" -v n="$N" -v l="$lat" -v c=$((c1 - c0)) -v hz="$hz" -v r="$RUNS" -v h="$hwm" \
        -v pe="$pe" -v pc="$pc" -v pm="$pm" -v t="$top" \
        'BEGIN{pl=l*1000; pcpu=c*1000/hz/r; printf "%-5s %6d | %10.1f %8.1f %8.1f | %10.1f %8.1f %8.1f | %7.1fx %7.1fx | %8.1f\n",
               k, n, pl, pcpu, h/1024, pe*1000, pc*1000, pm/1024, pe*1000/pl, (pcpu>0?pc*1000/pcpu:0), t*1000}'
    echo "  sample lines in go tool pprof -raw: profd merge $a, pprof merge $b"
done
