#!/bin/sh
# Installs the Debian 12 packages profd needs to build, run and test.
#   install-deps.sh          build and run (make build, make run)
#   install-deps.sh --test   also the npm packages of the tests (make test)
#   install-deps.sh --deb    only what the Debian package needs (make deb):
#                            debian/control's Build-Depends, Debian's packaging
#                            tools and lintian, and debootstrap for
#                            scripts/test-package.sh
# Idempotent: packages already present are skipped; apt-get update runs only
# when something is missing. Needs root (or sudo) when it has to install.
set -eu

PKGS="build-essential cmake pkg-config clang libclang-rt-14-dev \
libmicrohttpd-dev libcurl4-openssl-dev zlib1g-dev libdeflate-dev libzstd-dev libyaml-dev \
libjansson-dev libpcre2-dev libxxhash-dev libcmocka-dev libelf-dev libsnappy-dev \
protobuf-c-compiler libprotobuf-c-dev libprotobuf-dev \
golang-go graphviz chromium linux-perf curl jq ca-certificates \
prometheus prometheus-alertmanager openssl dnsmasq-base openjdk-17-jdk-headless \
libgnutls28-dev libcrypt-dev \
libbpf-dev bpftool libdw-dev libdebuginfod-dev debuginfod elfutils \
golang-opentelemetry-otel-dev clang-format"
# clang-format: `make format` and the style_format test (.clang-format holds the
# code's layout).
# libbpf-dev, bpftool (with clang above): profd-agent, the eBPF host profiler
# (its BPF program is compiled by clang -target bpf and turned into a libbpf
# skeleton by bpftool at build time; without them the build skips it).
# libdw-dev, libdebuginfod-dev: profd's symbolizer (DWARF lines, debug info
# by build ID from DEBUGINFOD_URLS). debuginfod: tests only (the e2e test of
# the agent serves a .debug file from a local debuginfod). elfutils: tests
# only (eu-addr2line -i checks that a test program's function is inlined).
# golang-opentelemetry-otel-dev: tests only — the OpenTelemetry Go API, SDK
# and stdout exporter (source under /usr/share/gocode) that
# tests/e2e/grafana/spanapp is built against, offline (traces to profiles).

# make deb: Build-Depends of debian/control (keep the two lists equal) and the tools
PKGS_DEB="build-essential debhelper dpkg-dev fakeroot help2man lintian debootstrap git \
cmake pkg-config libcrypt-dev libcurl4-openssl-dev libdeflate-dev libelf-dev libgnutls28-dev \
libjansson-dev libmicrohttpd-dev libpcre2-dev libprotobuf-c-dev libprotobuf-dev libsnappy-dev libxxhash-dev \
libyaml-dev libzstd-dev protobuf-c-compiler zlib1g-dev \
clang libbpf-dev bpftool libdw-dev libdebuginfod-dev"
if [ "${1:-}" = "--deb" ]; then
    PKGS="$PKGS_DEB"
fi

# clickhouse-server (18.16 in Debian 12): the ClickHouse backend's tests
# (tests/e2e/clickhouse.test.mjs, tests/unit/storage/test_clickhouse.c) start
# their own servers; zookeeper (3.8, run by java, already a test package:
# openjdk 17) coordinates the replicas of tests/e2e/clickhouse_replicas.test.mjs
# (--clickhouse.replicated). Debian builds clickhouse-server for amd64 only;
# elsewhere those tests skip with a message saying so.
if [ "${1:-}" = "--deb" ]; then
    :
elif dpkg-query -W -f='${Status}' clickhouse-server 2>/dev/null | grep -q "install ok installed" ||
   apt-cache policy clickhouse-server 2>/dev/null | grep -q 'Candidate: [0-9]'; then
    PKGS="$PKGS clickhouse-server zookeeper"
else
    echo "install-deps: clickhouse-server is not available here; the ClickHouse tests will skip" >&2
fi

missing=""
for p in $PKGS; do
    if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
        missing="$missing $p"
    fi
done

# Node.js: any node >= 18 with npm will do (a machine may carry its own build).
if [ "${1:-}" = "--deb" ]; then
    :
elif ! command -v node >/dev/null 2>&1; then missing="$missing nodejs"; fi
if [ "${1:-}" != "--deb" ] && ! command -v npm >/dev/null 2>&1; then missing="$missing npm"; fi

