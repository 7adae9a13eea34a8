#!/bin/bash
# Tiny series on fresh real data (issue 27 item 4): collects mutex, block,
# threadcreate and goroutine series of bench/storage_size/workload (two
# instances, 1 s and 10 s scrapes; collect_fresh.sh) with each Go toolchain
# asked for, unless OUT already holds that Go version's data, then for each
# dataset (Go version x instance x interval) writes the blocks
# (bench_storage_size --verify: every profile read back equal) and prints
# each series against `zstd -19 --long` of the whole series ("SERIES" lines:
# B/profile of zstd, of profd in the block shared by the dataset's series,
# and of profd alone in a block).
#
#   bench/storage_size/run_fresh.sh [--go PATH]... [--install-go 1.NN]...
#                                   [BUILD_DIR=build] [N1=480] [N10=48] [-- bench args]
#
# --go PATH        collect with this go binary (repeatable; default: `go` on
#                  PATH, Debian 12's golang-go 1.19).
# --install-go V   install golang-V-go (1.21, 1.22, 1.23) from Debian's
#                  bookworm-backports and collect with /usr/lib/go-V/bin/go
#                  (repeatable; needs root). /etc/apt is not changed: apt reads
#                  the backports source from a temporary list
#                  (Dir::Etc::sourcelist), keeps the lists of the system's own
#                  sources (APT::Get::List-Cleanup=0), and the package installs
#                  beside /usr/bin/go without replacing it.
# Each Go's collection runs at the same time as the others' (the defaults take
# ~8 minutes whatever the number of versions), then ~1 minute per dataset.
set -euo pipefail
cd "$(dirname "$0")/../.."
gos=()
install_backports_go() { # 1.NN
    local v=$1 list
    [[ $v =~ ^1\.[0-9]+$ ]] || { echo "run_fresh.sh: --install-go $v: expected 1.NN" >&2; exit 2; }
    if [ ! -x "/usr/lib/go-$v/bin/go" ]; then
        list=$(mktemp)
        echo "deb http://deb.debian.org/debian bookworm-backports main" >"$list"
        local o=(-o "Dir::Etc::sourcelist=$list" -o Dir::Etc::sourceparts=- -o APT::Get::List-Cleanup=0)
        apt-get update "${o[@]}" >/dev/null
        DEBIAN_FRONTEND=noninteractive apt-get install -y "${o[@]}" -t bookworm-backports "golang-$v-go" >/dev/null
        rm -f "$list"
    fi
    gos+=("/usr/lib/go-$v/bin/go")
}
while [ $# -gt 0 ]; do
    case $1 in
        --go) gos+=("${2:?--go PATH}"); shift 2 ;;
        --install-go) install_backports_go "${2:?--install-go 1.NN}"; shift 2 ;;
        *) break ;;
    esac
done
[ ${#gos[@]} -gt 0 ] || gos=("${GO:-go}")
B=${1:-build}; N1=${2:-480}; N10=${3:-48}
shift $(( $# < 3 ? $# : 3 )); [ "${1:-}" = -- ] && shift
OUT=${OUT:-bench/out/storage_size/fresh}
cmake --build "$B" --target bench_storage_size -j2 >/dev/null
pids=()
for g in "${gos[@]}"; do
    gv=$(GOTOOLCHAIN=local "$g" env GOVERSION)
    ls -d "$OUT/$gv-"* >/dev/null 2>&1 && continue
    GO=$g bench/storage_size/collect_fresh.sh "$OUT" "$N1" "$N10" &
    pids+=($!)
done
for p in "${pids[@]}"; do wait "$p"; done
echo "machine: $(nproc) cores, $(awk -F': ' '/model name/{print $2; exit}' /proc/cpuinfo), load $(cut -d' ' -f1-3 /proc/loadavg)"
rc=0
for d in "$OUT"/*/; do
    name=$(basename "$d")
    rm -rf "bench/out/storage_size/blocks-fresh"
    log=$("$B"/tests/unit/storage/bench_storage_size "$d" bench/out/storage_size/blocks-fresh --verify "$@" 2>&1) || rc=1
    grep -E '^verify:' <<<"$log" | tail -1 | sed "s|^|$name |"
    grep -E '^SERIES' <<<"$log" | sed "s|^SERIES|$name|"
done
exit $rc
