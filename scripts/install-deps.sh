#!/bin/sh
# Installs the Debian 12 packages profd needs to build, run and test.
# Idempotent: packages already present are skipped; apt-get update runs only
# when something is missing. Needs root (or sudo) when it has to install.
set -eu

PKGS="build-essential cmake pkg-config clang libclang-rt-14-dev \
libmicrohttpd-dev libcurl4-openssl-dev zlib1g-dev libdeflate-dev libzstd-dev libyaml-dev \
libjansson-dev libpcre2-dev libxxhash-dev libcmocka-dev \
protobuf-c-compiler libprotobuf-c-dev libprotobuf-dev \
golang-go graphviz chromium linux-perf curl jq ca-certificates"

missing=""
for p in $PKGS; do
    if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
        missing="$missing $p"
    fi
done

# Node.js: any node >= 18 with npm will do (a machine may carry its own build).
if ! command -v node >/dev/null 2>&1; then missing="$missing nodejs"; fi
if ! command -v npm >/dev/null 2>&1; then missing="$missing npm"; fi

if [ -n "$missing" ]; then
    echo "install-deps: installing:$missing"
    SUDO=""
    if [ "$(id -u)" != 0 ]; then SUDO=sudo; fi
    $SUDO apt-get update -q
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends $missing
fi

# playwright-core drives Debian's chromium in the browser tests (no browser download).
if [ "${1:-}" = "--test" ]; then
    here=$(cd "$(dirname "$0")/.." && pwd)
    if [ ! -d "$here/tests/ui/node_modules/playwright-core" ]; then
        (cd "$here/tests/ui" && npm install --no-audit --no-fund --silent)
    fi
    # @datadog/pprof (with its prebuilt native module) for the Node producer of tests/e2e
    if [ ! -d "$here/tests/e2e/node_modules/@datadog/pprof" ]; then
        (cd "$here/tests/e2e" && npm install --no-audit --no-fund --silent)
    fi
fi
