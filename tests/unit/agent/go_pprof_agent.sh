#!/bin/sh
# `go tool pprof` (Debian's golang-go) reads libprofd-agent's profiles of
# examples/agent_demo/hot.c, with symbols from the agent alone
# (-symbolize=none): demo_hot_spin must top the CPU profile and
# demo_alloc_keep the inuse_space heap profile (heap only where the build
# has heap sampling: not under ASan, where hot prints "heap off").
# Usage: go_pprof_agent.sh PATH/TO/pd_agent_hot
set -eu
HOT=$1
if ! command -v go >/dev/null 2>&1; then
    echo "go_pprof_agent: go (golang-go) not found: scripts/install-deps.sh --test" >&2
    exit 1
fi
tmp=$(mktemp -d)
pid=
cleanup() { [ -n "$pid" ] && kill "$pid" 2>/dev/null; rm -rf "$tmp"; }
trap cleanup EXIT
"$HOT" 0 120 >"$tmp/out" 2>"$tmp/err" &
pid=$!
i=0
while ! grep -q '^port ' "$tmp/out"; do
    i=$((i + 1))
    if [ $i -gt 1200 ]; then echo "hot did not start (120 s):"; cat "$tmp/err"; exit 1; fi
    sleep 0.1
done
port=$(awk '/^port /{print $2}' "$tmp/out")
heap=$(awk '/^port /{print $4}' "$tmp/out")
export PPROF_TMPDIR="$tmp" HOME="$tmp"
top_of() { # first function row of `go tool pprof -top` output
    awk 'f && NF >= 6 {print $6; exit} /flat%/ {f = 1}' "$1"
}
go tool pprof -symbolize=none -top -nodecount=8 \
    "http://127.0.0.1:$port/debug/pprof/profile?seconds=5" >"$tmp/cpu.txt" 2>"$tmp/cpu.err" || {
    cat "$tmp/cpu.err"; exit 1; }
cat "$tmp/cpu.txt"
cpu_top=$(top_of "$tmp/cpu.txt")
if [ "$cpu_top" != demo_hot_spin ]; then
    echo "FAIL: CPU profile top is '$cpu_top', want demo_hot_spin"; exit 1
fi
grep -q 'Type: cpu' "$tmp/cpu.txt" || { echo "FAIL: not a cpu profile"; exit 1; }
# a static function (no dynamic symbol) is named from the executable's .symtab
grep -q ' demo_static_mix$' "$tmp/cpu.txt" || {
    echo "FAIL: the static function demo_static_mix is not named in the CPU profile"; exit 1; }
if [ "$heap" = on ]; then
    go tool pprof -symbolize=none -top -nodecount=8 -sample_index=inuse_space \
        "http://127.0.0.1:$port/debug/pprof/heap" >"$tmp/heap.txt" 2>"$tmp/heap.err" || {
        cat "$tmp/heap.err"; exit 1; }
    cat "$tmp/heap.txt"
    heap_top=$(top_of "$tmp/heap.txt")
    if [ "$heap_top" != demo_alloc_keep ]; then
        echo "FAIL: inuse_space top is '$heap_top', want demo_alloc_keep"; exit 1
    fi
    # 768 blocks of 64 KiB are live: unsampled inuse must be near 48 MiB
    total=$(awk '/Showing nodes accounting for/ {print $NF}' "$tmp/heap.txt")
    echo "inuse total line: $(grep 'Showing nodes' "$tmp/heap.txt")"
else
    echo "heap sampling is off in this build (ASan): heap check skipped"
fi
echo PASS
