#!/bin/sh
# Latency under hostile clients (issue 20's goal, moved out of ctest by issue
# 34): /-/healthy p99 < 100 ms while 2,000 idle connections, 200 slowloris
# connections, 20 bodies at 1 byte/s and four catastrophic regex queries
# attack profd; the pushes' p99 beside it; how fast a catastrophic focus=/
# ignore=/hide= regex is refused (422). The attack is tests/e2e/hostile.test.mjs
# (which asserts the behaviour: every probe 200, every push acknowledged,
# every attacker cut off); this runs it RUNS times and prints the figures it
# reports, with the load average.
#
#   bench/hostile/run.sh build/profd          (RUNS=3)
set -eu
bin=$(readlink -f "${1:-build/profd}")
here=$(cd "$(dirname "$0")" && pwd)
src=$(cd "$here/../.." && pwd)
runs=${RUNS:-3}
echo "machine: $(nproc) CPUs, $(lscpu | sed -n 's/^Model name: *//p'); load average: $(cut -d' ' -f1-3 /proc/loadavg)"
i=1
while [ "$i" -le "$runs" ]; do
    out=$(PROFD_BIN="$bin" PD_SRC="$src" PD_TESTDATA="${PD_TESTDATA:-$src/../shared/testdata}" \
        node --test --test-reporter=spec \
        --test-name-pattern='slowloris|catastrophic one' "$src/tests/e2e/hostile.test.mjs" 2>&1) || {
        echo "$out" | tail -40
        echo "run $i: the hostile test failed" >&2
        exit 1
    }
    echo "run $i (load average $(cut -d' ' -f1-3 /proc/loadavg)):"
    echo "$out" | grep -E '^ *(health|pushes|regex queries|focus=|ignore=|hide=|cut off)' | sed 's/^ */  /'
    p99=$(echo "$out" | sed -n 's/^ *health: .* p99 \([0-9.]*\) ms, max.*/\1/p')
    echo "  goal /-/healthy p99 < 100 ms under attack: $(awk -v p="$p99" 'BEGIN { print (p < 100) ? "met" : "NOT met" }') ($p99 ms)"
    i=$((i + 1))
done
