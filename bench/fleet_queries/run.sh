#!/bin/bash
# Fleet-size queries (issue 35 item 2): Grafana's Series / LabelNames /
# LabelValues (Connect, JSON), /api/v1/series, /api/v1/labels at 1k, 10k and
# 50k active series, RSS per 1,000 active series, and RSS across identical
# rounds of wide queries (SelectSeries, query_range, series over every
# series). One profd on a fresh store, filled by push.sh (one real Go heap
# profile per series: testdata go-demo-once/heap.pb.gz, 4 sample types, so
# 50k series are 200k Pyroscope series).
#
#   bench/fleet_queries/run.sh [PROFD=build/profd] [ROUNDS=10] [RUNS=5]
#
# Latency: median of RUNS (curl time_total, the whole answer); CPU: profd's
# utime+stime per request (10 ms ticks) over the RUNS. Loopback only; port
# picked at random. Prints the load average with each table.
set -euo pipefail
cd "$(dirname "$0")/../.."
PROFD=$(realpath "${1:-build/profd}") ROUNDS=${2:-10} RUNS=${3:-5}
HEAP=${PD_TESTDATA:-/work/shared/testdata}/pprof/go-demo-once/heap.pb.gz
tmp=$(mktemp -d)
port=$((30000 + RANDOM % 20000))
pid=
cleanup() {
    [ -n "$pid" ] && { kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; }
    rm -rf "$tmp"
}
trap cleanup EXIT
"$PROFD" serve --storage.path="$tmp/data" --web.listen-address=127.0.0.1:$port --log.level=warn 2>"$tmp/profd.log" &
pid=$!
for _ in $(seq 300); do curl -fsS -o /dev/null "http://127.0.0.1:$port/-/ready" 2>/dev/null && break; sleep 0.1; done
rss() { awk '/VmRSS/{print $2}' /proc/$pid/status; } # KiB
cpu() { awk '{print $14 + $15}' /proc/$pid/stat; }   # ticks
median() { sort -g | awk '{a[NR]=$1} END{print a[int((NR+1)/2)]}'; }
T0=$(($(date +%s) - 60))
NOW=$(((T0 + 120) * 1000))
RANGE="\"start\":$(((T0 - 3600) * 1000)),\"end\":$NOW"
connect() { # METHOD BODY
    curl -fsS -o /dev/null -w '%{time_total}\n' -H 'Content-Type: application/json' -d "$2" \
        "http://127.0.0.1:$port/querier.v1.QuerierService/$1"
}
get() { curl -fsS -o /dev/null -w '%{time_total}\n' "http://127.0.0.1:$port$1"; }
measure() { # NAME CMD...: median latency ms, CPU ms per request
    local name=$1
    shift
    local c0 c1 lat
    c0=$(cpu)
    lat=$(for _ in $(seq "$RUNS"); do "$@"; done | median)
    c1=$(cpu)
    printf '  %-34s %8.1f ms  %6d ms CPU\n' "$name" "$(echo "$lat * 1000" | bc -l)" \
        $(((c1 - c0) * 1000 / $(getconf CLK_TCK) / RUNS))
}
echo "machine: $(nproc) cores, $(awk -F': ' '/model name/{print $2; exit}' /proc/cpuinfo)"
echo "profd: $PROFD ($(cd "$(dirname "$PROFD")" && git rev-parse --short HEAD 2>/dev/null || echo ?))"
have=0
rss0=$(rss)
for n in 1000 10000 50000; do
    PPROF=$HEAP bench/fleet_queries/push.sh $port $((n - have)) $have $T0
    have=$n
    sleep 1
    echo "== $n series (RSS $(($(rss) / 1024)) MiB; load $(cut -d' ' -f1-3 /proc/loadavg))"
    measure "Series {} [__profile_type__,service_name]" connect Series "{\"matchers\":[\"{}\"],\"labelNames\":[\"__profile_type__\",\"service_name\"],$RANGE}"
    measure "Series {service_name=\"fleet\"}" connect Series "{\"matchers\":[\"{service_name=\\\"fleet\\\"}\"],\"labelNames\":[\"__profile_type__\",\"instance_id\"],$RANGE}"
    measure "LabelNames {}" connect LabelNames "{\"matchers\":[\"{}\"],$RANGE}"
    measure "LabelValues service_name {}" connect LabelValues "{\"name\":\"service_name\",\"matchers\":[\"{}\"],$RANGE}"
    measure "/api/v1/series heap" get "/api/v1/series?match%5B%5D=heap&start=$((T0 - 3600))&end=$((NOW / 1000))"
    measure "/api/v1/labels" get "/api/v1/labels?start=$((T0 - 3600))&end=$((NOW / 1000))"
    measure "/api/v1/label/instance_id/values" get "/api/v1/label/instance_id/values?start=$((T0 - 3600))&end=$((NOW / 1000))"
done
sleep 2
r1=$(rss)
echo "== RSS: $((rss0 / 1024)) MiB empty, $((r1 / 1024)) MiB with $have active series after the listings: $(((r1 - rss0) * 1000 / have)) KiB per 1,000 series"
echo "   profd_storage_head_chunk_bytes $(curl -fsS "http://127.0.0.1:$port/metrics" | awk '/^profd_storage_head_chunk_bytes /{print $2}')"
echo "== rounds of wide queries (SelectSeries memory:inuse_space, query_range heap, /api/v1/series heap; load $(cut -d' ' -f1-3 /proc/loadavg))"
first=
for r in $(seq "$ROUNDS"); do
    connect SelectSeries "{\"profileTypeID\":\"memory:inuse_space:bytes:space:bytes\",\"labelSelector\":\"{}\",\"step\":15,$RANGE}" >/dev/null
    get "/api/v1/query_range?query=heap&from=$((T0 - 3600))&to=$((NOW / 1000))" >/dev/null
    get "/api/v1/series?match%5B%5D=heap&start=$((T0 - 3600))&end=$((NOW / 1000))" >/dev/null
    now=$(rss)
    [ -n "$first" ] || first=$now
    printf '  round %2d: RSS %6d MiB (%+.1f%% of round 1)\n' "$r" $((now / 1024)) "$(echo "($now - $first) * 100 / $first" | bc -l)"
done
