#!/bin/bash
# Merge benchmark (issue 4): profd's merge of N real profiles as ONE HTTP
# request (storage read + decode + merge + encode, report=proto) against
# `go tool pprof -proto` merging the same original files, side by side on
# this machine. Run by hand (not part of ctest):
#
#   bench/merge/run.sh [PROFD=build/profd] [NS="10 100 1000"] [RUNS=5]
#
# Profiles:
#   heap  max(NS) distinct heap profiles scraped from the real demo target
#         (examples/demo: CPU burner, leak, churn), one every ~20 ms;
#   cpu   the 10 real CPU profiles of testdata/pprof/go-demo-series, cycled
#         (a CPU profile takes >= 1 s to record, 1000 would take 17 min).
# Each file is pushed to a fresh profd (profefe push API, distinct
# created_at) and `go tool pprof` reads the very same files.
#
# Measures per N: latency (median of RUNS), CPU (user+sys per request) and
# peak RSS of both. profd: curl's time_total; CPU from /proc/PID/stat
# before/after; peak RSS = VmHWM after the requests, with the peak reset
# (clear_refs 5) before them, next to profd's RSS at rest. pprof:
# /usr/bin/time (elapsed, user+sys, max RSS). Also times report=top and
# report=flamegraph of the largest merge (goal < 200 ms).
set -euo pipefail
cd "$(dirname "$0")/../.."
PROFD=$(realpath "${1:-build/profd}")
NS=${NS:-"10 100 1000"}
RUNS=${RUNS:-5}
tmp=$(mktemp -d)
cleanup() {
    kill $(jobs -p) 2>/dev/null || true
    wait 2>/dev/null || true
    rm -rf "$tmp"
}
trap cleanup EXIT
export GOCACHE="$tmp/gocache" GOPATH="$tmp/gopath" HOME="$tmp" GOFLAGS=
MAXN=0
for n in $NS; do ((n > MAXN)) && MAXN=$n; done

(cd examples/demo && go build -o "$tmp/demo" .)
port_demo=$((20000 + RANDOM % 10000))
port=$((port_demo + 1))
"$tmp/demo" -listen=127.0.0.1:$port_demo >/dev/null 2>&1 &
for _ in $(seq 50); do curl -fsS -o /dev/null "http://127.0.0.1:$port_demo/debug/pprof/" 2>/dev/null && break; sleep 0.1; done
sleep 2 # let the demo allocate a little

echo "collecting $MAXN heap profiles from the demo..." >&2
mkdir -p "$tmp/heap" "$tmp/cpu"
for i in $(seq 1 "$MAXN"); do
    curl -fsS -o "$(printf '%s/heap/heap-%05d.pb.gz' "$tmp" "$i")" \
        "http://127.0.0.1:$port_demo/debug/pprof/heap?gc=1"
    sleep 0.02
done
SERIES=testdata/pprof/go-demo-series
[ -d "$SERIES" ] || SERIES=../shared/testdata/pprof/go-demo-series
for i in $(seq 1 "$MAXN"); do
    ln -s "$(realpath "$SERIES")/$(printf 'cpu-%04d.pb.gz' $(((i - 1) % 10 + 1)))" \
        "$(printf '%s/cpu/cpu-%05d.pb.gz' "$tmp" "$i")"
done

"$PROFD" serve --storage.path="$tmp/data" --web.listen-address=127.0.0.1:$port \
    --log.level=warn 2>"$tmp/profd.log" &
