#!/bin/sh
# Installs the Debian 12 packages profd needs to build, run and test.
# Idempotent: packages already present are skipped; apt-get update runs only
# when something is missing. Needs root (or sudo) when it has to install.
set -eu

PKGS="build-essential cmake pkg-config clang libclang-rt-14-dev \
libmicrohttpd-dev libcurl4-openssl-dev zlib1g-dev libdeflate-dev libzstd-dev libyaml-dev \
libjansson-dev libpcre2-dev libxxhash-dev libcmocka-dev \
protobuf-c-compiler libprotobuf-c-dev libprotobuf-dev \
golang-go graphviz chromium linux-perf curl jq ca-certificates \
prometheus openssl dnsmasq-base"

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
    # prometheus is only a test tool (tests/e2e/collect.test.mjs runs its own on
    # loopback): the packaged service, started on :9090 by systemd, is stopped
    case " $missing " in
    *" prometheus "*)
        if command -v systemctl >/dev/null 2>&1 && [ -d /run/systemd/system ]; then
            $SUDO systemctl disable --now prometheus >/dev/null 2>&1 || true
        fi ;;
    esac
fi

# npm packages of the tests: every tests/**/package.json (with its package-lock.json)
# is installed into its own node_modules, again whenever the lock file changed.
# playwright-core drives Debian's chromium in the browser tests (no browser download).
if [ "${1:-}" = "--test" ]; then
    here=$(cd "$(dirname "$0")/.." && pwd)
    for pj in $(cd "$here" && find tests -name package.json -not -path '*/node_modules/*' | sort); do
        dir="$here/$(dirname "$pj")"
        stamp="$dir/node_modules/.package-lock.json"
        if [ ! -f "$stamp" ] || [ "$dir/package-lock.json" -nt "$stamp" ]; then
            echo "install-deps: npm packages of $(dirname "$pj")"
            (cd "$dir" && npm ci --no-audit --no-fund --silent)
        fi
    done
fi
