#!/bin/bash
# libprofd-agent overhead, side by side with the agent off (bench/agent/RESULTS.md).
#   CPU:  bench_agent_cpu off|on (zlib level 6 over 8 MiB x ROUNDS; "on" runs a
#         100 Hz CPU profile over the whole workload)
#   heap: bench_agent_heap_plain vs bench_agent_heap (OPS malloc/free pairs;
#         the agent build interposes malloc and samples every 512 KiB)
#   perl: Debian's perl (glibc malloc) running bench/agent/alloc_heavy.pl
#         PERL_N keys x 3 rounds, plain vs with libprofd-agent.so LD_PRELOADed
#         (heap sampling at 512 KiB, no server)
# Each pair is run REPS times interleaved (off, on, off, on, ...) under
# `perf stat -e task-clock` (CPU time of the process, ms: less sensitive to
# other load than wall time); the medians and their ratio are printed.
# Then instructions (valgrind's cachegrind, Ir), which the machine's load
# cannot disturb: the heap loop at OPS/5 and 2*OPS/5 pairs (the difference
# is the steady-state cost per pair, without the start-up of the agent's
# libraries), and perl with PERL_N/4 keys x 2 rounds.
#
#   bench/agent/run.sh [BUILD_DIR=build] [REPS=9] [ROUNDS=6] [OPS=10000000] [PERL_N=200000]
set -euo pipefail
cd "$(dirname "$0")/../.."
B=${1:-build}; REPS=${2:-9}; ROUNDS=${3:-6}; OPS=${4:-10000000}; PERL_N=${5:-200000}
cmake --build "$B" --target bench_agent_cpu bench_agent_heap bench_agent_heap_plain profd_agent_shared -j2 >/dev/null
D=$B/tests/unit/agent
LIB=$(ls "$B"/src/agent/libprofd-agent.so)
PL=bench/agent/alloc_heavy.pl
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
echo "command: perf stat -x, -e task-clock $D/bench_agent_cpu off|on $ROUNDS ; $D/bench_agent_heap_plain|bench_agent_heap $OPS ; [LD_PRELOAD=$LIB] perl $PL $PERL_N ; $REPS interleaved runs each"
pair cpu-100Hz "$D/bench_agent_cpu" off "$ROUNDS" -- "$D/bench_agent_cpu" on "$ROUNDS"
pair heap-512KiB "$D/bench_agent_heap_plain" "$OPS" -- "$D/bench_agent_heap" "$OPS"
pair perl-heap-512KiB perl "$PL" "$PERL_N" -- env LD_PRELOAD="$LIB" perl "$PL" "$PERL_N"
command -v valgrind >/dev/null || exit 0
# Instructions. Under valgrind the program's heap lies low (its brk follows
# the executable, loaded at 0x108000), below the agent's range, so every
# free takes free()'s second compare (free_low: cmp, jb, jmp); natively a
# PIE's heap (0x55...) and glibc's mmaps (0x7f...) lie above the range and
# skip it. cachegrind counts free_low's instructions, so both are printed:
# as run under valgrind, and without free_low (the native path).
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
ir() { # out-file, command...: total Ir (PRELOAD: a library for the program only)
    local out=$1; shift
    env ${PRELOAD:+LD_PRELOAD="$PRELOAD"} valgrind --tool=cachegrind --cache-sim=no \
        --cachegrind-out-file="$out" "$@" 2>"$out.log" >/dev/null
    awk '/I *refs/{gsub(",","",$NF); print $NF}' "$out.log"
}
fn_ir() { # out-file, function: Ir of that function (0 if absent)
    cg_annotate --threshold=0 "$1" 2>/dev/null | awk -v f=":$2\$" '$0 ~ f {gsub(",","",$1); s+=$1} END{print s+0}'
}
n1=$((OPS / 5)); n2=$((2 * OPS / 5))
o1=$(ir "$tmp/o1" "$D/bench_agent_heap_plain" $n1); a1=$(ir "$tmp/a1" "$D/bench_agent_heap" $n1)
o2=$(ir "$tmp/o2" "$D/bench_agent_heap_plain" $n2); a2=$(ir "$tmp/a2" "$D/bench_agent_heap" $n2)
l1=$(fn_ir "$tmp/a1" free_low); l2=$(fn_ir "$tmp/a2" free_low)
awk -v o="$o1" -v a="$a1" -v l="$l1" -v n=$n1 'BEGIN{
    printf "heap-512KiB instructions (cachegrind Ir, %d pairs): off %d, on %d: %+.2f %% under valgrind; without free_low (native PIE path) %+.2f %%\n", n, o, a, (a/o-1)*100, ((a-l)/o-1)*100}'
awk -v o="$o2" -v a="$a2" -v l="$l2" -v n=$n2 'BEGIN{
    printf "heap-512KiB instructions (cachegrind Ir, %d pairs): off %d, on %d: %+.2f %% under valgrind; without free_low (native PIE path) %+.2f %%\n", n, o, a, (a/o-1)*100, ((a-l)/o-1)*100}'
awk -v o1="$o1" -v a1="$a1" -v l1="$l1" -v o2="$o2" -v a2="$a2" -v l2="$l2" -v n=$((n2 - n1)) 'BEGIN{
    po = (o2-o1)/n; pa = (a2-a1)/n; pl = ((a2-l2)-(a1-l1))/n
    printf "heap-512KiB steady state per pair (Ir(%d pairs) - Ir(%d pairs)): off %.1f, on %.1f: %+.2f %% under valgrind; native PIE path %.1f: %+.2f %%\n", 2*n, n, po, pa, (pa/po-1)*100, pl, (pl/po-1)*100}'
pn=$((PERL_N / 4))
po=$(ir "$tmp/po" perl "$PL" $pn 2)
pa=$(PRELOAD="$LIB" ir "$tmp/pa" perl "$PL" $pn 2)
pl=$(fn_ir "$tmp/pa" free_low)
awk -v o="$po" -v a="$pa" -v l="$pl" -v n=$pn 'BEGIN{
    printf "perl-heap-512KiB instructions (cachegrind Ir, perl %s %d 2): off %d, on %d: %+.2f %% under valgrind; without free_low (native PIE path) %+.2f %%\n", "'"$PL"'", n, o, a, (a/o-1)*100, ((a-l)/o-1)*100}'
# The fixed cost of loading the shared agent into a process (its libraries'
# relocation and constructors), with nothing to do: /bin/true.
so=$(ir "$tmp/so" /bin/true); sa=$(PRELOAD="$LIB" ir "$tmp/sa" /bin/true)
echo "start-up instructions (cachegrind Ir, /bin/true): plain $so, with $LIB preloaded $sa (+$((sa - so)))"