# Runs "$@", its output to a log; on failure prints the log's tail and what failed.
run_logged() {
    what=$1; shift
    log=$(mktemp "${TMPDIR:-/tmp}/install-deps.XXXXXX")
    if "$@" >"$log" 2>&1; then
        rm -f "$log"
        return 0
    else
        rc=$?
    fi
    echo "install-deps: FAILED ($rc): $what" >&2
    echo "install-deps: command: $*" >&2
    echo "install-deps: last lines of its output:" >&2
    tail -n 40 "$log" | sed 's/^/    /' >&2
    rm -f "$log"
    return "$rc"
}

if [ -n "$missing" ]; then
    echo "install-deps: installing:$missing"
    SUDO=""
    if [ "$(id -u)" != 0 ]; then
        if ! command -v sudo >/dev/null 2>&1; then
            echo "install-deps: these Debian packages are missing:$missing" >&2
            echo "install-deps: run this as root (or install sudo) to install them" >&2
            exit 1
        fi
        SUDO=sudo
    fi
    run_logged "apt-get update (needs the Debian mirrors of /etc/apt/sources.list*)" \
        $SUDO apt-get update -q || exit 1
    # shellcheck disable=SC2086
    run_logged "apt-get install of:$missing" \
        $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends $missing || exit 1
    echo "install-deps: installed:$missing"
    # prometheus is only a test tool (tests/e2e/collect.test.mjs runs its own on
    # loopback): the packaged service, started on :9090 by systemd, is stopped
    case " $missing " in
    *" prometheus "*)
        if command -v systemctl >/dev/null 2>&1 && [ -d /run/systemd/system ]; then
            $SUDO systemctl disable --now prometheus >/dev/null 2>&1 || true
        fi ;;
    esac
    # the same for Alertmanager (tests/e2e/adaptive_alert.test.mjs runs its own; :9093)
    case " $missing " in
    *" prometheus-alertmanager "*)
        if command -v systemctl >/dev/null 2>&1 && [ -d /run/systemd/system ]; then
            $SUDO systemctl disable --now prometheus-alertmanager >/dev/null 2>&1 || true
        fi ;;
    esac
fi

# npm packages of the tests: every tests/**/package.json (with its package-lock.json)
# is installed into its own node_modules, again whenever the lock file changed.
# playwright-core drives Debian's chromium in the browser tests (no browser download).
# Before npm runs, every lock file is checked against this machine's Node.js
# (Debian 12 ships 18): a package whose "engines" refuses it is named.
if [ "${1:-}" = "--test" ]; then
    here=$(cd "$(dirname "$0")/.." && pwd)
    pjs=$(cd "$here" && find tests -name package.json -not -path '*/node_modules/*' | sort)
    locks=""
    for pj in $pjs; do
        lock="$(dirname "$pj")/package-lock.json"
        if [ ! -f "$here/$lock" ]; then
            echo "install-deps: $pj has no package-lock.json beside it (npm ci needs one: run npm install there and commit it)" >&2
            exit 1
        fi
        locks="$locks $lock"
    done
    if [ -n "$locks" ]; then
        # shellcheck disable=SC2086
        if ! (cd "$here" && node scripts/check-node-engines.mjs $locks); then
            echo "install-deps: the npm packages of the tests do not accept Node.js $(node --version) ($(command -v node))" >&2
            exit 1
        fi
    fi
    for pj in $pjs; do
        dir="$here/$(dirname "$pj")"
        stamp="$dir/node_modules/.package-lock.json"
        if [ ! -f "$stamp" ] || [ "$dir/package-lock.json" -nt "$stamp" ]; then
            echo "install-deps: npm packages of $(dirname "$pj")"
            logs=$(npm config get cache 2>/dev/null || echo "$HOME/.npm")/_logs
            if ! (cd "$dir" && run_logged "npm ci in $(dirname "$pj") (needs the npm registry)" \
                    npm ci --no-audit --no-fund --loglevel=error); then
                newest=$(ls -t "$logs"/*-debug-*.log 2>/dev/null | head -n 1 || true)
                if [ -n "$newest" ]; then
                    echo "install-deps: last lines of npm's log $newest:" >&2
                    grep -v -e ' silly ' -e ' verbose stack ' "$newest" | tail -n 20 | sed 's/^/    /' >&2
                fi
                exit 1
            fi
        fi
    done
fi
