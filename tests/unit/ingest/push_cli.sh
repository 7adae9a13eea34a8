#!/bin/bash
# tests/unit/ingest/push_cli.sh PROFD TESTDATA — `profd push` against a
# real `profd serve` on a free loopback port with a temporary storage directory:
#   - one invocation pushing real Go pprof profiles (cpu, heap, mutex, block,
#     goroutine), a folded-stacks file, a garbage file and a missing file:
#     exit 1, one message per bad file naming it, and exactly the good ones
#     stored, under the series and at the times they should be (the type
#     guessed from the sample types; the time from the profile's time_nanos,
#     which `go tool pprof -raw` prints, or the folded file's mtime);
#   - the stored bytes of a pushed pprof equal the file (profefe's GET by
#     id), and query?report=proto reads back the same profile
#     (`go tool pprof -raw` of both are equal);
#   - the folded file's totals: 3+1 samples at the default 100 Hz;
#   - a server refusal (pushing the same profile twice: 409) prints the
#     server's error message; an unreachable server is a failure per file;
#   - usage errors exit 2 and push nothing.
# KEEP=1 keeps the temporary directory for a look after a failure.
set -u
PROFD=$1
TD=$2/pprof
T=$(mktemp -d /tmp/pd-push-cli.XXXXXX)
PID=
cleanup() {
    [ -n "$PID" ] && kill "$PID" 2>/dev/null && wait "$PID" 2>/dev/null
    if [ -n "${KEEP:-}" ]; then echo "kept $T"; else rm -rf "$T"; fi
}
trap cleanup EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
command -v jq >/dev/null || { echo "jq missing: skipped"; exit 77; }
command -v curl >/dev/null || { echo "curl missing: skipped"; exit 77; }

# the pushed profiles span years (their own times): no retention, which
# would delete those older than 15 d before the newest
"$PROFD" serve --storage.path "$T/data" --web.listen-address 127.0.0.1:0 \
    --storage.retention.time=100y 2>"$T/log" &
PID=$!
URL=
for _ in $(seq 1200); do
    URL=$(grep -o 'msg="profd listening" url=http://127\.0\.0\.1:[0-9]*/' "$T/log" | grep -o 'http://.*')
    [ -n "$URL" ] && break
    kill -0 "$PID" 2>/dev/null || { cat "$T/log"; fail "profd serve exited"; }
    sleep 0.1
done
[ -n "$URL" ] || { cat "$T/log"; fail "profd did not start"; }
URL=${URL%/}

# series of service "svc" as "NAME TIMESTAMP..." lines, sorted
series() {
    curl -sfG "$URL/api/v1/query_range" --data-urlencode "query={service=\"${1:-svc}\"}" \
        --data-urlencode from=0 --data-urlencode to=4102444800 >"$T/range.json" ||
        fail "query_range failed"
    jq -r '.data[] | "\(.labels.__name__) \(.labels.instance_id) \(.labels.env) \(.timestamps | map(tostring) | join(","))"' \
        "$T/range.json" | sort
}
# the Unix ms of a profile's time_nanos, as go tool pprof prints it
export HOME=$T/home GOCACHE=$T/gocache
mkdir -p "$HOME"
HAVE_GO=0
command -v go >/dev/null && HAVE_GO=1
time_ms() {
    t=$(go tool pprof -raw "$1" 2>/dev/null | sed -n 's/^Time: \([0-9-]* [0-9:]*\.[0-9]\{3\}\).*/\1/p')
    [ -n "$t" ] || fail "no Time in $1"
    echo $(( $(date -u -d "$t" +%s%3N) ))
}

mkdir "$T/in"
cp "$TD/go-demo-once/profile.pb.gz" "$T/in/cpu.pb.gz"
cp "$TD/go-demo-once/heap.pb.gz" "$TD/go-demo-once/mutex.pb.gz" "$TD/go-demo-once/block.pb.gz" \
    "$TD/go-demo-once/goroutine.pb.gz" "$T/in/"
printf 'main;work 3\nmain;idle 1\n' >"$T/in/stacks.folded"
touch -d '2026-01-02T03:04:05.250Z' "$T/in/stacks.folded"
head -c 3000 /dev/urandom >"$T/in/garbage.pb.gz"
printf '\037\213garbage' >>"$T/in/garbage.pb.gz"

