#!/bin/sh
# libprofd-agent preloaded into a program that is not ours: Debian's
# python3 started through a wrapper (timeout(1), which loads the agent
# first), with PROFD_AGENT_COMM naming the real program so the wrapper
# leaves the port to it. `go tool pprof` must read a heap profile whose
# alloc_space counts the loop's allocations (bytearrays of 100,000 bytes:
# at least 100 MB is required, waited for) and a CPU profile of the busy
# interpreter (at least 50 ms in a 1 s profile, tried again while the
# machine is too busy to give it that: no wall-clock window decides, issue 34).
# The loop runs until told to stop (timeout 300 s is a hang guard).
# Usage: preload_python.sh PATH/TO/libprofd-agent.so
set -eu
LIB=$1
PY=/usr/bin/python3
for c in go "$PY" timeout; do
    command -v "$c" >/dev/null 2>&1 || { echo "preload_python: $c not found: scripts/install-deps.sh --test" >&2; exit 1; }
done
exe=$(basename "$(readlink -f "$PY")")
tmp=$(mktemp -d)
pid=
cleanup() { if [ -n "$pid" ]; then kill "$pid" 2>/dev/null || true; fi; rm -rf "$tmp"; }
trap cleanup EXIT
port=$("$PY" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
cat >"$tmp/loop.py" <<'PYEOF'
import os, sys
x = []
while not os.path.exists(sys.argv[1]):
    x.append(bytearray(100000))
    if len(x) > 200:
        x = x[100:]
PYEOF
LD_PRELOAD="$LIB" PROFD_AGENT_LISTEN="127.0.0.1:$port" PROFD_AGENT_COMM="$exe" \
    timeout 300 "$PY" "$tmp/loop.py" "$tmp/stop" &
pid=$!
i=0
until curl -sf -o /dev/null "http://127.0.0.1:$port/debug/pprof/heap"; do
    i=$((i + 1)); [ $i -gt 1200 ] && { echo "FAIL: python3 with the agent never served on $port (120 s)"; exit 1; }
    sleep 0.1
done
# the server is python's, not timeout's: the wrapper left the port
export PPROF_TMPDIR="$tmp" HOME="$tmp"
# the heap: until 100 MB were allocated (a hang guard of 120 tries)
i=0
while :; do
    go tool pprof -top -sample_index=alloc_space "http://127.0.0.1:$port/debug/pprof/heap" >"$tmp/heap.txt" 2>&1
    # "Showing nodes accounting for X, P% of TOTAL total": TOTAL in B/kB/MB/GB
    total=$(awk '/Showing nodes accounting for/ {print $(NF-1)}' "$tmp/heap.txt")
    mb=$(echo "$total" | awk '/GB$/ {sub("GB",""); print $1 * 1024; exit} /MB$/ {sub("MB",""); print $1; exit} {print 0}')
    awk -v m="$mb" 'BEGIN { exit !(m >= 100) }' && break
    i=$((i + 1)); [ $i -gt 120 ] && { cat "$tmp/heap.txt"; echo "FAIL: alloc_space total $total, want >= 100MB"; exit 1; }
    sleep 1
done
# the CPU: a 1 s profile with at least 50 ms of python in it (tried again
# while the machine gives the interpreter less; 60 tries are a hang guard)
i=0
while :; do
    go tool pprof -top "http://127.0.0.1:$port/debug/pprof/profile?seconds=1" >"$tmp/cpu.txt" 2>&1
    cpu=$(awk '/Total samples =/ {for (i = 1; i <= NF; i++) if ($i == "=") {print $(i+1); exit}}' "$tmp/cpu.txt")
    ms=$(echo "$cpu" | awk '/ms$/ {sub("ms",""); print $1; exit} /s$/ {sub("s",""); print $1 * 1000; exit} {print 0}')
    awk -v m="$ms" 'BEGIN { exit !(m >= 50) }' && break
    i=$((i + 1)); [ $i -gt 60 ] && { cat "$tmp/cpu.txt"; echo "FAIL: CPU profile holds $cpu, want >= 50ms"; exit 1; }
done
touch "$tmp/stop"
cat "$tmp/heap.txt" | head -12
cat "$tmp/cpu.txt" | head -12
grep -q "File: .*python" "$tmp/heap.txt" "$tmp/cpu.txt" || { echo "FAIL: the profiles are not python's"; exit 1; }
echo "PASS: heap alloc_space $total, cpu $cpu"