pid=$!
for _ in $(seq 50); do curl -fsS -o /dev/null "http://127.0.0.1:$port/-/ready" 2>/dev/null && break; sleep 0.1; done
T0=1700000000
echo "pushing..." >&2
for kind in heap cpu; do
    i=0
    for f in "$tmp/$kind"/*.pb.gz; do
        i=$((i + 1))
        curl -fsS -o /dev/null --data-binary @"$f" \
            "http://127.0.0.1:$port/api/0/profiles?service=bench&type=$kind&instance_id=a&created_at=$((T0 + i))"
    done
done

hz=$(getconf CLK_TCK)
cpu_ticks() { awk '{print $14 + $15}' /proc/$pid/stat; }
median() { sort -g | awk '{a[NR]=$1} END{print a[int((NR+1)/2)]}'; }
# profd_req URL -> "median_ms cpu_ms_per_req peak_rss_MiB"
profd_req() {
    local url=$1
    curl -fsS -o /dev/null "$url" # warm (page cache, not results: nothing is cached)
    echo 5 >/proc/$pid/clear_refs 2>/dev/null || true
    local c0 c1 lat
    c0=$(cpu_ticks)
    lat=$(for _ in $(seq "$RUNS"); do curl -fsS -o /dev/null -w '%{time_total}\n' "$url"; done | median)
    c1=$(cpu_ticks)
    local hwm
    hwm=$(awk '/VmHWM/{print $2}' /proc/$pid/status)
    awk -v l="$lat" -v c=$((c1 - c0)) -v hz="$hz" -v r="$RUNS" -v h="$hwm" \
        'BEGIN{printf "%.1f %.1f %.1f", l*1000, c*1000/hz/r, h/1024}'
}
# pprof_run N kind -> "median_ms cpu_ms peak_rss_MiB"
pprof_run() {
    local n=$1 kind=$2 files
    files=$(ls "$tmp/$kind"/*.pb.gz | head -n "$n")
    local r=$((RUNS < 3 ? RUNS : 3))
    for _ in $(seq "$r"); do
        /usr/bin/time -f '%e %U %S %M' -o "$tmp/time.txt" go tool pprof -proto $files >"$tmp/out.pb.gz" 2>/dev/null
        cat "$tmp/time.txt"
    done | awk '{print $1*1000, ($2+$3)*1000, $4/1024}' | sort -g | awk '{a[NR]=$0} END{print a[int((NR+1)/2)]}'
}

rest=$(awk '/VmRSS/{printf "%.1f", $2/1024}' /proc/$pid/status)
echo "machine: $(nproc) cores,$(awk -F: '/model name/{print $2; exit}' /proc/cpuinfo); profd RSS at rest ${rest} MiB (all $((2 * MAXN)) profiles stored)"
printf '%-5s %6s | %10s %10s %10s | %10s %10s %10s | %8s %8s\n' kind N profd_ms cpu_ms peakMiB pprof_ms cpu_ms peakMiB speedup cpu_x
for kind in heap cpu; do
    for n in $NS; do
        q="%7Bservice%3D%22bench%22%2C__name__%3D%22$kind%22%7D"
        url="http://127.0.0.1:$port/api/v1/query?mode=merge&query=$q&from=$((T0 + 1))&to=$((T0 + n))&report=proto"
        got=$(curl -fsS -D - -o /dev/null "$url" | awk 'tolower($1)=="x-profd-profiles:"{print $2+0}')
        [ "$got" = "$n" ] || { echo "profd merged $got profiles, want $n" >&2; exit 1; }
        read -r pl pc pr <<<"$(profd_req "$url")"
        read -r gl gc gr <<<"$(pprof_run "$n" "$kind")"
        printf '%-5s %6d | %10.1f %10.1f %10.1f | %10.1f %10.1f %10.1f | %7.1fx %7.1fx\n' \
            "$kind" "$n" "$pl" "$pc" "$pr" "$gl" "$gc" "$gr" \
            "$(awk -v a="$gl" -v b="$pl" 'BEGIN{print a/b}')" "$(awk -v a="$gc" -v b="$pc" 'BEGIN{print (b>0?a/b:0)}')"
    done
done
echo
echo "reports of the merge of $MAXN profiles (one request each, median of $RUNS):"
for kind in heap cpu; do
    q="%7Bservice%3D%22bench%22%2C__name__%3D%22$kind%22%7D"
    for rep in top flamegraph; do
        url="http://127.0.0.1:$port/api/v1/query?mode=merge&query=$q&from=$((T0 + 1))&to=$((T0 + MAXN))&report=$rep"
        read -r pl pc pr <<<"$(profd_req "$url")"
        echo "  $kind report=$rep: ${pl} ms (cpu ${pc} ms, peak RSS ${pr} MiB)"
    done
done