# --- usage errors: exit 2, nothing pushed
expect_usage() {
    pat=$1
    shift
    "$PROFD" push --url "$URL" "$@" >"$T/out" 2>"$T/err"
    rc=$?
    [ "$rc" = 2 ] || { cat "$T/err"; fail "'$*': exit $rc, want 2"; }
    grep -Eq -- "$pat" "$T/err" || { cat "$T/err"; fail "'$*': stderr does not match '$pat'"; }
}
G=$T/in/cpu.pb.gz
expect_usage 'no FILE' --service svc
expect_usage '--service is required' "$G"
expect_usage "--type 'wall' is not one of" --service svc --type wall "$G"
expect_usage "unknown flag '--bogus'" --service svc --bogus "$G"
expect_usage "needs a value" --service svc "$G" --label
expect_usage "the name must be UTF-8" --service svc --label "$(printf 'a\tb=1')" "$G"
expect_usage "the name must be UTF-8" --service svc --label __name__=a "$G"
expect_usage "value is empty" --service svc --label env= "$G"
expect_usage "given twice" --service svc --label env=a --label env=b "$G"
expect_usage "disagrees" --service svc --label service=other "$G"
expect_usage "unknown --format 'json'" --service svc --format=json "$G"
expect_usage "--sample-rate applies" --service svc --sample-rate=99 "$G"
expect_usage "--created-at 'yesterday'" --service svc --created-at=yesterday "$G"
expect_usage "--timeout 'forever'" --service svc --timeout=forever "$G"
expect_usage "--url 'ftp://x'" --service svc --url=ftp://x "$G"
expect_usage "stdin\\) given twice" --service svc - -
"$PROFD" push --help >"$T/out" 2>&1 || fail "--help"
grep -q -- '--service' "$T/out" || fail "--help lists --service"
[ -z "$(series)" ] || fail "usage errors pushed something: $(series)"

# --- one invocation: good, garbage, missing (pprof files)
"$PROFD" push --url "$URL/" --service svc --instance-id host1 --label env=test \
    "$T/in/cpu.pb.gz" "$T/in/garbage.pb.gz" "$T/in/heap.pb.gz" "$T/in/missing.pb.gz" \
    "$T/in/mutex.pb.gz" "$T/in/block.pb.gz" "$T/in/goroutine.pb.gz" >"$T/out" 2>"$T/err"
rc=$?
[ "$rc" = 1 ] || { cat "$T/out" "$T/err"; fail "exit $rc with bad files, want 1"; }
grep -q "$T/in/garbage.pb.gz: not a valid pprof profile" "$T/err" || { cat "$T/err"; fail "no message for the garbage file"; }
grep -q "$T/in/missing.pb.gz: No such file" "$T/err" || { cat "$T/err"; fail "no message for the missing file"; }
grep -q "2 of 7 files not pushed" "$T/err" || { cat "$T/err"; fail "summary line"; }
[ "$(grep -c "$T/in/" "$T/err")" = 2 ] || { cat "$T/err"; fail "want exactly 2 messages naming files"; }
[ "$(grep -c ': pushed ' "$T/out")" = 5 ] || { cat "$T/out"; fail "want 5 pushed lines"; }

