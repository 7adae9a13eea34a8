#!/bin/bash
# query_range as a user sees it (issue 12: "query_range over 1,000 series x
# 720 profiles from blocks < 50 ms"): one HTTP request
#   GET /api/v1/query_range?query={job="bench",__name__="heap"}&from=..&to=..
# to a real profd serving one block of SERIES x PER real heap profiles of the
# Go demo (testdata go-demo-series/heap-*, cycled; 10 s apart = 2 h), written
# by bench_mkblock (the block writer of a head cut). Each build given is run
# side by side on a copy of the same block, one after the other, in one run:
#
#   bench/storage_speed/query_range_http.sh BUILD_DIR [OLD_BUILD_DIR ...]
#       env: SERIES=1000 PER=720 RUNS=20 PORT=19601
#
# Per build: the median (and best) wall time of RUNS requests (curl's
# time_total, the whole answer received; on a shared machine the best is
# the closest to an idle one), the profd process's CPU per request (utime+stime
# from /proc/PID/stat, 10 ms ticks, over the RUNS), the answer's size, and
# whether the answers of all builds are byte-identical (cmp); then the
# storage part alone (pd_storage_select + pd_storage_read_points of every
# series, no JSON): BUILD/tests/unit/storage/bench_storage_speed
# --query-store on a copy of the same block (skipped for a build whose
# bench does not know the flag). Loopback only.
set -euo pipefail
cd "$(dirname "$0")/../.."
SERIES=${SERIES:-1000}
PER=${PER:-720}
RUNS=${RUNS:-20}
PORT=${PORT:-19601}
((${#@} >= 1)) || { echo "usage: $0 BUILD_DIR [OLD_BUILD_DIR ...]" >&2; exit 2; }
MK=$(realpath "$1/tests/unit/storage/bench_mkblock")
OUT=bench/out/storage_speed/query_range_http
mkdir -p "$OUT"
OUT=$(realpath "$OUT")
tmp=$(mktemp -d)
pid=
cleanup() {
    [ -n "$pid" ] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null || true
    rm -rf "$tmp"
}
trap cleanup EXIT

# the block, made once per (SERIES, PER) and reused
T0=$(((($(date +%s) - 8 * 3600) / 7200) * 7200 * 1000))
DATA=$OUT/data-$SERIES-$PER
if [ ! -s "$DATA/t0" ]; then
    rm -rf "$DATA"; mkdir -p "$DATA/store"
    echo "writing the block: $SERIES series x $PER heap profiles ..." >&2
    "$MK" "$DATA/store" "$SERIES" "$PER" "$T0" 10000 heap \
        /work/shared/testdata/pprof/go-demo-series/heap-*.pb.gz >/dev/null
    echo "$T0" >"$DATA/t0"
fi
T0=$(cat "$DATA/t0")
from=$((T0 / 1000)); to=$(((T0 + PER * 10000) / 1000))
q="%7Bjob%3D%22bench%22%2C__name__%3D%22heap%22%7D"
url="http://127.0.0.1:$PORT/api/v1/query_range?query=$q&from=$from&to=$to"
hz=$(getconf CLK_TCK)
median() { sort -g | awk '{a[NR]=$1} END{print a[int((NR+1)/2)]}'; }

echo "machine: $(nproc) cores,$(awk -F: '/model name/{print $2; exit}' /proc/cpuinfo), $(free -g | awk '/Mem:/{print $2}') GiB; load at start $(cut -d' ' -f1-3 /proc/loadavg)"
echo "block: $SERIES series x $PER heap profiles (go-demo-series, 4 sample types), 10 s apart"
echo "request: GET /api/v1/query_range?query={job=\"bench\",__name__=\"heap\"}&from=$from&to=$to, median of $RUNS"
first=
for B in "$@"; do
    P=$(realpath "$B/profd")
    rm -rf "$tmp/store"; cp -r "$DATA/store" "$tmp/store"
    "$P" serve --storage.path="$tmp/store" --web.listen-address=127.0.0.1:$PORT \
        --storage.retention.time=30d --log.level=warn 2>>"$tmp/profd.log" &
    pid=$!
    for _ in $(seq 100); do curl -fsS -o /dev/null "http://127.0.0.1:$PORT/-/ready" 2>/dev/null && break; sleep 0.1; done
    sleep 2 # the maintenance round at open is done
    curl -fsS -o "$tmp/answer" "$url"
    size=$(stat -c %s "$tmp/answer")
    c0=$(awk '{print $14 + $15}' /proc/$pid/stat)
    for _ in $(seq "$RUNS"); do curl -fsS -o /dev/null -w '%{time_total}\n' "$url"; done >"$tmp/lat"
    lat=$(median <"$tmp/lat")
    best=$(sort -g "$tmp/lat" | head -1)
    c1=$(awk '{print $14 + $15}' /proc/$pid/stat)
    same=
    if [ -z "$first" ]; then
        first=$B; cp "$tmp/answer" "$tmp/first"
    elif cmp -s "$tmp/answer" "$tmp/first"; then
        same=" (byte-identical to $first's)"
    else
        same=" (DIFFERS from $first's)"
    fi
    awk -v b="$B" -v c="$(git -C "$(dirname "$P")" log -1 --format=%h 2>/dev/null || echo '?')" \
        -v l="$lat" -v m="$best" -v t=$((c1 - c0)) -v hz="$hz" -v r="$RUNS" -v s="$size" -v same="$same" \
        'BEGIN{printf "  %-24s %8.1f ms median wall (best %.1f)  %7.1f ms CPU/request  %.1f MB of JSON%s\n", b, l*1000, m*1000, t*1000/hz/r, s/1e6, same}'
    kill "$pid"; wait "$pid" 2>/dev/null || true; pid=
    BSS=$B/tests/unit/storage/bench_storage_speed
    if [ -x "$BSS" ] && grep -qa -- --query-store "$BSS"; then
        rm -rf "$tmp/store"; cp -r "$DATA/store" "$tmp/store"
        "$BSS" --out "$tmp/bss" --query-store "$tmp/store" --series "$SERIES" --points "$PER" \
            --reps "$RUNS" | sed -n 's/^  query_range block */    storage part: /p'
    fi
done
echo "load at end $(cut -d' ' -f1-3 /proc/loadavg)"
