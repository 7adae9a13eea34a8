#!/bin/sh
# Decode time of a large pprof profile (100,000 samples, 20,000 functions
# and locations: test_large_profile of tests/unit/pprof/test_encode.c builds
# it), the goal "well under a second of CPU in a normal build" (issue 34
# moved it out of the unit test, which asserted < 5 s of CPU). The unit test
# prints the CPU seconds (CLOCK_PROCESS_CPUTIME_ID) of the decode and of
# encode + decode + equal; this runs it RUNS times and prints them with the
# load average.
#
#   bench/pprof_codec/run.sh build          (RUNS=5; a RelWithDebInfo build dir)
set -eu
build=$(readlink -f "${1:-build}")
runs=${RUNS:-5}
bin="$build/tests/unit/pprof/test_pprof_encode"
[ -x "$bin" ] || { echo "no $bin: build the tests first" >&2; exit 2; }
echo "machine: $(nproc) CPUs, $(lscpu | sed -n 's/^Model name: *//p'); load average: $(cut -d' ' -f1-3 /proc/loadavg)"
i=1
worst=0
while [ "$i" -le "$runs" ]; do
    line=$("$bin" 2>&1 | grep 'large profile:') || { echo "run $i: test_pprof_encode failed" >&2; exit 1; }
    echo "run $i (load $(cut -d' ' -f1 /proc/loadavg)): $line"
    d=$(echo "$line" | sed -n 's/.*decode \([0-9.]*\) s;.*/\1/p')
    worst=$(awk -v a="$worst" -v b="$d" 'BEGIN { print (b > a) ? b : a }')
    i=$((i + 1))
done
echo "goal decode < 1 s of CPU: $(awk -v w="$worst" 'BEGIN { print (w < 1) ? "met" : "NOT met" }') (worst $worst s)"
