#!/bin/bash
# The merge pushed down into storage (issue 12), run by hand (not in ctest):
#
#   bench/merge_pushdown/run.sh [BUILD_DIR=build]
#       env: TARGET=prometheus|demo N=858 RUNS=10 SERIES=1000 PER=10
#
# 1. N consecutive real heap profiles of a real Go program — TARGET=prometheus
#    (default: Debian's prometheus 2.42 scraping itself every second, as the
#    issue measured) or TARGET=demo (examples/demo, net/http/pprof, built
#    with Debian's golang-go) — are collected over HTTP (/debug/pprof/heap,
#    one every ~20 ms; kept in bench/out/merge_pushdown/heap-TARGET and
#    reused by later runs), written as one block of one series at 10 s
#    apart (bench_mkblock: the block writer of a head cut), and served by
#    profd. Side by side: profd's merge of the N over HTTP (report=proto, one
#    request: block read + pushed-down sum + symbolization + encode) and
#    `go tool pprof -proto` on the same N files — wall and CPU — and the
#    samples of both compared through `go tool pprof -raw` (normalize_raw.py:
#    ids replaced by the frames they name, equal stacks summed, sorted).
# 2. SERIES x PER profiles (the collected files cycled) as BLOCKS blocks of
#    SERIES series (PER / BLOCKS profiles of each series per block, blocks 2 h
#    apart; profd runs with --storage.retention.time=20h so that compaction,
#    up to 10% of it, leaves them apart): report=top and report=flamegraph
#    of the merge of all of them over HTTP (goal < 300 ms), and query_range
#    over all series — side by side: profd with --storage.aggregate-workers=1
#    (the blocks one after another), with its default (the cores, <= 4), and
#    the profd of OLD (another build dir, e.g. of the previous commit) if set.
#       env: BLOCKS=5 OLD= PARTS="1 2" HEAP_DIR= PROFD_RUNS=200
# Ports 21150 (demo) and 21151 (profd), loopback only (env PORT_T, PORT_P).
set -euo pipefail
cd "$(dirname "$0")/../.."
B=${1:-build}
N=${N:-858}
RUNS=${RUNS:-10}
PROFD_RUNS=${PROFD_RUNS:-200} # profd requests timed one by one (CPU per request in ns)
TARGET=${TARGET:-prometheus}
SERIES=${SERIES:-1000}
PER=${PER:-10}
BLOCKS=${BLOCKS:-5}
PARTS=${PARTS:-1 2}
OLD=${OLD:-}
PORT_T=${PORT_T:-21150}
PORT_P=${PORT_P:-21151}
PROFD=$(realpath "$B/profd")
MK=$(realpath "$B/tests/unit/storage/bench_mkblock")
OUT=bench/out/merge_pushdown
mkdir -p "$OUT/heap-$TARGET"
OUT=$(realpath "$OUT")
H=${HEAP_DIR:-$OUT/heap-$TARGET} # HEAP_DIR: profiles collected elsewhere (read only)
tmp=$(mktemp -d)
cleanup() {
    kill $(jobs -p) 2>/dev/null || true
    wait 2>/dev/null || true
    rm -rf "$tmp"
}
trap cleanup EXIT
export GOCACHE="$tmp/gocache" GOPATH="$tmp/gopath" GOFLAGS=

