#!/bin/sh
# Summary of `make test`: for each pass (name, exit status of its make, build
# directory) prints "passed", or the failed tests from ctest's
# Testing/Temporary/LastTestsFailed.log, or that the build itself failed.
# Usage: scripts/test-summary.sh NAME STATUS DIR [NAME STATUS DIR ...]
set -u
echo
echo "==== make test summary ===="
npass=0 nfail=0
while [ $# -ge 3 ]; do
    name=$1 status=$2 dir=$3
    shift 3
    failed="$dir/Testing/Temporary/LastTestsFailed.log"
    log="$dir/Testing/Temporary/LastTest.log"
    if [ -f "$log" ]; then
        npass=$((npass + $(grep -c '^Test Passed\.' "$log")))
        nfail=$((nfail + $(grep -c '^Test Failed\.' "$log")))
    fi
    if [ "$status" != 0 ] && [ ! -s "$failed" ]; then
        nfail=$((nfail + 1)) # the pass failed before its tests
    fi
    if [ "$status" = 0 ]; then
        echo "$name ($dir): all tests passed"
    elif [ -s "$failed" ]; then
        echo "$name ($dir): FAILED tests:"
        sed 's/^[0-9]*:/    /' "$failed"
    else
        echo "$name ($dir): FAILED before or outside the tests (dependencies, cmake or the build: see above)"
    fi
done
# the plain closing line (both passes together) that CI reads
echo "make test: $npass passed, $nfail failed"
