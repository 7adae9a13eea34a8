#!/bin/bash
# Merge time against the number of stored profiles (issue 35, "Must show":
# flat or logarithmic in N, < 1 s at 100,000), run by hand (not in ctest):
#
#   bench/merge_pushdown/curve.sh [BUILD_DIR=build]
#       env: SHAPES="100x10 100x100 100x1000 10000x10" BLOCKS=5 RUNS=5 OLD=
#            H=DIR of real *.pb.gz (GLOB='heap-*.pb.gz'), OLD_AGG= (empty: an
#            OLD without aggregates: not waited for)
#
# For each SERIESxPER shape, SERIES x PER real heap profiles (the files
# run.sh collected in bench/out/merge_pushdown/heap-prometheus, cycled) are
# written by bench_mkblock as BLOCKS blocks 2 h apart (PER / BLOCKS profiles
# of each series per block), profd serves them (--storage.retention.time=20h:
# no compaction), and once every block's aggregates file is there
# (docs/format/aggregates.md) the merge of all of them is timed over HTTP
# (report=proto and report=top, median of RUNS, CPU per request) — and, with
# OLD=DIR_OF_A_PROFD (e.g. a copy of a build before the aggregates), the
# same requests against that binary on the same blocks, whose answers must
# be byte-identical.
set -euo pipefail
cd "$(dirname "$0")/../.."
B=${1:-build}
SHAPES=${SHAPES:-"100x10 100x100 100x1000 10000x10"}
BLOCKS=${BLOCKS:-5}
RUNS=${RUNS:-5}
OLD=${OLD:-}
PORT=${PORT:-$((23000 + RANDOM % 1000))}
PROFD=$(realpath "$B/profd")
MK=$(realpath "$B/tests/unit/storage/bench_mkblock")
H=$(realpath "${H:-bench/out/merge_pushdown/heap-prometheus}") # or H=DIR of *.pb.gz (e.g. ../shared/testdata/pprof/go-demo-series)
FILES=$(ls "$H"/${GLOB:-*.pb.gz})
tmp=$(mktemp -d)
pid=
cleanup() {
    [ -n "$pid" ] && { kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; }
    rm -rf "$tmp"
}
trap cleanup EXIT
hz=$(getconf CLK_TCK)
median() { sort -g | awk '{a[NR]=$1} END{print a[int((NR+1)/2)]}'; }
start() { # DIR BIN
    "$2" serve --storage.path="$1" --web.listen-address=127.0.0.1:$PORT --log.level=warn \
        --storage.retention.time=20h 2>>"$tmp/profd.log" &
    pid=$!
    for _ in $(seq 300); do curl -fsS -o /dev/null "http://127.0.0.1:$PORT/-/ready" 2>/dev/null && break; sleep 0.1; done
}
stop() { kill "$pid"; wait "$pid" 2>/dev/null || true; pid=; }
req() { # URL OUT -> "median_ms cpu_ms"
    curl -fsS -o "$2" "$1"
    local c0 c1
    c0=$(awk '{print $14 + $15}' /proc/$pid/stat)
    for _ in $(seq "$RUNS"); do curl -fsS -o /dev/null -w '%{time_total}\n' "$1"; done >"$tmp/lat"
    c1=$(awk '{print $14 + $15}' /proc/$pid/stat)
    awk -v l="$(median <"$tmp/lat")" -v c=$((c1 - c0)) -v hz="$hz" -v r="$RUNS" \
        'BEGIN{printf "%.1f %.1f", l*1000, c*1000/hz/r}'
}
echo "machine: $(nproc) cores,$(awk -F: '/model name/{print $2; exit}' /proc/cpuinfo), load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "profd: $PROFD ($(git log -1 --format=%h))${OLD:+; old: $OLD/profd}"
now_ms=$(($(date +%s) * 1000))
T2=$(((now_ms - 12 * 3600 * 1000) / 7200000 * 7200000))
q="%7Bjob%3D%22bench%22%2C__name__%3D%22heap%22%7D"
printf '%-10s %9s | %9s %9s %9s | %9s %9s %9s | %s\n' shape profiles proto_ms cpu_ms top_ms \
    old_proto old_cpu old_top "build of the aggregates"
for shape in $SHAPES; do
    S=${shape%x*} P=${shape#*x}
    d=$tmp/d-$shape
    mkdir -p "$d"
    t0=$(date +%s.%N)
    for b in $(seq 0 $((BLOCKS - 1))); do
        "$MK" "$d" "$S" $((P / BLOCKS)) $((T2 + b * 7200000)) 1000 heap $FILES >/dev/null
    done
    t1=$(date +%s.%N)
    from=$(((T2 - 1000) / 1000)); to=$(((T2 + BLOCKS * 7200000) / 1000 + 1))
    url="http://127.0.0.1:$PORT/api/v1/query?mode=merge&query=$q&from=$from&to=$to"
    ob="-" oc="-" ot="-"; same=${same:-}
    t2=$(date +%s.%N) t3=
    if [ -n "$OLD" ]; then # first (an old binary with aggregates builds them: waited for, as below)
        start "$d" "$(realpath "$OLD/profd")"
        if [ -n "${OLD_AGG:-1}" ]; then
            for _ in $(seq 1200); do
                [ "$(find "$d" -name aggregates | wc -l)" -ge "$BLOCKS" ] && break
                sleep 0.25
            done
            t3=$(date +%s.%N)
        fi
        read -r ob oc <<<"$(req "$url&report=proto" "$tmp/old.pb.gz")"
        read -r ot _ <<<"$(req "$url&report=top" "$tmp/old.top")"
        stop
    fi
    start "$d" "$PROFD"
    [ -n "$t3" ] || t2=$(date +%s.%N)
    for _ in $(seq 1200); do
        [ "$(find "$d" -name aggregates | wc -l)" -ge "$BLOCKS" ] && break
        sleep 0.25
    done
    [ -n "$t3" ] || t3=$(date +%s.%N)
    got=$(curl -fsS -D - -o /dev/null "$url&report=proto" | awk 'tolower($1)=="x-profd-profiles:"{print $2+0}')
    [ "$got" = "$((S * P))" ] || { echo "$shape: profd merged $got profiles, want $((S * P))" >&2; exit 1; }
    read -r nb nc <<<"$(req "$url&report=proto" "$tmp/new.pb.gz")"
    read -r nt _ <<<"$(req "$url&report=top" "$tmp/new.top")"
    stop
    if [ -n "$OLD" ]; then
        cmp -s "$tmp/old.pb.gz" "$tmp/new.pb.gz" && cmp -s "$tmp/old.top" "$tmp/new.top" ||
            { echo "$shape: ANSWERS OF OLD AND NEW DIFFER" >&2; same=no; }
    fi
    agg=$(find "$d" -name aggregates -printf '%s\n' | awk '{s+=$1} END{print s}')
    dat=$(du -sb --exclude=aggregates "$d" | cut -f1)
    printf '%-10s %9d | %9.1f %9.1f %9.1f | %9s %9s %9s | %.1f s (blocks written in %.0f s); %d B of aggregates for %d B of blocks\n' \
        "$shape" $((S * P)) "$nb" "$nc" "$nt" "$ob" "$oc" "$ot" \
        "$(echo "$t3 - $t2" | bc)" "$(echo "$t1 - $t0" | bc)" "$agg" "$dat"
    rm -rf "$d"
done
same=${same:-yes}
[ -z "$OLD" ] || [ "$same" = no ] || echo "answers of old and new: byte-identical (report=proto and report=top) for every shape"
echo "load at end: $(cut -d' ' -f1-3 /proc/loadavg)"
