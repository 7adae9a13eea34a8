#!/bin/bash
# The merge of profiles in the head (issue 35 item 2: the head's aggregates),
# run by hand (not in ctest):
#
#   bench/merge_pushdown/head.sh BUILD_DIR [OLD_BUILD_DIR]
#       env: H=../shared/testdata/pprof/go-demo-series GLOB='heap-*.pb.gz'
#            SHAPES="1x1000 100x100" RUNS=9 DELTA=false (the query's delta=)
#
# For each SERIESxPER shape, the real profiles of H (cycled) are pushed over
# HTTP (profefe API, one curl for all) as the last PER x 7 s of SERIES series
# (all in the head: --storage.block-duration=4h), then the merge of all of
# them is timed over HTTP (report=proto, median of RUNS, CPU per request
# from /proc/PID/stat) — for BUILD_DIR's profd and, if given, OLD_BUILD_DIR's
# on the same pushes; answers compared byte for byte. For one series, also
# `go tool pprof -proto` on the same file list (median of 3) and its samples
# against profd's (`go tool pprof -raw`, normalize_raw.py).
set -euo pipefail
cd "$(dirname "$0")/../.."
NEW=$(realpath "$1")/profd
OLD=${2:+$(realpath "$2")/profd}
H=$(realpath "${H:-../shared/testdata/pprof/go-demo-series}")
GLOB=${GLOB:-heap-*.pb.gz}
SHAPES=${SHAPES:-"1x1000 100x100"}
RUNS=${RUNS:-9}
FILES=($(ls "$H"/$GLOB))
tmp=$(mktemp -d)
pid=
cleanup() {
    [ -n "$pid" ] && { kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; }
    rm -rf "$tmp"
}
trap cleanup EXIT
export HOME=$tmp GOCACHE=$tmp/gocache GOFLAGS=
hz=$(getconf CLK_TCK)
echo "machine: $(nproc) cores,$(awk -F: '/model name/{print $2; exit}' /proc/cpuinfo), load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "profd: $NEW ($(git log -1 --format=%h))${OLD:+; old: $OLD}; files: $H/$GLOB (${#FILES[@]})"
printf '%-9s %8s | %-5s %9s %9s\n' shape profiles bin wall_ms cpu_ms
for shape in $SHAPES; do
    S=${shape%x*} P=${shape#*x}
    T3=$(($(date +%s) - P * 7))
    : >"$tmp/curl.cfg"
    : >"$tmp/list"
    for i in $(seq 1 "$P"); do
        f=${FILES[$(((i - 1) % ${#FILES[@]}))]}
        echo "$f" >>"$tmp/list"
        for s in $(seq 1 "$S"); do
            printf 'url = "http://127.0.0.1:PORT/api/0/profiles?service=bench&type=heap&instance_id=s%d&created_at=%d"\ndata-binary = "@%s"\noutput = /dev/null\nnext\n' \
                "$s" $((T3 + i * 7)) "$f" >>"$tmp/curl.cfg"
        done
    done
    url_q="/api/v1/query?mode=merge&query=%7Bservice%3D%22bench%22%2C__name__%3D%22heap%22%7D&from=$T3&to=$((T3 + P * 7 + 1))&report=proto${DELTA:+&delta=$DELTA}"
    for bin in $OLD $NEW; do
        port=$((25000 + RANDOM % 5000))
        rm -rf "$tmp/d"; mkdir -p "$tmp/d"
        "$bin" serve --storage.path="$tmp/d" --web.listen-address=127.0.0.1:$port --log.level=warn \
            --storage.block-duration=4h 2>>"$tmp/profd.log" &
        pid=$!
        for _ in $(seq 300); do curl -fsS -o /dev/null "http://127.0.0.1:$port/-/ready" 2>/dev/null && break; sleep 0.1; done
        sed -e "s/PORT/$port/" -e '$d' "$tmp/curl.cfg" | curl -fsS -K -
        u="http://127.0.0.1:$port$url_q"
        got=$(curl -fsS -D - -o "$tmp/out-$(basename "$(dirname "$bin")").pb.gz" "$u" | awk 'tolower($1)=="x-profd-profiles:"{print $2+0}')
        [ "$got" = "$((S * P))" ] || { echo "$shape: merged $got, want $((S * P))" >&2; exit 1; }
        curl -fsS -o /dev/null "$u"
        c0=$(awk '{print $14 + $15}' /proc/$pid/stat)
        for _ in $(seq "$RUNS"); do curl -fsS -o /dev/null -w '%{time_total}\n' "$u"; done >"$tmp/lat"
        c1=$(awk '{print $14 + $15}' /proc/$pid/stat)
        med=$(sort -g "$tmp/lat" | awk '{a[NR]=$1} END{print a[int((NR+1)/2)]*1000}')
        printf '%-9s %8d | %-5s %9.1f %9.1f\n' "$shape" $((S * P)) "$([ "$bin" = "$NEW" ] && echo new || echo old)" \
            "$med" "$(echo "($c1 - $c0) * 1000 / $hz / $RUNS" | bc -l)"
        cp "$tmp/out-$(basename "$(dirname "$bin")").pb.gz" "$tmp/last-$([ "$bin" = "$NEW" ] && echo new || echo old).pb.gz"
        kill "$pid"; wait "$pid" 2>/dev/null || true; pid=
    done
    if [ -n "$OLD" ]; then
        cmp -s "$tmp/last-old.pb.gz" "$tmp/last-new.pb.gz" && echo "$shape: old and new answers byte-identical" ||
            { echo "$shape: ANSWERS OF OLD AND NEW DIFFER" >&2; exit 1; }
    fi
    if [ "$S" = 1 ]; then
        for _ in 1 2 3; do
            /usr/bin/time -f '%e %U %S' -o "$tmp/time.txt" go tool pprof -proto $(cat "$tmp/list") >"$tmp/pprof.pb.gz" 2>/dev/null
            cat "$tmp/time.txt"
        done | awk '{print $1*1000, ($2+$3)*1000}' | sort -g | awk '{a[NR]=$0} END{print a[int((NR+1)/2)]}' >"$tmp/pp.txt"
        read -r gl gc <"$tmp/pp.txt"
        printf '%-9s %8d | %-5s %9.1f %9.1f\n' "$shape" "$P" pprof "$gl" "$gc"
        go tool pprof -raw "$tmp/last-new.pb.gz" 2>/dev/null | python3 bench/merge_pushdown/normalize_raw.py >"$tmp/a.txt"
        go tool pprof -raw "$tmp/pprof.pb.gz" 2>/dev/null | python3 bench/merge_pushdown/normalize_raw.py >"$tmp/b.txt"
        cmp -s "$tmp/a.txt" "$tmp/b.txt" && echo "$shape: samples identical to go tool pprof's ($(wc -l <"$tmp/a.txt") distinct stacks, -raw normalized)" ||
            { echo "$shape: SAMPLES DIFFER from go tool pprof's" >&2; diff "$tmp/a.txt" "$tmp/b.txt" | head -5; exit 1; }
    fi
done
echo "load at end: $(cut -d' ' -f1-3 /proc/loadavg)"
