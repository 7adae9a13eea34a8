#!/bin/bash
# tests/unit/ingest/push_e2e.sh PROFD SRCDIR — real producers' output pushed
# to a real `profd serve` (loopback, temporary storage) and read back through
# the query API, checked against expectations computed here from the input:
#  1. Folded stacks written by a real tool: Linux perf's own
#     stackcollapse.py (`perf script -s .../stackcollapse.py`, Brendan
#     Gregg's collapsed format) of `perf record -F 999 -g` of perf_hot.c and
#     of an `ls -lR` workload (kernel frames, [unknown], shared libraries).
#     Each file is POSTed to Pyroscope's /ingest?format=folded; the flame
#     graph read back (report=flamegraph, sample_index=samples) must hold,
#     for every root-to-node path, the same self total as the sum of the
#     file's counts for that stack (awk here, never profd), and the root the
#     file's total; the cpu nanoseconds at 100 Hz (Pyroscope's default) must
#     be 10 ms per sample.
#  2. `perf script` text of perf_hot.c pushed with `profd push
#     --format=perf-script`: report=top puts hot_leaf first; in the flame
#     graph hot_leaf's heaviest node sits under middle, which sits under
#     main (callers in order); the samples total equals the number of sample
#     records in the text.
# Flame graphs are walked with node (jq's parser stops at 256 levels of
# nesting, which a deep kernel stack exceeds).
# Exits 77 (skipped) when perf, cc, curl, jq or node is missing or perf cannot
# record here. KEEP=1 keeps the temporary directory.
set -u
PROFD=$1
SRC=$2
fail() { echo "FAIL: $*" >&2; exit 1; }
for c in perf cc curl jq awk node; do
    command -v $c >/dev/null 2>&1 || { echo "skip: $c not found"; exit 77; }
