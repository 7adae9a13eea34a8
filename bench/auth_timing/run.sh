#!/bin/sh
# Unknown user vs known user with a wrong password over TLS + basic auth
# (issue 20's goal, moved out of ctest by issue 34): the median time of 200
# tries of each must be alike (ratio within 0.5-2), and both must cost a
# bcrypt (well above a cached right password), so timing does not tell
# whether a user name exists. tests/e2e/webconfig.test.mjs's "timing" test
# makes the tries (PD_AUTH_TRIES=200 here; the real profd, bcrypt cost 6) and
# prints the medians; the unit test http_auth (test_unknown_user_costs_a_bcrypt)
# asserts the behaviour without a clock. This runs the e2e test RUNS times and
# prints its figures with the load average.
#
#   bench/auth_timing/run.sh build/profd          (RUNS=3)
set -eu
bin=$(readlink -f "${1:-build/profd}")
here=$(cd "$(dirname "$0")" && pwd)
src=$(cd "$here/../.." && pwd)
runs=${RUNS:-3}
echo "machine: $(nproc) CPUs, $(lscpu | sed -n 's/^Model name: *//p'); load average: $(cut -d' ' -f1-3 /proc/loadavg)"
i=1
while [ "$i" -le "$runs" ]; do
    out=$(PROFD_BIN="$bin" PD_SRC="$src" PD_TESTDATA="${PD_TESTDATA:-$src/../shared/testdata}" \
        PD_AUTH_TRIES=200 node --test --test-reporter=spec --test-name-pattern='^timing' \
        "$src/tests/e2e/webconfig.test.mjs" 2>&1) || {
        echo "$out" | tail -40
        echo "run $i: the webconfig test failed" >&2
        exit 1
    }
    line=$(echo "$out" | grep -E '^ *auth timing:' | sed 's/^ *//')
    ratio=$(echo "$line" | sed -n 's/.*(ratio \([0-9.]*\)).*/\1/p')
    mu=$(echo "$line" | sed -n 's/.*unknown \([0-9.]*\) ms.*/\1/p')
    ok=$(echo "$line" | sed -n 's/.*cached \([0-9.]*\) ms.*/\1/p')
    echo "run $i (load average $(cut -d' ' -f1-3 /proc/loadavg)): $line"
    echo "  goal unknown/wrong within 0.5-2: $(awk -v r="$ratio" 'BEGIN { print (r > 0.5 && r < 2) ? "met" : "NOT met" }');" \
        "unknown > 2 x cached: $(awk -v a="$mu" -v b="$ok" 'BEGIN { print (a > 2 * b) ? "met" : "NOT met" }')"
    i=$((i + 1))
done