# exactly the good ones, each under the type its sample types (and for
# mutex/block its file name) say, at its time_nanos
got=$(series)
if [ "$HAVE_GO" = 1 ]; then
    want=$(for f in cpu:cpu heap:heap mutex:mutex block:block goroutine:goroutine; do
        echo "${f%%:*} host1 test $(time_ms "$T/in/${f#*:}.pb.gz")"
    done | sort)
else
    want=$(echo "$got" | sed 's/ [0-9]*$//')
    got=$(echo "$got" | sed 's/ [0-9]*$//')
    [ "$want" = "$(printf 'block host1 test\ncpu host1 test\ngoroutine host1 test\nheap host1 test\nmutex host1 test')" ] ||
        fail "series: $got"
fi
[ "$got" = "$want" ] || fail "stored series:
$got
want:
$want"

# the stored bytes are the file's (profefe GET by id), and the profile read
# back through the query API is the same profile
id=$(sed -n "s|^$T/in/cpu.pb.gz: pushed cpu at .* (id \([0-9a-f]*\))\$|\1|p" "$T/out")
[ -n "$id" ] || { cat "$T/out"; fail "no id for cpu.pb.gz"; }
curl -sf "$URL/api/0/profiles/$id" -o "$T/byid.pb.gz" || fail "GET /api/0/profiles/$id"
cmp -s "$T/byid.pb.gz" "$T/in/cpu.pb.gz" || fail "stored bytes differ from the pushed file"
if [ "$HAVE_GO" = 1 ]; then
    ts=$(time_ms "$T/in/cpu.pb.gz")
    curl -sfG "$URL/api/v1/query" --data-urlencode 'query=cpu{service="svc"}' \
        --data-urlencode "time=$((ts / 1000)).$(printf %03d $((ts % 1000)))" \
        --data-urlencode report=proto -o "$T/back.pb.gz" || fail "query?report=proto"
    go tool pprof -raw "$T/back.pb.gz" >"$T/back.raw" 2>&1 || fail "pprof -raw of the read-back"
    go tool pprof -raw "$T/in/cpu.pb.gz" >"$T/orig.raw" 2>&1 || fail "pprof -raw of the file"
    diff "$T/orig.raw" "$T/back.raw" >/dev/null || fail "read-back profile differs from the file"
fi

# --- a folded file with a garbage one, converted locally
printf 'main;work 3\nmain;idle\n' >"$T/in/bad.folded"
"$PROFD" push --url "$URL" --label service=fold --format folded \
    "$T/in/stacks.folded" "$T/in/bad.folded" >"$T/out" 2>"$T/err"
rc=$?
[ "$rc" = 1 ] || { cat "$T/out" "$T/err"; fail "folded: exit $rc, want 1"; }
grep -q "$T/in/bad.folded: line 2" "$T/err" || { cat "$T/err"; fail "folded: no message naming the line"; }
grep -q "$T/in/stacks.folded: pushed cpu at 2026-01-02T03:04:05.250Z" "$T/out" || { cat "$T/out"; fail "folded: pushed line"; }
[ "$(series fold)" = "cpu null null $(date -u -d 2026-01-02T03:04:05.250Z +%s%3N)" ] ||
    fail "folded series: $(series fold)"
# 4 samples; 100 Hz (Pyroscope's default) makes each 10 ms of cpu
jq -ce '.data[0] | [.sample_types[] | .type + "/" + .unit] == ["samples/count", "cpu/nanoseconds"]
        and .totals[0] == [4, 40000000]' "$T/range.json" >/dev/null ||
    fail "folded totals: $(jq -c '.data[0]' "$T/range.json")"

# --- stdin, --created-at and --type given
"$PROFD" push --url "$URL" --service=stdin --type=other --created-at=2026-03-04T05:06:07Z - \
    <"$T/in/heap.pb.gz" >"$T/out" 2>"$T/err" || { cat "$T/err"; fail "push from stdin"; }
[ "$(series stdin)" = "other null null $(date -u -d 2026-03-04T05:06:07Z +%s%3N)" ] ||
    fail "stdin series: $(series stdin)"

# --- hostile files: each refused locally with a message naming the file and
#     the problem, exit 1, nothing stored, and no request made (the server's
#     rejection counters do not move)
metric() { curl -sf "$URL/metrics" | awk -v k="$1" 'index($0, k " ") == 1 { v = $NF } END { print v + 0 }'; }
rej_before=$(curl -sf "$URL/metrics" | grep '^profd_rejected_input_total' | sort)
before=$(series)
head -c 300000000 /dev/zero | gzip -9 >"$T/in/bomb.pb.gz"
H=$TD/go-demo-once/heap.pb.gz
head -c $(($(wc -c <"$H") / 2)) "$H" >"$T/in/trunc.pb.gz"
gunzip -c "$H" >"$T/raw.pb"
head -c $(($(wc -c <"$T/raw.pb") - 7)) "$T/raw.pb" >"$T/in/trunc-raw.pb"
: >"$T/in/empty.pb.gz"
HAVE_PY=0
if command -v python3 >/dev/null; then
    HAVE_PY=1
    python3 "$(dirname "$0")/label_profile.py" 100000 1 "$T/in/labels.pb.gz" || fail "label_profile.py"
    python3 "$(dirname "$0")/label_profile.py" 1 10485760 "$T/in/bigvalue.pb.gz" || fail "label_profile.py"
    python3 "$(dirname "$0")/label_profile.py" 2 5 "$T/in/fine.pb.gz" || fail "label_profile.py"
fi
BAD="$T/in/bomb.pb.gz $T/in/trunc.pb.gz $T/in/trunc-raw.pb $T/in/empty.pb.gz"
[ "$HAVE_PY" = 1 ] && BAD="$BAD $T/in/labels.pb.gz $T/in/bigvalue.pb.gz"
nbad=$(echo $BAD | wc -w)
# shellcheck disable=SC2086
"$PROFD" push --url "$URL" --service hostile $BAD >"$T/out" 2>"$T/err"
rc=$?
[ "$rc" = 1 ] || { cat "$T/out" "$T/err"; fail "hostile files: exit $rc, want 1"; }
expect_msg() {
    grep -q -- "^profd push: $1: $2" "$T/err" || { cat "$T/err"; fail "no message '$1: $2'"; }
}
expect_msg "$T/in/bomb.pb.gz" "over a server limit: gunzip: decompressed data exceeds the cap"
expect_msg "$T/in/trunc.pb.gz" "not a valid pprof profile: gunzip: truncated"
expect_msg "$T/in/trunc-raw.pb" "not a valid pprof profile: "
expect_msg "$T/in/empty.pb.gz" "empty file"
if [ "$HAVE_PY" = 1 ]; then
    expect_msg "$T/in/labels.pb.gz" "over a server limit: .*sample 0: [0-9]* exceeds the cap max_labels_per_sample=1024"
    expect_msg "$T/in/bigvalue.pb.gz" "over a server limit: sample 0: label value is 10485760 bytes"
fi
grep -q "$nbad of $nbad files not pushed" "$T/err" || { cat "$T/err"; fail "hostile: summary line"; }
[ ! -s "$T/out" ] || { cat "$T/out"; fail "hostile: something was reported pushed"; }
[ "$(series)" = "$before" ] && [ -z "$(series hostile)" ] || fail "hostile files changed the store"
[ "$(curl -sf "$URL/metrics" | grep '^profd_rejected_input_total' | sort)" = "$rej_before" ] ||
    fail "hostile files reached the server (its rejection counters moved)"
# a well-formed labelled profile goes through (the generator is not the problem)
if [ "$HAVE_PY" = 1 ]; then
    "$PROFD" push --url "$URL" --service hostile "$T/in/fine.pb.gz" >"$T/out" 2>"$T/err" ||
        { cat "$T/err"; fail "fine.pb.gz not pushed"; }
    [ -n "$(series hostile)" ] || fail "fine.pb.gz not stored"
fi
# the server's own checks, with the local ones out of the way (curl): each
# 4xx names the problem and is counted in /metrics, nothing is stored
before=$(series hostile)
server_refuses() { # FILE STATUS REASON PATTERN
    r0=$(metric "profd_rejected_input_total{reason=\"$3\"}")
    code=$(curl -s -o "$T/reply" -w '%{http_code}' --data-binary @"$1" \
        "$URL/api/0/profiles?service=hostile&type=heap&created_at=2020-01-01T00:00:00")
    [ "$code" = "$2" ] || { cat "$T/reply"; fail "server: $1: HTTP $code, want $2"; }
    jq -e --arg p "$4" '.code == '"$2"' and (.error | test($p))' "$T/reply" >/dev/null ||
        { cat "$T/reply"; fail "server: $1: reply does not name '$4'"; }
    r1=$(metric "profd_rejected_input_total{reason=\"$3\"}")
    [ "$r1" = $((r0 + 1)) ] || fail "server: $1: rejected{$3} went $r0 -> $r1"
}
server_refuses "$T/in/bomb.pb.gz" 413 too_large "decompressed"
server_refuses "$T/in/trunc.pb.gz" 400 bad_profile "truncated"
server_refuses "$T/in/garbage.pb.gz" 400 bad_profile "invalid profile"
if [ "$HAVE_PY" = 1 ]; then
    server_refuses "$T/in/labels.pb.gz" 413 too_large "max_labels_per_sample"
    server_refuses "$T/in/bigvalue.pb.gz" 413 too_large "label value"
fi
[ "$(series hostile)" = "$before" ] || fail "server refusals changed the store"

# --- the server refuses: its message is shown; nothing new is stored
before=$(series)
"$PROFD" push --url "$URL" --service svc --instance-id host1 --label env=test \
    "$T/in/cpu.pb.gz" >"$T/out" 2>"$T/err"
rc=$?
# profefe stores every push under a new id: the same file again is stored
# again, one millisecond later
[ "$rc" = 0 ] || { cat "$T/err"; fail "duplicate push: exit $rc, want 0"; }
[ "$(series)" != "$before" ] || fail "the duplicate push was not stored again"

# --- labels travel URL-escaped: ',', '+', '%', spaces and dotted names survive
"$PROFD" push --url "$URL" --service esc --label "note=a,b+c%d e" --label k8s.pod=web-1 \
    "$T/in/cpu.pb.gz" >"$T/out" 2>"$T/err" || { cat "$T/err"; fail "escaped labels: push failed"; }
curl -sfG "$URL/api/v1/query_range" --data-urlencode 'query={service="esc"}' \
    --data-urlencode from=0 --data-urlencode to=4102444800 >"$T/esc.json" || fail "query_range esc"
[ "$(jq -r '.data[0].labels.note' "$T/esc.json")" = "a,b+c%d e" ] ||
    { cat "$T/esc.json"; fail "label value not kept as given"; }
[ "$(jq -r '.data[0].labels["k8s.pod"]' "$T/esc.json")" = "web-1" ] ||
    { cat "$T/esc.json"; fail "dotted label name not kept"; }

# --- nobody listening: one failure per file
PORT=${URL##*:}
kill "$PID" && wait "$PID" 2>/dev/null
PID=
"$PROFD" push --url "http://127.0.0.1:$PORT" --service svc --timeout 5s \
    "$T/in/cpu.pb.gz" "$T/in/heap.pb.gz" >"$T/out" 2>"$T/err"
rc=$?
[ "$rc" = 1 ] || fail "no server: exit $rc, want 1"
[ "$(grep -c "cannot push to http://127.0.0.1:$PORT/api/0/profiles" "$T/err")" = 2 ] ||
    { cat "$T/err"; fail "no server: want one message per file"; }
echo ok
