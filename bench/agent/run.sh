#!/bin/bash
# libprofd-agent overhead, side by side with the agent off (bench/agent/RESULTS.md).
#   CPU:  bench_agent_cpu off|on (zlib level 6 over 8 MiB x ROUNDS; "on" runs a
#         100 Hz CPU profile over the whole workload)
#   heap: bench_agent_heap_plain vs bench_agent_heap (OPS malloc/free pairs;
#         the agent build interposes malloc and samples every 512 KiB)
# Each pair is run REPS times interleaved (off, on, off, on, ...) under
# `perf stat -e task-clock` (CPU time of the process, ms: less sensitive to
# other load than wall time); the medians and their ratio are printed.
#
#   bench/agent/run.sh [BUILD_DIR=build] [REPS=9] [ROUNDS=6] [OPS=10000000]
set -euo pipefail
cd "$(dirname "$0")/../.."
B=${1:-build}; REPS=${2:-9}; ROUNDS=${3:-6}; OPS=${4:-10000000}
cmake --build "$B" --target bench_agent_cpu bench_agent_heap bench_agent_heap_plain -j2 >/dev/null
D=$B/tests/unit/agent
echo "machine: $(nproc) cores, $(awk -F': ' '/model name/{print $2; exit}' /proc/cpuinfo), load average $(cut -d' ' -f1-3 /proc/loadavg)"
tc() { # task-clock ms of one run of "$@"
    perf stat -x, -e task-clock "$@" 2>&1 >/dev/null | awk -F, '/task-clock/{print $1}'
}
median() { sort -n | awk '{a[NR]=$1} END{print (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }
pair() { # name, off command..., --, on command...
    local name=$1; shift
    local off=() on=() seen=0
    for a in "$@"; do
        if [ "$a" = -- ]; then seen=1; continue; fi
        if [ $seen = 0 ]; then off+=("$a"); else on+=("$a"); fi
    done
    local fo fn
    fo=$(mktemp); fn=$(mktemp)
    for ((i = 0; i < REPS; i++)); do
        tc "${off[@]}" >>"$fo"
        tc "${on[@]}" >>"$fn"
    done
    local mo mn
    mo=$(median <"$fo"); mn=$(median <"$fn")
    echo "$name: off median ${mo} ms [$(sort -n "$fo" | tr '\n' ' ')]"
    echo "$name: on  median ${mn} ms [$(sort -n "$fn" | tr '\n' ' ')]"
    awk -v a="$mo" -v b="$mn" -v n="$name" 'BEGIN{printf "%s: overhead %+.2f %%\n", n, (b/a-1)*100}'
    rm -f "$fo" "$fn"
}
echo "command: perf stat -x, -e task-clock $D/bench_agent_cpu off|on $ROUNDS ; $D/bench_agent_heap_plain|bench_agent_heap $OPS ; $REPS interleaved runs each"
pair cpu-100Hz "$D/bench_agent_cpu" off "$ROUNDS" -- "$D/bench_agent_cpu" on "$ROUNDS"
pair heap-512KiB "$D/bench_agent_heap_plain" "$OPS" -- "$D/bench_agent_heap" "$OPS"
# Instructions executed (valgrind's cachegrind, Ir): independent of the
# machine's load, so it shows what the interposers add even when task-clock
# is noise. OPS/5 pairs to keep it short.
if command -v valgrind >/dev/null; then
    ir() { valgrind --tool=cachegrind --cache-sim=no --cachegrind-out-file=/dev/null "$@" 2>&1 >/dev/null | awk '/I *refs/{gsub(",","",$NF); print $NF}'; }
    io=$(ir "$D/bench_agent_heap_plain" $((OPS / 5))); in=$(ir "$D/bench_agent_heap" $((OPS / 5)))
    awk -v a="$io" -v b="$in" -v n=$((OPS / 5)) 'BEGIN{printf "heap-512KiB instructions (cachegrind Ir, %d pairs): off %d, on %d, overhead %+.2f %% (%.1f per malloc/free pair)\n", n, a, b, (b/a-1)*100, (b-a)/n}'
fi
