#!/bin/sh
# Time to /-/healthy with a head cut due at open (issue 19's goal "healthy
# within 1 s of the start", moved out of ctest by issue 34). The scenario is
# tests/e2e/startup.test.mjs (a store whose WAL holds 4 h of 1,500 real heap
# profiles, reopened with 1 h blocks: three ranges due; then once more after
# kill -9 during a cut), which asserts the order (listening before the store
# opens, the cut after the open) and that nothing acknowledged is lost; it
# prints the time from spawn to the first 200 of /-/healthy (polled every
# 10 ms). This runs it RUNS times and prints those figures with the load
# average.
#
#   bench/startup/run.sh build/profd          (RUNS=3)
set -eu
bin=$(readlink -f "${1:-build/profd}")
here=$(cd "$(dirname "$0")" && pwd)
src=$(cd "$here/../.." && pwd)
runs=${RUNS:-3}
echo "machine: $(nproc) CPUs, $(lscpu | sed -n 's/^Model name: *//p'); load average: $(cut -d' ' -f1-3 /proc/loadavg)"
i=1
while [ "$i" -le "$runs" ]; do
    out=$(PROFD_BIN="$bin" PD_SRC="$src" PD_TESTDATA="${PD_TESTDATA:-$src/../shared/testdata}" \
        node --test --test-reporter=spec "$src/tests/e2e/startup.test.mjs" 2>&1) || {
        echo "$out" | tail -40
        echo "run $i: the startup test failed" >&2
        exit 1
    }
    echo "run $i (load average $(cut -d' ' -f1-3 /proc/loadavg)):"
    echo "$out" | grep -E 'healthy after' | sed 's/^[ #]*/  /'
    worst=$(echo "$out" | sed -n 's/.*healthy after \([0-9]*\) ms.*/\1/p' | sort -n | tail -1)
    echo "  goal /-/healthy within 1 s of the start: $([ "$worst" -lt 1000 ] && echo met || echo 'NOT met') (worst $worst ms)"
    i=$((i + 1))
done
