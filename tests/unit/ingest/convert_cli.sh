#!/bin/sh
# tests/unit/ingest/convert_cli.sh CONVERT_TOOL — `profd convert` as a
# command: exit codes (0 ok, 1 failure, 2 usage), messages naming the file
# and line, stdin/stdout, and no partial output file on failure.
set -u
TOOL=$1
T=$(mktemp -d /tmp/pd-ingest-cli.XXXXXX)
trap 'rm -rf "$T"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
# expect CODE PATTERN ARGS...: runs the tool, checks the exit code and that
# stderr matches PATTERN (grep -E).
expect() {
    code=$1 pat=$2
    shift 2
    "$TOOL" "$@" >"$T/out" 2>"$T/err" </dev/null
    rc=$?
    [ "$rc" = "$code" ] || { cat "$T/err"; fail "'$*': exit $rc, want $code"; }
    grep -Eq -- "$pat" "$T/err" || { cat "$T/err"; fail "'$*': stderr does not match '$pat'"; }
}
printf 'main;work 3\r\nmain;idle 1\n' >"$T/ok.folded"
printf 'main;work 3\nmain;idle\n' >"$T/bad.folded"
printf 'x 1 1.5: 10 cpu-clock: \n\tzz f (/b)\n' >"$T/bad.perf"

expect 2 'usage' 
expect 2 '--from is required' "$T/ok.folded" "$T/o.pb.gz"
expect 2 "unknown input format 'pprof'" --from=pprof "$T/ok.folded" "$T/o.pb.gz"
expect 2 "unknown flag '--bogus'" --from=folded --bogus "$T/ok.folded" "$T/o.pb.gz"
expect 2 'need IN and OUT' --from=folded "$T/ok.folded"
expect 2 "unexpected argument" --from=folded a b c
expect 2 "--sample-rate '0'" --from=folded --sample-rate=0 "$T/ok.folded" "$T/o.pb.gz"
expect 2 "needs a value" --from=folded "$T/ok.folded" "$T/o.pb.gz" --type
expect 1 "$T/missing: No such file" --from=folded "$T/missing" "$T/o.pb.gz"
expect 1 "$T/bad.folded: line 2: no count" --from=folded "$T/bad.folded" "$T/o.pb.gz"
expect 1 "$T/bad.perf: line 2: not a frame line" --from perf-script "$T/bad.perf" "$T/o.pb.gz"
[ -e "$T/o.pb.gz" ] || [ -e "$T/o.pb.gz.tmp" ] && fail "output written after a failure"
expect 1 "$T/nodir/o.pb.gz: No such file" --from=folded "$T/ok.folded" "$T/nodir/o.pb.gz"

"$TOOL" --from=folded --sample-rate 250 --type wall "$T/ok.folded" "$T/o.pb.gz" || fail "convert failed"
[ -e "$T/o.pb.gz.tmp" ] && fail "temp file left behind"
gzip -t "$T/o.pb.gz" || fail "output is not gzip"
# stdin -> stdout gives the same bytes as file -> file
"$TOOL" --from=folded --sample-rate=250 --type=wall - - <"$T/ok.folded" >"$T/o2.pb.gz" || fail "stdin/stdout failed"
cmp -s "$T/o.pb.gz" "$T/o2.pb.gz" || fail "stdin/stdout output differs from file output"
if command -v go >/dev/null 2>&1; then
    export HOME=$T/home GOCACHE=$T/gocache
    mkdir -p "$HOME"
    go tool pprof -raw "$T/o.pb.gz" >"$T/raw" 2>&1 || { cat "$T/raw"; fail "go tool pprof cannot read the output"; }
    grep -q '^PeriodType: wall nanoseconds' "$T/raw" || fail "period type"
    grep -q '^Period: 4000000' "$T/raw" || fail "period at 250 Hz"
    grep -Eq '^ +3 +12000000: ' "$T/raw" || { cat "$T/raw"; fail "3 samples at 250 Hz are 12 ms"; }
fi
"$TOOL" --help >/dev/null || fail "--help"
echo ok
