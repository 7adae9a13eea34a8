#!/bin/sh
# `make run`: builds the example Go program (examples/demo), starts it on
# 127.0.0.1:6060, starts profd scraping it (examples/profd.yaml, data in
# ./data) and prints the URL to open. Ctrl-C stops both. profd also
# scrapes itself (job `profd`: its own /debug/pprof/profile and /heap).
#
# Usage: scripts/run-demo.sh PATH/TO/profd
# Environment: DEMO_LISTEN (default 127.0.0.1:6060), PROFD_LISTEN (default
# 127.0.0.1:10902), PROFD_DATA (default ./data).
set -eu

profd=${1:?usage: $0 PATH/TO/profd}
here=$(cd "$(dirname "$0")/.." && pwd)
case $profd in /*) ;; *) profd="$(pwd)/$profd" ;; esac
[ -x "$profd" ] || { echo "run-demo: $profd is not an executable (run 'make build' first)" >&2; exit 1; }
command -v go >/dev/null 2>&1 || { echo "run-demo: 'go' not found; install golang-go (scripts/install-deps.sh)" >&2; exit 1; }

demo_listen=${DEMO_LISTEN:-127.0.0.1:6060}
profd_listen=${PROFD_LISTEN:-127.0.0.1:10902}
data=${PROFD_DATA:-./data}
build=$(dirname "$profd")
mkdir -p "$build/go"
build=$(cd "$build" && pwd)

# Go's caches under the build directory, so that this works for any user
# (no writable $HOME needed) and `make clean` removes them.
echo "run-demo: building examples/demo"
(cd "$here/examples/demo" && \
    GOCACHE="$build/go/cache" GOPATH="$build/go/path" GO111MODULE=on \
    go build -o "$build/go/demo" .)

demo_pid=""
profd_pid=""
cleanup() {
    trap - INT TERM EXIT
    [ -n "$profd_pid" ] && kill "$profd_pid" 2>/dev/null || true
    [ -n "$demo_pid" ] && kill "$demo_pid" 2>/dev/null || true
    [ -n "$profd_pid" ] && wait "$profd_pid" 2>/dev/null || true
    [ -n "$demo_pid" ] && wait "$demo_pid" 2>/dev/null || true
}
trap 'cleanup; exit 130' INT
trap 'cleanup; exit 143' TERM
trap cleanup EXIT

"$build/go/demo" -listen="$demo_listen" &
demo_pid=$!

config="$here/examples/profd.yaml"
if [ "$demo_listen" != "127.0.0.1:6060" ] || [ "$profd_listen" != "127.0.0.1:10902" ]; then
    # the demo job scrapes $demo_listen, the profd job profd itself
    config="$build/go/profd.yaml"
    sed -e "s/127.0.0.1:6060/$demo_listen/" -e "s/127.0.0.1:10902/$profd_listen/" \
        "$here/examples/profd.yaml" >"$config"
fi

"$profd" serve --config.file="$config" --storage.path="$data" \
    --web.listen-address="$profd_listen" --web.enable-lifecycle &
profd_pid=$!

sleep 1
if ! kill -0 "$demo_pid" 2>/dev/null; then
    echo "run-demo: the demo exited (is $demo_listen in use? set DEMO_LISTEN); see its messages above" >&2
    exit 1
fi
if ! kill -0 "$profd_pid" 2>/dev/null; then
    echo "run-demo: profd exited (is $profd_listen in use? set PROFD_LISTEN); see its messages above" >&2
    exit 1
fi
echo "profd: open http://$profd_listen/"
echo "run-demo: demo target at http://$demo_listen/debug/pprof/ ; Ctrl-C stops both"

# Wait until either one exits (or Ctrl-C).
while kill -0 "$profd_pid" 2>/dev/null && kill -0 "$demo_pid" 2>/dev/null; do
    sleep 1
done
echo "run-demo: a process exited; stopping" >&2
