#!/bin/sh
# bench/ingest_under_query/run.sh — issue 20's ingest-under-query load, by hand:
# starts build/profd on 127.0.0.1:${PORT:-21250} with a fresh storage, runs
# load.mjs (20 pushers of real heap profiles at 5/s each + 4 clients merging
# everything, 120 s), prints per-window figures and PASS/FAIL, stops profd.
#   bench/ingest_under_query/run.sh [SECONDS] [PUSHERS] [MERGERS] [RATE]
# Env: PROFD (binary, default build/profd), PORT, PROFD_ARGS (extra flags).
set -eu
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
profd=${PROFD:-$root/build/profd}
port=${PORT:-21250}
data=$(mktemp -d /tmp/profd-iuq.XXXXXX)
trap 'kill "$pid" 2>/dev/null; wait "$pid" 2>/dev/null; rm -rf "$data"' EXIT INT TERM
# shellcheck disable=SC2086
"$profd" serve --storage.path="$data" --web.listen-address=127.0.0.1:"$port" \
    --storage.wal.fsync=batch ${PROFD_ARGS:-} 2>"$data.log" &
pid=$!
for _ in $(seq 100); do
    curl -sf "http://127.0.0.1:$port/-/ready" >/dev/null 2>&1 && break
    sleep 0.1
done
echo "profd $("$profd" --version | head -1), pid $pid, $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg)"
node "$here/load.mjs" "http://127.0.0.1:$port" "$pid" "$@"
rc=$?
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
rm -f "$data.log"
exit $rc