done
COLLAPSE=
for d in /usr/lib/perf-core /usr/libexec/perf-core /usr/lib/linux-tools/*/; do
    [ -f "$d/scripts/python/stackcollapse.py" ] && COLLAPSE=$d/scripts/python/stackcollapse.py
done
[ -n "$COLLAPSE" ] || { echo "skip: perf's stackcollapse.py not found"; exit 77; }
T=$(mktemp -d /tmp/pd-push-e2e.XXXXXX)
PID=
cleanup() {
    [ -n "$PID" ] && kill "$PID" 2>/dev/null && wait "$PID" 2>/dev/null
    if [ -n "${KEEP:-}" ]; then echo "kept $T"; else rm -rf "$T"; fi
}
trap cleanup EXIT

cc -O0 -g -fno-omit-frame-pointer -o "$T/hot" "$SRC/perf_hot.c" || fail "cannot build perf_hot.c"
if ! perf record -q -e cpu-clock -F 999 -g -o "$T/hot.data" -- "$T/hot" 80 >/dev/null 2>"$T/perf.err"; then
    cat "$T/perf.err"; echo "skip: perf record does not work here"; exit 77
fi
perf record -q -e cpu-clock -F 999 -g -o "$T/ls.data" -- \
    sh -c 'ls -lR /usr/include /usr/share/doc; ls -lR /usr/include' >/dev/null 2>&1 ||
    fail "perf record of ls failed"
for w in hot ls; do
    perf script -i "$T/$w.data" >"$T/$w.txt" 2>/dev/null || fail "perf script ($w) failed"
    perf script -i "$T/$w.data" -s "$COLLAPSE" >"$T/$w.folded" 2>"$T/$w.collapse.err" ||
        { cat "$T/$w.collapse.err"; fail "stackcollapse.py ($w) failed"; }
    [ -s "$T/$w.folded" ] || fail "stackcollapse.py ($w) wrote nothing"
done

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

# query SEL TIME REPORT [SAMPLE_INDEX] -> JSON of /api/v1/query on stdout
query() {
    curl -sfG "$URL/api/v1/query" --data-urlencode "query=$1" --data-urlencode "time=$2" \
        --data-urlencode "report=$3" --data-urlencode "sample_index=${4:-samples}" \
        --data-urlencode limit=0
}
# fg MODE FILE: walks the flame graph JSON of FILE (iteratively: stacks can
# be thousands deep). MODE flat: "path;to;node self" for every node with
# self != 0 (root excluded); MODE hot: the path to the heaviest node named
# hot_leaf, then on a second line the path taken from the root by always
# descending into the heaviest child. MODE root: the root's value.
cat >"$T/fg.js" <<'JS'
const [mode, file] = process.argv.slice(2);
const root = JSON.parse(require('fs').readFileSync(file, 'utf8')).data;
if (mode === 'root') {
  console.log(root.value);
  process.exit(0);
}
const out = [];
let best = null;
const todo = root.children.map((c) => [c, c.name]);
while (todo.length) {
  const [n, p] = todo.pop();
  if (mode === 'flat' && n.self !== 0) out.push(`${p} ${n.self}`);
  if (n.name === 'hot_leaf' && (!best || n.value > best.v)) best = { v: n.value, p };
  for (const c of n.children) todo.push([c, `${p};${c.name}`]);
}
if (mode === 'hot') {
  const heavy = [];
  for (let n = root; n.children.length; ) {
    n = n.children.reduce((a, b) => (b.value > a.value ? b : a));
    heavy.push(n.name);
  }
  out.push(best ? best.p : '', heavy.join(';'));
}
console.log(out.join('\n'));
JS

# --- 1. real folded files through /ingest, read back as flame graphs
T0=1700000000
i=0
for w in hot ls; do
    i=$((i + 1))
    ts=$((T0 + 100 * i))
    code=$(curl -s -o "$T/reply" -w '%{http_code}' --data-binary @"$T/$w.folded" \
        -H 'Content-Type: text/plain' "$URL/ingest?name=fold$w.cpu&from=$ts&format=folded")
    [ "$code" = 200 ] || { cat "$T/reply"; fail "$w.folded: /ingest answered $code"; }
    # the expectation, from the file: stack -> summed count
    awk '{ c = $NF; s = $0; sub(/ +[0-9]+$/, "", s); sum[s] += c } END { for (s in sum) print s, sum[s] }' \
        "$T/$w.folded" | sort >"$T/$w.want"
    total=$(awk '{ t += $NF } END { print t }' "$T/$w.folded")
    query "cpu{service_name=\"fold$w\"}" $ts flamegraph >"$T/$w.fg.json" ||
        fail "$w: flamegraph query failed"
    node "$T/fg.js" flat "$T/$w.fg.json" | sort >"$T/$w.got" || fail "$w: flamegraph is not the expected JSON"
    diff "$T/$w.want" "$T/$w.got" >&2 || fail "$w: per-stack totals of the flame graph differ from the folded file"
    v=$(node "$T/fg.js" root "$T/$w.fg.json")
    [ "$v" = "$total" ] || fail "$w: flame graph root $v, want $total"
    query "cpu{service_name=\"fold$w\"}" $ts flamegraph cpu >"$T/$w.fgns.json" || fail "$w: cpu query"
    v=$(node "$T/fg.js" root "$T/$w.fgns.json")
    [ "$v" = "$((total * 10000000))" ] || fail "$w: cpu nanoseconds $v, want $total x 10 ms"
    echo "ok: $w.folded: $(wc -l <"$T/$w.want") stacks, $total samples"
done

# --- 2. perf script text through `profd push --format=perf-script`
N=$(awk '/^[^\t]/ && NF {n++} END {print n+0}' "$T/hot.txt")
[ "$N" -ge 50 ] || fail "only $N samples recorded"
"$PROFD" push --url "$URL" --service perfhot --format=perf-script \
    --created-at=2024-05-06T07:08:09Z "$T/hot.txt" >"$T/out" 2>"$T/err" ||
    { cat "$T/out" "$T/err"; fail "profd push --format=perf-script failed"; }
grep -q "$T/hot.txt: pushed cpu at 2024-05-06T07:08:09" "$T/out" || { cat "$T/out"; fail "push: no pushed line"; }
TS=$(date -u -d 2024-05-06T07:08:09Z +%s)
SEL='cpu{service="perfhot"}'
query "$SEL" $TS top >"$T/top.json" || fail "top query failed"
top=$(jq -r '.data.rows[0].function' "$T/top.json")
[ "$top" = hot_leaf ] || { jq -c '.data.rows[:5]' "$T/top.json"; fail "top function is '$top', want hot_leaf"; }
[ "$(jq '.data.total' "$T/top.json")" = "$N" ] || fail "samples total $(jq .data.total "$T/top.json"), want $N records"
query "$SEL" $TS flamegraph >"$T/perf.fg.json" || fail "flamegraph query failed"
# the path (root first) to the heaviest hot_leaf node, and the route from
# the root always taking the heaviest child
node "$T/fg.js" hot "$T/perf.fg.json" >"$T/hot.paths" || fail "flamegraph is not the expected JSON"
path=$(sed -n 1p "$T/hot.paths")
heavy=$(sed -n 2p "$T/hot.paths")
case "$path" in
    *\;main\;middle\;hot_leaf) ;;
    *) fail "heaviest hot_leaf path is '$path', want ...;main;middle;hot_leaf" ;;
esac
# the heaviest route passes through it (kernel frames of an interrupt may
# hang below)
case "$heavy;" in
    "$path;"*) ;;
    *) fail "heaviest descent is '$heavy', not through '$path'" ;;
esac
echo "ok: perf script: $N samples, hottest path $path"
