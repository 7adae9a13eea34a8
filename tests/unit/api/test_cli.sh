#!/bin/bash
# Tests of src/main.c, the profd command line: exit codes (0 ok, 1 runtime,
# 2 usage/config), both flag forms, the listen log line, SIGHUP reload that
# keeps the old config on error, POST /-/reload, and a clean SIGTERM.
# usage: test_cli.sh PROFD_BINARY
set -u
PROFD=$1
T=$(mktemp -d /tmp/profd-test-cli-XXXXXX)
PIDS=()
cleanup() {
    for p in "${PIDS[@]}"; do kill -KILL "$p" 2>/dev/null; done
    rm -rf "$T"
}
trap cleanup EXIT
fail() { echo "FAIL: $*"; [ -f "$T/log" ] && tail -20 "$T/log"; exit 1; }

expect_exit() { # want_code description args...
    local want=$1 what=$2
    shift 2
    timeout -s KILL 120 "$PROFD" "$@" >"$T/out" 2>"$T/err" </dev/null
    local got=$?
    [ "$got" = "$want" ] || fail "$what: exit $got, want $want; stderr: $(head -3 "$T/err")"
}

expect_exit 0 "--help" --help
grep -q -- "--config.file" "$T/out" || fail "--help lists --config.file"
grep -q -- "--web.listen-address" "$T/out" || fail "--help lists --web.listen-address"
expect_exit 0 "--version" --version
grep -q "profd, version " "$T/out" || fail "--version prints the version"

expect_exit 2 "unknown flag" --no.such.flag=1
grep -q 'unknown flag "--no.such.flag"' "$T/err" || fail "unknown flag is named"
grep -q "usage:" "$T/err" || fail "usage follows a bad flag"
expect_exit 2 "unknown command" frobnicate
expect_exit 2 "flag without value" serve --storage.path
expect_exit 2 "bad log level" --log.level=loud
expect_exit 2 "bad fsync" --storage.wal.fsync=sometimes
expect_exit 2 "bad listen address" --storage.path="$T/d0" --web.listen-address=nonsense

printf 'scrape_configs:\n  - job_name: a\n    bogus: 1\n' >"$T/bad.yaml"
expect_exit 2 "bad config" --storage.path="$T/d0" --config.file="$T/bad.yaml"
grep -q "bad.yaml:3" "$T/err" || fail "bad config message names file:line: $(cat "$T/err")"
expect_exit 2 "missing config" --storage.path="$T/d0" --config.file="$T/nope.yaml"

touch "$T/afile"
expect_exit 1 "storage path is a file" --storage.path="$T/afile/x" --web.listen-address=127.0.0.1:0

# A running server: `--flag value` form, port 0, a config with a dead target.
cat >"$T/good.yaml" <<'EOF'
global:
  scrape_interval: 5s
scrape_configs:
  - job_name: dead
    static_configs:
      - targets: ["127.0.0.1:1"]
EOF
cp "$T/good.yaml" "$T/live.yaml"
"$PROFD" serve --storage.path "$T/d1" --web.listen-address 127.0.0.1:0 --web.enable-lifecycle \
    --config.file "$T/live.yaml" --log.level debug 2>"$T/log" &
PID=$!
PIDS+=("$PID")
URL=
for _ in $(seq 1200); do
    URL=$(grep -o 'msg="profd listening" url=http://127\.0\.0\.1:[0-9]*/' "$T/log" | grep -o 'http://.*')
    [ -n "$URL" ] && break
    sleep 0.1
done
[ -n "$URL" ] || fail "no 'profd listening' line with the URL"
curl -sf "${URL}-/healthy" >/dev/null || fail "/-/healthy"

# port in use: exit 1
PORT=${URL#http://127.0.0.1:}
PORT=${PORT%/}
expect_exit 1 "port in use" --storage.path="$T/d2" --web.listen-address=127.0.0.1:"$PORT"
grep -q "127.0.0.1:$PORT" "$T/err" || fail "port in use message names the address"

jobs_of() { curl -sf "${URL}api/v1/targets" | grep -o '"scrapePool":"[a-z]*"' | sort -u | tr '\n' ' '; }
[ "$(jobs_of)" = '"scrapePool":"dead" ' ] || fail "targets before reload: $(jobs_of)"

# SIGHUP with a broken file: logged, old config kept, still serving
printf 'scrape_configs: [ {job_name: x, nope: 1} ]\n' >"$T/live.yaml"
kill -HUP "$PID"
for _ in $(seq 1200); do grep -q "reload failed" "$T/log" && break; sleep 0.1; done
grep -q "reload failed" "$T/log" || fail "a failed SIGHUP reload is logged"
kill -0 "$PID" || fail "profd died on a bad reload"
[ "$(jobs_of)" = '"scrapePool":"dead" ' ] || fail "old config kept: $(jobs_of)"

# POST /-/reload with the broken file: 500 naming the problem
code=$(curl -s -o "$T/reload" -w '%{http_code}' -X POST "${URL}-/reload")
[ "$code" = 500 ] || fail "/-/reload with a bad file: HTTP $code"
grep -q "live.yaml:1" "$T/reload" || fail "/-/reload error names file:line: $(cat "$T/reload")"

# SIGHUP with a good new file: the new job appears
sed 's/job_name: dead/job_name: other/' "$T/good.yaml" >"$T/live.yaml"
kill -HUP "$PID"
for _ in $(seq 1200); do [ "$(jobs_of)" = '"scrapePool":"other" ' ] && break; sleep 0.1; done
[ "$(jobs_of)" = '"scrapePool":"other" ' ] || fail "SIGHUP reload applied: $(jobs_of)"

# requests are logged at debug level
grep -q 'msg="http request" method=GET path="/api/v1/targets" status=200' "$T/log" ||
    fail "debug request log line"

kill -TERM "$PID"
wait "$PID"
rc=$?
[ "$rc" = 0 ] || fail "exit $rc after SIGTERM"
grep -q 'msg="profd stopped"' "$T/log" || fail "clean stop logged"
echo "ok"
