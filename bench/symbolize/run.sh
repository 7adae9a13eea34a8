#!/bin/sh
# bench/symbolize/run.sh BUILD_DIR [ELF] [BASE_REV]
# CPU time of naming one address per function of ELF (default BUILD_DIR/profd)
# with the symbolizer of this tree and, for comparison, with
# src/symbolize/symbolize.c as of BASE_REV (default: the commit before inlined
# frames). Needs a RelWithDebInfo build in BUILD_DIR. Prints one line each.
set -eu
B=${1:?build dir}
ELF=${2:-$B/profd}
BASE=${3:-3373c13~1}
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
LIBS="$B/src/symbolize/libpd_symbolize.a $B/src/symbolize/libpd_symbolize_elf.a $B/src/pprof/libpd_pprof.a $B/src/base/libpd_base.a"
PKG=$(pkg-config --libs libdw libelf libdebuginfod libcurl jansson libzstd zlib libxxhash libdeflate libpcre2-8 2>/dev/null || true)
CFLAGS="-O2 -g -I$ROOT/src -I$B/src -I$B"
cc $CFLAGS -o "$T/now" "$ROOT/bench/symbolize/bench_symbolize.c" $LIBS $PKG -lpthread -lm
git -C "$ROOT" show "$BASE:src/symbolize/symbolize.c" > "$T/symbolize_base.c"
cc $CFLAGS -c -o "$T/symbolize_base.o" "$T/symbolize_base.c"
cc $CFLAGS -o "$T/base" "$ROOT/bench/symbolize/bench_symbolize.c" "$T/symbolize_base.o" $LIBS $PKG -lpthread -lm
echo "load: $(cut -d' ' -f1-3 /proc/loadavg)"
printf 'base (%s): ' "$BASE"; "$T/base" "$ELF" "${RUNS:-5}"
printf 'this tree:   '; "$T/now" "$ELF" "${RUNS:-5}"
