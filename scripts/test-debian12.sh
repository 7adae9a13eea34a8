#!/bin/bash
# Tests the install path of profd on a bare Debian 12 (run by hand, as root; not by CI).
#
# Builds a minimal Debian 12 root with `debootstrap --variant=minbase bookworm`
# (+ git, make, ca-certificates, a standard /etc/hosts), clones the project into
# it with ../shared copied beside the clone, mounts /proc /sys /dev /dev/pts
# /dev/shm (unmounted on exit), and runs there with chroot:
#   1. `make test`  (installs the Debian and npm packages itself: Debian's Node 18)
#   2. `make run`   must print the URL within RUN_TIMEOUT seconds (default 60);
#                   it is then stopped.
# Prints pass/fail and the elapsed time of each; exits 0 only if both passed.
#
# Usage: scripts/test-debian12.sh [-r ROOT] [-b BRANCH] [-s N] [-k] [REPO]
#   REPO    the git repository to clone (default: the one holding this script);
#           its ../shared is copied beside the clone
#   -b      branch to clone (default: REPO's current branch)
#   -r      where to build the root (default ${TMPDIR:-/var/tmp}/profd-debian12);
#           an existing root there is reused (debootstrap skipped), its clone replaced
#   -s N    keep the machine busy during `make test`: N `stress-ng --cpu 2`
#           beside it on the host (installed if missing); default 0
#   -k      keep the root afterwards (default: kept too; delete it with rm -rf
#           once unmounted; this flag only silences the hint)
# Environment: RUN_TIMEOUT (seconds, default 60), MAKE_RUN_DEMO_LISTEN and
# MAKE_RUN_PROFD_LISTEN (the chroot shares the host's network: defaults
# 127.0.0.1:21150 and 127.0.0.1:21151 instead of make run's 6060/10902).
# The Debian mirror is the host's (read from /etc/apt/sources.list and
# /etc/apt/sources.list.d/*): Debian mirrors and the npm registry must be reachable.
set -euo pipefail

here=$(cd "$(dirname "$0")/.." && pwd)
root=${TMPDIR:-/var/tmp}/profd-debian12
branch=""
keep_hint=1
stress=0
while getopts "r:b:s:k" opt; do
    case $opt in
    r) root=$OPTARG ;;
    b) branch=$OPTARG ;;
    s) stress=$OPTARG ;;
    k) keep_hint=0 ;;
    *) sed -n '2,25p' "$0" >&2; exit 2 ;;
    esac
done
shift $((OPTIND - 1))
repo=${1:-$here}
repo=$(cd "$repo" && pwd)
[ -n "$branch" ] || branch=$(git -C "$repo" rev-parse --abbrev-ref HEAD)
shared="$(dirname "$repo")/shared"
run_timeout=${RUN_TIMEOUT:-60}
demo_listen=${MAKE_RUN_DEMO_LISTEN:-127.0.0.1:21150}
profd_listen=${MAKE_RUN_PROFD_LISTEN:-127.0.0.1:21151}

say() { echo "test-debian12: $*"; }
die() { echo "test-debian12: $*" >&2; exit 1; }

[ "$(id -u)" = 0 ] || die "needs root (debootstrap, mount, chroot)"
[ -d "$shared" ] || die "$shared (the ../shared beside $repo) does not exist"

# host_sources: the host's Debian mirrors for bookworm (shared with test-package.sh)
. "$here/scripts/debian-root.sh"
sources=$(host_sources | sort -u)
mirror=$(echo "$sources" | awk '$2 == "bookworm" { print $1; exit }')
[ -n "$mirror" ] || die "no bookworm entry in /etc/apt/sources.list or /etc/apt/sources.list.d/: which Debian mirror?"
say "mirror $mirror (from the host's apt sources); root $root; cloning $repo branch $branch"

if ! command -v debootstrap >/dev/null 2>&1; then
    say "installing debootstrap"
    apt-get update -q >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -q debootstrap >/dev/null \
        || die "could not install debootstrap (apt-get install debootstrap)"
fi

mounted=()
make_run_pid=""
stress_pids=()
load_pid=""
cleanup() {
    local i
    for i in "${stress_pids[@]}" $load_pid; do kill "$i" 2>/dev/null || true; done
    stress_pids=()
    load_pid=""
    if [ -n "$make_run_pid" ]; then kill -TERM -- "-$make_run_pid" 2>/dev/null || true; sleep 2; kill -KILL -- "-$make_run_pid" 2>/dev/null || true; fi
    unmount_all test-debian12
}
trap cleanup EXIT
trap 'exit 130' INT TERM

t0=$(date +%s)
if [ -x "$root/bin/sh" ] && [ -f "$root/etc/debian_version" ]; then
    say "reusing the Debian root in $root (delete it for a fresh one)"
else
    say "debootstrap --variant=minbase bookworm (log: $root.debootstrap.log)"
    mkdir -p "$root"
    if ! debootstrap --variant=minbase --include=git,make,ca-certificates bookworm "$root" "$mirror" \
            >"$root.debootstrap.log" 2>&1; then
        tail -n 30 "$root.debootstrap.log" >&2
        die "debootstrap failed (log $root.debootstrap.log)"
    fi
fi
# A stock install's apt sources (the host's mirrors for bookworm, -updates, -security),
# hosts and resolver.
echo "$sources" | awk '{ print "deb", $1, $2, "main" }' >"$root/etc/apt/sources.list"
printf '127.0.0.1\tlocalhost\n::1\t\tlocalhost ip6-localhost ip6-loopback\nff02::1\t\tip6-allnodes\nff02::2\t\tip6-allrouters\n' \
    >"$root/etc/hosts"
