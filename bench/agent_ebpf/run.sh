#!/bin/bash
# profd-agent's own cost (issue 29; bench/agent_ebpf/RESULTS.md): the CPU
# time of the agent process (utime + stime of /proc/PID/stat: its user-space
# side; the BPF program runs in the sampled tasks' context and is charged to
# them, so the kernel's own count is printed too: bpftool prog's run_time_ns)
# over SECS seconds at 19 Hz and 99 Hz, with NPROC idle processes (sleep)
# plus SPIN busy ones on the host, pushing to a profd on loopback every 15 s;
# and the push traffic per minute (profd_ingested_bytes_total of the push).
#   bench/agent_ebpf/run.sh [BUILD_DIR=build] [SECS=60] [NPROC=200] [SPIN=2]   (as root)
set -euo pipefail
cd "$(dirname "$0")/../.."
B=${1:-build}; SECS=${2:-60}; NPROC=${3:-200}; SPIN=${4:-2}
T=$(mktemp -d); PIDS=()
cleanup() { kill "${PIDS[@]}" 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$T"; }
trap cleanup EXIT
echo "machine: $(nproc) cores, $(awk -F': ' '/model name/{print $2; exit}' /proc/cpuinfo), kernel $(uname -r), load average $(cut -d' ' -f1-3 /proc/loadavg)"
for _ in $(seq "$NPROC"); do sleep 100000 & PIDS+=($!); done
for _ in $(seq "$SPIN"); do sh -c 'while :; do :; done' & PIDS+=($!); done
PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
"$B"/profd --storage.path="$T/data" --web.listen-address=127.0.0.1:$PORT --log.level=warn & PIDS+=($!)
until curl -sf http://127.0.0.1:$PORT/-/ready >/dev/null; do sleep 0.2; done
ticks=$(getconf CLK_TCK)
for HZ in 19 99; do
    b0=$(curl -s http://127.0.0.1:$PORT/metrics | awk '/^profd_ingested_bytes_total\{source="connect_push"\}/{print $2}')
    "$B"/profd-agent --server=http://127.0.0.1:$PORT --frequency=$HZ --upload-interval=15s --log.level=warn &
    A=$!
    sleep 3 # loaded and attached
    c0=$(awk '{print $14+$15}' /proc/$A/stat)
    p0=$(bpftool prog show name pd_sample -j 2>/dev/null | python3 -c 'import json,sys; d=json.load(sys.stdin); print(d.get("run_time_ns",0))' 2>/dev/null || echo 0)
    sleep "$SECS"
    c1=$(awk '{print $14+$15}' /proc/$A/stat)
    p1=$(bpftool prog show name pd_sample -j 2>/dev/null | python3 -c 'import json,sys; d=json.load(sys.stdin); print(d.get("run_time_ns",0))' 2>/dev/null || echo 0)
    kill -INT $A; wait $A || true
    b1=$(curl -s http://127.0.0.1:$PORT/metrics | awk '/^profd_ingested_bytes_total\{source="connect_push"\}/{print $2}')
    nprocs=$(ls /proc | grep -c '^[0-9]')
    awk -v hz=$HZ -v c=$((c1 - c0)) -v t=$ticks -v s=$SECS -v p=$((p1 - p0)) -v b="${b1:-0}" -v b0="${b0:-0}" -v n=$nprocs \
        'BEGIN { printf "%d Hz, %d processes: agent user+sys %.3f%% of one core; BPF program %.3f%% (run_time_ns, 0 if stats are off); push %.0f bytes/min\n", hz, n, 100*c/t/s, 100*p/1e9/s, (b-b0)*60/(s+3) }'
done
