#!/bin/sh
# Adaptive capture's timing goals (issue 18, moved out of ctest by issue 34):
#   - the last heap profile before an OOM kill is within 2 s of the death
#     (tests/ui/adaptive_oom.test.mjs: a Go program leaking 10 MiB/s,
#     SIGKILLed at 450 MiB of RSS; 15 s interval, 1 s bursts);
#   - burst profiles of 5 targets x (heap, goroutine) at 1 s: ~300 in 30 s,
#     and profd's CPU before and during the bursts
#     (tests/e2e/adaptive_budget.test.mjs);
#   - issue 28: the target killed while the default 9 s CPU scrape is in
#     flight: "last profile N s before" >= 0 every run
#     (tests/e2e/adaptive_cpu_down.test.mjs).
# The tests assert the behaviour (the last profile is a burst one, never
# more than max_targets in burst, the byte budget holds); this runs them
# RUNS times and prints the figures they report, with the load average.
#
#   bench/adaptive/run.sh build/profd          (RUNS=1)
set -eu
bin=$(readlink -f "${1:-build/profd}")
here=$(cd "$(dirname "$0")" && pwd)
src=$(cd "$here/../.." && pwd)
runs=${RUNS:-1}
echo "machine: $(nproc) CPUs, $(lscpu | sed -n 's/^Model name: *//p'); load average: $(cut -d' ' -f1-3 /proc/loadavg)"
export PROFD_BIN="$bin" PD_SRC="$src" PD_TESTDATA="${PD_TESTDATA:-$src/../shared/testdata}"
i=1
while [ "$i" -le "$runs" ]; do
    out=$(cd "$src/tests/ui" && node --test --test-reporter=spec --test-name-pattern='last heap profile' \
        "$src/tests/ui/adaptive_oom.test.mjs" 2>&1) || { echo "$out" | tail -30; exit 1; }
    gap=$(echo "$out" | sed -n 's/.*last one \([0-9-]*\) ms before the SIGKILL.*/\1/p' | head -1)
    echo "run $i (load $(cut -d' ' -f1-3 /proc/loadavg)): $(echo "$out" | grep -E 'heap profiles stored|target_down event' | sed 's/^[ #]*//' | tr '\n' ';')"
    echo "  goal last heap profile within 2 s of the kill: $([ "$gap" -le 2000 ] && echo met || echo 'NOT met') ($gap ms)"
    out=$(node --test --test-reporter=spec "$src/tests/e2e/adaptive_cpu_down.test.mjs" 2>&1) || { echo "$out" | tail -30; exit 1; }
    echo "  killed with the CPU scrape in flight: $(echo "$out" | sed -n 's/^# //p' | grep 'CPU scrape started' | head -1)"
    out=$(node --test --test-reporter=spec "$src/tests/e2e/adaptive_budget.test.mjs" 2>&1) || { echo "$out" | tail -30; exit 1; }
    echo "$out" | grep -E 'fleet burst profiles|profd CPU' | sed 's/^[ #]*/  /'
    i=$((i + 1))
done
