#!/bin/sh
# bench/symbolize/run.sh BUILD_DIR [ELF] [BASE_BUILD_DIR]
# CPU time of naming one address per function of ELF (default BUILD_DIR/profd)
# with the symbolizer of this tree and, for comparison, with the library of a
# baseline build (BASE_BUILD_DIR, e.g. main's tree built apart:
#   git archive main | tar -x -C /tmp/base && cmake -S /tmp/base -B /tmp/base/build
#   -DCMAKE_BUILD_TYPE=RelWithDebInfo && cmake --build /tmp/base/build --target pd_symbolize).
# Both link the same bench_symbolize.c (public API only). Needs RelWithDebInfo
# builds. Prints the load and one line each (RUNS: default 5).
set -eu
B=${1:?build dir}
ELF=${2:-$B/profd}
BASE=${3:-}
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
PKG=$(pkg-config --libs libdw libelf libdebuginfod libcurl jansson libzstd zlib libxxhash libdeflate libpcre2-8 2>/dev/null || true)
link() { # SRC_ROOT BUILD OUT
    cc -O2 -g -I"$1/src" -I"$2/src" -I"$2" -o "$3" "$ROOT/bench/symbolize/bench_symbolize.c" \
        "$2/src/symbolize/libpd_symbolize.a" "$2/src/symbolize/libpd_symbolize_elf.a" \
        "$2/src/pprof/libpd_pprof.a" "$2/src/base/libpd_base.a" $PKG -lpthread -lm
}
link "$ROOT" "$B" "$T/now"
echo "load: $(cut -d' ' -f1-3 /proc/loadavg)"
if [ -n "$BASE" ]; then
    link "$(cd "$BASE/.." && pwd)" "$BASE" "$T/base"
    printf 'base (%s): ' "$BASE"; "$T/base" "$ELF" "${RUNS:-5}"
fi
printf 'this tree: '; "$T/now" "$ELF" "${RUNS:-5}"
echo "load: $(cut -d' ' -f1-3 /proc/loadavg)"