have=$(ls "$H" | wc -l)
if ((have < N)); then
    if [ "$TARGET" = prometheus ]; then
        printf 'global: {scrape_interval: 1s}\nscrape_configs: [{job_name: self, static_configs: [{targets: ["127.0.0.1:%s"]}]}]\n' "$PORT_T" >"$tmp/prom.yml"
        prometheus --config.file="$tmp/prom.yml" --storage.tsdb.path="$tmp/prom" \
            --web.listen-address=127.0.0.1:$PORT_T >/dev/null 2>&1 &
    else
        (cd examples/demo && go build -o "$tmp/demo" .)
        "$tmp/demo" -listen=127.0.0.1:$PORT_T >/dev/null 2>&1 &
    fi
    for _ in $(seq 100); do curl -fsS -o /dev/null "http://127.0.0.1:$PORT_T/debug/pprof/" 2>/dev/null && break; sleep 0.1; done
    sleep 5
    echo "collecting $N heap profiles from $TARGET ..." >&2
    rm -f "$H"/*
    for i in $(seq 1 "$N"); do
        curl -fsS -o "$(printf '%s/heap-%05d.pb.gz' "$H" "$i")" "http://127.0.0.1:$PORT_T/debug/pprof/heap"
        sleep 0.02
    done
    kill $(jobs -p) 2>/dev/null || true
fi
FILES=$(ls "$H"/*.pb.gz | head -n "$N")

now_ms=$(($(date +%s) * 1000))
T0=$((now_ms - 6 * 3600 * 1000)) # 6 h ago: inside retention, before the wall clock
mkdir -p "$tmp/d1" "$tmp/d2"
"$MK" "$tmp/d1" 1 "$N" "$T0" 10000 heap $FILES >/dev/null
T2=$(((now_ms - 12 * 3600 * 1000) / 7200000 * 7200000)) # BLOCKS x 2 h, inside 20 h
for b in $(seq 0 $((BLOCKS - 1))); do
    "$MK" "$tmp/d2" "$SERIES" $((PER / BLOCKS)) $((T2 + b * 7200000)) 10000 heap $FILES >/dev/null
done

hz=$(getconf CLK_TCK)
median() { sort -g | awk '{a[NR]=$1} END{print a[int((NR+1)/2)]}'; }
start_profd() { # DIR PORT [PROFD [FLAGS...]]
    local d=$1 port=$2 bin=${3:-$PROFD}
    shift 2; shift || true
    "$bin" serve --storage.path="$d" --web.listen-address=127.0.0.1:$port --log.level=warn \
        "$@" 2>>"$tmp/profd.log" &
    pid=$!
    for _ in $(seq 100); do curl -fsS -o /dev/null "http://127.0.0.1:$port/-/ready" 2>/dev/null && break; sleep 0.1; done
    sleep 3 # the maintenance round at open is done
    # and it has loaded or built every block's aggregates file (issue 35;
    # docs/format/aggregates.md): the merges below measure the steady state
    local nb na
    for _ in $(seq 600); do
        nb=$(find "$d" -name meta.json | wc -l)
        na=$(find "$d" -name aggregates | wc -l)
        [ "$na" -ge "$nb" ] && break
        sleep 0.5
    done
    echo "   (blocks: $nb, with their aggregates file: $na)"
}
# profd's CPU in ns (the scheduler's per-thread run time, summed over its
# threads: /proc/PID/task/*/schedstat field 1), not /proc/PID/stat's 10 ms
# ticks — one merge is a few ms, under a tick
cpu_ns() { cat /proc/$pid/task/*/schedstat 2>/dev/null | awk '{s += $1} END{printf "%d", s}'; }
profd_req() { # URL -> "median_ms cpu_ms_per_req best_ms cpu_p10_ms cpu_p90_ms"
    local url=$1 c0 c1 lat best
    curl -fsS -o /dev/null "$url"
    : >"$tmp/lat"; : >"$tmp/cpu"
    local perf=
    if [ -n "${PERF_OUT:-}" ]; then # PERF_OUT=PREFIX: perf record -g of profd during the requests
        perf record -q -g -p "$pid" -o "$PERF_OUT.$pid.data" 2>/dev/null & perf=$!
        sleep 0.5
    fi
    for _ in $(seq "$PROFD_RUNS"); do
        c0=$(cpu_ns)
        curl -fsS -o /dev/null -w '%{time_total}\n' "$url" >>"$tmp/lat"
        c1=$(cpu_ns)
        echo $((c1 - c0)) >>"$tmp/cpu"
    done
    [ -z "$perf" ] || { kill -INT "$perf"; wait "$perf" || true; }
    lat=$(median <"$tmp/lat")
    best=$(sort -g "$tmp/lat" | head -1)
    sort -g "$tmp/cpu" | awk -v l="$lat" -v b="$best" '{a[NR]=$1} END{
        printf "%.1f %.3f %.1f %.3f %.3f", l*1000, a[int((NR+1)/2)]/1e6, b*1000, a[int(NR*0.1)+1]/1e6, a[int(NR*0.9)]/1e6}'
}

echo "machine: $(nproc) cores,$(awk -F: '/model name/{print $2; exit}' /proc/cpuinfo), load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "profd: $PROFD ($(git log -1 --format=%h)); go: $(go version)"

q="%7Bjob%3D%22bench%22%2C__name__%3D%22heap%22%7D"
from=$(((T0 - 1000) / 1000))
if [[ " $PARTS " == *" 1 "* ]]; then
start_profd "$tmp/d1" $PORT_P
from=$(((T0 - 1000) / 1000)); to=$(((T0 + N * 10000) / 1000 + 1))
q="%7Bjob%3D%22bench%22%2C__name__%3D%22heap%22%7D"
url="http://127.0.0.1:$PORT_P/api/v1/query?mode=merge&query=$q&from=$from&to=$to&report=proto"
got=$(curl -fsS -D - -o "$tmp/profd.pb.gz" "$url" | awk 'tolower($1)=="x-profd-profiles:"{print $2+0}')
[ "$got" = "$N" ] || { echo "profd merged $got profiles, want $N" >&2; exit 1; }
read -r pl pc _ pc10 pc90 <<<"$(profd_req "$url")"
for _ in 1 2 3; do
    /usr/bin/time -f '%e %U %S %M' -o "$tmp/time.txt" go tool pprof -proto $FILES >"$tmp/pprof.pb.gz" 2>/dev/null
    cat "$tmp/time.txt"
done | awk '{print $1*1000, ($2+$3)*1000, $4/1024}' | sort -g | awk '{a[NR]=$0} END{print a[int((NR+1)/2)]}' >"$tmp/pp.txt"
read -r gl gc gr <"$tmp/pp.txt"
echo
echo "1. merge of $N consecutive heap profiles of $TARGET (one series, one block; $(du -sh "$H" | cut -f1) of gzip pprof)"
printf '   %-34s %10s %10s\n' "" "wall ms" "CPU ms"
printf '   %-34s %10.1f %10.3f   (CPU p10 %.3f, p90 %.3f over %d requests)\n' "profd over HTTP (report=proto)" "$pl" "$pc" "$pc10" "$pc90" "$PROFD_RUNS"
printf '   %-34s %10.1f %10.1f   (peak RSS %.0f MiB)\n' "go tool pprof -proto (same files)" "$gl" "$gc" "$gr"
awk -v a="$gl" -v b="$pl" -v c="$gc" -v d="$pc" -v d10="$pc10" -v d90="$pc90" 'BEGIN{printf "   speedup: wall %.0fx, CPU %.0fx (%.0f-%.0fx over profd p90-p10)\n", a/b, c/d, c/d90, c/d10}'
go tool pprof -raw "$tmp/profd.pb.gz" 2>/dev/null | python3 bench/merge_pushdown/normalize_raw.py >"$tmp/a.txt"
go tool pprof -raw "$tmp/pprof.pb.gz" 2>/dev/null | python3 bench/merge_pushdown/normalize_raw.py >"$tmp/b.txt"
if cmp -s "$tmp/a.txt" "$tmp/b.txt"; then
    echo "   samples identical (go tool pprof -raw, normalized): $(wc -l <"$tmp/a.txt") distinct stacks"
else
    echo "   SAMPLES DIFFER (go tool pprof -raw, normalized):"; diff "$tmp/a.txt" "$tmp/b.txt" | head -5; exit 1
fi
kill "$pid"; wait "$pid" 2>/dev/null || true
fi

if [[ " $PARTS " == *" 3 "* ]]; then
# 3. the same N profiles pushed over HTTP as the last N x 7 s (~100 minutes
#    for 858): all in the head, none cut into a block yet
mkdir -p "$tmp/d3"
start_profd "$tmp/d3" $PORT_P "$PROFD" --storage.block-duration=4h
T3=$(( $(date +%s) - N * 7 ))
i=0
for f in $FILES; do
    i=$((i + 1))
    curl -fsS -o /dev/null --data-binary @"$f" \
        "http://127.0.0.1:$PORT_P/api/0/profiles?service=bench&type=heap&instance_id=a&created_at=$((T3 + i * 7))"
done
q3="%7Bservice%3D%22bench%22%2C__name__%3D%22heap%22%7D"
url="http://127.0.0.1:$PORT_P/api/v1/query?mode=merge&query=$q3&from=$T3&to=$((T3 + N * 7 + 1))&report=proto"
got=$(curl -fsS -D - -o "$tmp/profd3.pb.gz" "$url" | awk 'tolower($1)=="x-profd-profiles:"{print $2+0}')
[ "$got" = "$N" ] || { echo "profd merged $got profiles from the head, want $N" >&2; exit 1; }
read -r pl pc _ pc10 pc90 <<<"$(profd_req "$url")"
[ -s "$tmp/pp.txt" ] || for _ in 1 2 3; do
    /usr/bin/time -f '%e %U %S %M' -o "$tmp/time.txt" go tool pprof -proto $FILES >"$tmp/pprof.pb.gz" 2>/dev/null
    cat "$tmp/time.txt"
done | awk '{print $1*1000, ($2+$3)*1000, $4/1024}' | sort -g | awk '{a[NR]=$0} END{print a[int((NR+1)/2)]}' >"$tmp/pp.txt"
read -r gl gc gr <"$tmp/pp.txt"
echo
echo "3. the same $N profiles pushed as the last $((N * 7 / 60)) minutes: merged from the head"
printf '   %-34s %10.1f %10.3f   (CPU p10 %.3f, p90 %.3f over %d requests)\n' "profd over HTTP (report=proto)" "$pl" "$pc" "$pc10" "$pc90" "$PROFD_RUNS"
printf '   %-34s %10.1f %10.1f\n' "go tool pprof -proto (same files)" "$gl" "$gc"
awk -v a="$gl" -v b="$pl" -v c="$gc" -v d="$pc" -v d10="$pc10" -v d90="$pc90" 'BEGIN{printf "   speedup: wall %.0fx, CPU %.0fx (%.0f-%.0fx over profd p90-p10)\n", a/b, c/d, c/d90, c/d10}'
go tool pprof -raw "$tmp/profd3.pb.gz" 2>/dev/null | python3 bench/merge_pushdown/normalize_raw.py >"$tmp/a3.txt"
go tool pprof -raw "$tmp/pprof.pb.gz" 2>/dev/null | python3 bench/merge_pushdown/normalize_raw.py >"$tmp/b3.txt"
if cmp -s "$tmp/a3.txt" "$tmp/b3.txt"; then
    echo "   samples identical (go tool pprof -raw, normalized): $(wc -l <"$tmp/a3.txt") distinct stacks"
else
    echo "   SAMPLES DIFFER (go tool pprof -raw, normalized):"; diff "$tmp/a3.txt" "$tmp/b3.txt" | head -5; exit 1
fi
kill "$pid"; wait "$pid" 2>/dev/null || true
fi

[[ " $PARTS " == *" 2 "* ]] || exit 0
from=$(((T2 - 1000) / 1000)); to=$(((T2 + BLOCKS * 7200000) / 1000 + 1))
echo
echo "2. $((SERIES * PER)) profiles over $SERIES series in $BLOCKS blocks, over HTTP, median of $RUNS"
run2() { # LABEL PROFD [FLAGS...]
    local label=$1 bin=$2 tag=${1//[^a-zA-Z0-9=]/_}
    shift 2
    rm -rf "$tmp/d2run"; cp -r "$tmp/d2" "$tmp/d2run"
    start_profd "$tmp/d2run" $PORT_P "$bin" --storage.retention.time=20h "$@"
    local nb
    nb=$(find "$tmp/d2run" -name meta.json | wc -l)
    [ "$nb" = "$BLOCKS" ] || { echo "$label: $nb blocks after the open, want $BLOCKS" >&2; exit 1; }
    echo "   $label"
    for rep in top flamegraph; do
        url="http://127.0.0.1:$PORT_P/api/v1/query?mode=merge&query=$q&from=$from&to=$to&report=$rep"
        got=$(curl -fsS -D - -o "$tmp/$rep-$tag.out" "$url" | awk 'tolower($1)=="x-profd-profiles:"{print $2+0}')
        [ "$got" = "$((SERIES * PER))" ] || { echo "profd merged $got profiles, want $((SERIES * PER))" >&2; exit 1; }
        read -r l c b _ <<<"$(profd_req "$url")"
        printf '     report=%-10s %8.1f ms wall (best %.1f) %8.1f ms CPU\n' "$rep" "$l" "$b" "$c"
    done
    url="http://127.0.0.1:$PORT_P/api/v1/query_range?query=$q&from=$from&to=$to"
    read -r l c b _ <<<"$(profd_req "$url")"
    printf '     query_range        %8.1f ms wall (best %.1f) %8.1f ms CPU (%d series x %d profiles)\n' "$l" "$b" "$c" "$SERIES" "$PER"
    kill "$pid"; wait "$pid" 2>/dev/null || true
}
run2 "workers=1" "$PROFD" --storage.aggregate-workers=1
run2 "workers=default" "$PROFD"
cmp -s "$tmp/top-workers=1.out" "$tmp/top-workers=default.out" &&
    cmp -s "$tmp/flamegraph-workers=1.out" "$tmp/flamegraph-workers=default.out" &&
    echo "   answers of workers=1 and the default: byte-identical (top, flamegraph)" ||
    { echo "   ANSWERS DIFFER between workers=1 and the default" >&2; exit 1; }
[ -z "$OLD" ] || run2 "old ($OLD)" "$(realpath "$OLD/profd")"
echo "load at end: $(cut -d' ' -f1-3 /proc/loadavg)"
