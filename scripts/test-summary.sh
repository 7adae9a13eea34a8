#!/bin/sh
# Summary of `make test`: for each pass (name, exit status of its make, build
# directory) prints "passed", or the failed tests from ctest's
# Testing/Temporary/LastTestsFailed.log, or that the build itself failed.
# Usage: scripts/test-summary.sh NAME STATUS DIR [NAME STATUS DIR ...]
set -u
echo
echo "==== make test summary ===="
while [ $# -ge 3 ]; do
    name=$1 status=$2 dir=$3
    shift 3
    failed="$dir/Testing/Temporary/LastTestsFailed.log"
    if [ "$status" = 0 ]; then
        echo "$name ($dir): all tests passed"
    elif [ -s "$failed" ]; then
        echo "$name ($dir): FAILED tests:"
        sed 's/^[0-9]*:/    /' "$failed"
    else
        echo "$name ($dir): FAILED before or outside the tests (dependencies, cmake or the build: see above)"
    fi
done