cp -L /etc/resolv.conf "$root/etc/resolv.conf"
# The host's own certificate authorities (a proxy of this network that re-signs TLS,
# as npm's registry is reached through here): a machine on this network has them too.
if ls /usr/local/share/ca-certificates/*.crt >/dev/null 2>&1; then
    mkdir -p "$root/usr/local/share/ca-certificates"
    cp /usr/local/share/ca-certificates/*.crt "$root/usr/local/share/ca-certificates/"
    chroot "$root" update-ca-certificates >/dev/null 2>&1 || say "update-ca-certificates failed in the root"
    say "copied the host's local CAs: $(cd /usr/local/share/ca-certificates && echo *.crt)"
fi
t_root=$(date +%s)
say "root ready in $((t_root - t0)) s"

rm -rf "$root/src"
mkdir -p "$root/src"
git clone -q --branch "$branch" "$repo" "$root/src/profd"
cp -a "$shared" "$root/src/shared"
say "cloned $(git -C "$root/src/profd" log -1 --format='%h %s')"

mount_root_fs "$root"

# Node.js reads extra CAs only from NODE_EXTRA_CA_CERTS: passed on when the host sets it.
extra_env=()
[ -z "${NODE_EXTRA_CA_CERTS:-}" ] || extra_env+=("NODE_EXTRA_CA_CERTS=$NODE_EXTRA_CA_CERTS")
in_root() {
    chroot "$root" /usr/bin/env -i HOME=/root TERM="${TERM:-dumb}" LANG=C.UTF-8 "${extra_env[@]}" \
        PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin "$@"
}

log="$root.make-test.log"
if [ "$stress" -gt 0 ]; then
    command -v stress-ng >/dev/null 2>&1 || { apt-get update -q >/dev/null; DEBIAN_FRONTEND=noninteractive apt-get install -y -q stress-ng >/dev/null; } ||
        die "could not install stress-ng"
    for ((i = 0; i < stress; i++)); do
        stress-ng --cpu 2 --timeout 3h >/dev/null 2>&1 &
        stress_pids+=($!)
    done
    say "$stress x stress-ng --cpu 2 running beside make test"
fi
# the load average every 30 s while make test runs (the 1-minute figure)
loadlog="$root.load.log"
: >"$loadlog"
(while :; do cut -d' ' -f1 /proc/loadavg >>"$loadlog"; sleep 30; done) &
load_pid=$!
say "make test in the chroot (log: $log); load average now: $(cut -d' ' -f1-3 /proc/loadavg)"
t1=$(date +%s)
test_rc=0
in_root /bin/sh -c 'cd /src/profd && make test' >"$log" 2>&1 || test_rc=$?
t2=$(date +%s)
kill "$load_pid" 2>/dev/null || true
load_pid=""
for p in "${stress_pids[@]}"; do kill "$p" 2>/dev/null || true; done
stress_pids=()
say "load average during make test (1 min, every 30 s): mean $(awk '{ s += $1; n++ } END { if (n) printf "%.2f", s / n }' "$loadlog"), max $(sort -g "$loadlog" | tail -1), at the end $(cut -d' ' -f1-3 /proc/loadavg)"
sed -n '/==== make test summary ====/,$p' "$log"
if [ "$test_rc" = 0 ]; then test_result=PASS; else test_result="FAIL (exit $test_rc)"; tail -n 40 "$log" >&2; fi
say "make test: $test_result in $((t2 - t1)) s ($(((t2 - t1) / 60)) min)"
say "the chroot's node: $(in_root node --version 2>/dev/null || echo none), npm $(in_root npm --version 2>/dev/null || echo none);" \
    "$(in_root dpkg-query -W -f='.\n' | wc -l) Debian packages, $(du -sxm "$root" | cut -f1) MB in the root"

runlog="$root.make-run.log"
say "make run in the chroot: the URL within $run_timeout s? (log: $runlog)"
t3=$(date +%s)
setsid chroot "$root" /usr/bin/env -i HOME=/root LANG=C.UTF-8 "${extra_env[@]}" DEMO_LISTEN="$demo_listen" PROFD_LISTEN="$profd_listen" \
    PROFD_DATA=/tmp/profd-run-data PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    /bin/sh -c 'cd /src/profd && exec make run' >"$runlog" 2>&1 </dev/null &
make_run_pid=$!
run_result="FAIL (no URL within $run_timeout s)"
while [ $(($(date +%s) - t3)) -lt "$run_timeout" ]; do
    if grep -q "http://$profd_listen" "$runlog"; then
        if in_root sh -c "command -v curl >/dev/null" && \
                in_root curl -fsS -o /dev/null --max-time 10 "http://$profd_listen/"; then
            run_result="PASS (URL printed after $(($(date +%s) - t3)) s and answering)"
        else
            run_result="FAIL (URL printed after $(($(date +%s) - t3)) s but http://$profd_listen/ does not answer)"
        fi
        break
    fi
    if ! kill -0 "$make_run_pid" 2>/dev/null; then run_result="FAIL (make run exited)"; break; fi
    sleep 1
done
kill -TERM -- "-$make_run_pid" 2>/dev/null || true
wait "$make_run_pid" 2>/dev/null || true
make_run_pid=""
case $run_result in PASS*) ;; *) tail -n 30 "$runlog" >&2 ;; esac
say "make run: $run_result"

cleanup
say "RESULT: make test $test_result in $((t2 - t1)) s (stress-ng x$stress); make run $run_result; total $(($(date +%s) - t0)) s"
[ "$keep_hint" = 0 ] || say "the root stays in $root (rm -rf it when done; nothing is mounted there now)"
[ "$test_rc" = 0 ] && case $run_result in PASS*) true ;; *) false ;; esac
