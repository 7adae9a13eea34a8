#!/bin/sh
# tests/unit/ingest/perf_e2e.sh CONVERT_TOOL SRCDIR — `profd convert` on real
# producer output, checked by an independent reader (go tool pprof):
#  1. perf record -F 999 -g (cpu-clock) of perf_hot.c, built with frame
#     pointers; `perf script` text -> convert --from=perf-script -> pprof.
#     go tool pprof -top must put hot_leaf on top; the samples total must
#     equal the number of sample records in the perf script text; the
#     heaviest stack must be ...;main;middle;hot_leaf.
#  2. The same perf script text folded by a few lines of awk here (not by
#     profd) -> convert --from=folded --sample-rate=999 -> pprof. The
#     per-stack totals read back with go tool pprof -raw must equal the awk
#     file's, and so must those of the pprof from step 1; every
#     cpu/nanoseconds value must be samples * 1001001 (1e9/999).
# Exits 77 (skipped) when perf, go or cc is missing or perf cannot record.
set -u
TOOL=$1
SRC=$2
fail() { echo "FAIL: $*" >&2; exit 1; }
for c in perf go cc awk; do
    command -v $c >/dev/null 2>&1 || { echo "skip: $c not found"; exit 77; }
done
T=$(mktemp -d /tmp/pd-ingest-e2e.XXXXXX)
trap 'rm -rf "$T"' EXIT
export HOME=$T/home GOCACHE=$T/gocache GOFLAGS=-mod=mod
mkdir -p "$HOME"

cc -O0 -g -fno-omit-frame-pointer -o "$T/hot" "$SRC/perf_hot.c" || fail "cannot build perf_hot.c"
if ! perf record -q -e cpu-clock -F 999 -g -o "$T/hot.data" -- "$T/hot" 80 >/dev/null 2>"$T/perf.err"; then
    cat "$T/perf.err"; echo "skip: perf record does not work here"; exit 77
fi
perf script -i "$T/hot.data" >"$T/hot.txt" 2>/dev/null || fail "perf script failed"
N=$(awk '/^[^\t]/ && NF {n++} END {print n+0}' "$T/hot.txt")
[ "$N" -ge 50 ] || fail "only $N samples recorded"

# 1. perf-script -> pprof
"$TOOL" --from=perf-script "$T/hot.txt" "$T/perf.pb.gz" || fail "convert --from=perf-script failed"
go tool pprof -top "$T/perf.pb.gz" >"$T/perf.top" 2>&1 || { cat "$T/perf.top"; fail "go tool pprof -top"; }
TOP=$(awk '/flat%/ {getline; print $NF; exit}' "$T/perf.top")
[ "$TOP" = hot_leaf ] || { cat "$T/perf.top"; fail "top function is '$TOP', want hot_leaf"; }
go tool pprof -sample_index=samples -top "$T/perf.pb.gz" >"$T/perf.top2" 2>&1
TOTAL=$(awk '/Total samples =/ {print $NF; exit}' "$T/perf.top2")
[ "$TOTAL" = "$N" ] || { head "$T/perf.top2"; fail "samples total $TOTAL, want $N records"; }

# Per-stack totals of a pprof file from go tool pprof -raw: "root;...;leaf count".
stacks() {
    go tool pprof -raw "$1" 2>/dev/null | awk '
    /^Samples:/ { sec = "s"; next } /^Locations/ { sec = "l"; next } /^Mappings/ { sec = "m"; next }
    sec == "s" && /^ +[0-9]+ .*:/ { split($0, a, ":"); split(a[1], v, " "); nv = split(a[2], ids, " ");
        ns++; cnt[ns] = v[1]; v2[ns] = v[2]; st[ns] = ""; for (i = 1; i <= nv; i++) st[ns] = st[ns] " " ids[i] }
    sec == "l" && /^ +[0-9]+: / { id = $1; sub(":", "", id); k = 3; if ($k ~ /^M=/) k++;
        name[id] = (k <= NF && $k !~ /^:/) ? $k : "?" }
    END { for (j = 1; j <= ns; j++) { nv = split(st[j], ids, " "); s = "";
            for (i = nv; i >= 1; i--) s = s (s == "" ? "" : ";") name[ids[i]];
            sum[s] += cnt[j]; if (CHECK && v2[j] != cnt[j] * 1001001) bad++ }
          for (s in sum) print s, sum[s]; if (bad) print "BAD-NS-VALUES", bad }' CHECK="${2:-}"
}
# compare NAME: folds $T/NAME.txt with awk (root first, +0xOFF stripped,
# [unknown] -> ?), converts the fold with --from=folded and the text with
# --from=perf-script, and diffs the per-stack totals of all three.
compare() {
awk '
function flush() { if (have) { s = ""; for (i = n; i >= 1; i--) s = s (s == "" ? "" : ";") f[i]; c[s]++ } have = 0; n = 0 }
/^\t/ { line = $0; sub(/^[ \t]+[0-9a-f]+ /, "", line); sub(/ \([^()]*\)$/, "", line);
        sub(/\+0x[0-9a-f]+$/, "", line); if (line == "[unknown]" || line == "") line = "?"; f[++n] = line; next }
/^[ \t]*$/ { flush(); next }
{ flush(); have = 1 }
END { flush(); for (s in c) print s, c[s] }' "$T/$1.txt" >"$T/$1.folded"
    [ -s "$T/$1.folded" ] || fail "$1: awk fold is empty"
    "$TOOL" --from=folded --sample-rate=999 "$T/$1.folded" "$T/$1.folded.pb.gz" || fail "$1: convert --from=folded failed"
    [ -f "$T/$1.pb.gz" ] || "$TOOL" --from=perf-script "$T/$1.txt" "$T/$1.pb.gz" || fail "$1: convert --from=perf-script failed"
    sort "$T/$1.folded" >"$T/$1.want"
    stacks "$T/$1.folded.pb.gz" 1 | sort >"$T/$1.got.folded"
    stacks "$T/$1.pb.gz" | sort >"$T/$1.got.perf"
    diff "$T/$1.want" "$T/$1.got.folded" >&2 || fail "$1: folded conversion: per-stack totals differ from the awk fold"
    diff "$T/$1.want" "$T/$1.got.perf" >&2 || fail "$1: perf-script conversion: per-stack totals differ from the awk fold"
}

# 2. per-stack totals, on the hot program and on a workload with many
#    stacks (kernel frames, [unknown] frames, shared libraries)
cp "$T/perf.pb.gz" "$T/hot.pb.gz"
compare hot
if perf record -q -e cpu-clock -F 999 -g -o "$T/ls.data" -- sh -c 'ls -lR /usr/include /usr/share/doc; ls -lR /usr/include' >/dev/null 2>&1 &&
   perf script -i "$T/ls.data" >"$T/ls.txt" 2>/dev/null; then
    compare ls
else
    fail "perf record of ls failed"
fi

HEAVY=$(sort -k2,2nr -t' ' "$T/hot.got.perf" | awk '{print $1; exit}')
case "$HEAVY" in
    *\;main\;middle\;hot_leaf) ;;
    *) fail "heaviest stack is '$HEAVY', want ...;main;middle;hot_leaf" ;;
esac
go tool pprof -top "$T/hot.folded.pb.gz" >"$T/folded.top" 2>&1
TOP=$(awk '/flat%/ {getline; print $NF; exit}' "$T/folded.top")
[ "$TOP" = hot_leaf ] || { cat "$T/folded.top"; fail "folded: top function is '$TOP'"; }
# 3. perf script -F +srcline: same stacks; hot_leaf's locations carry
#    perf_hot.c and a line inside hot_leaf's body (between its definition
#    and warm_leaf's, found in the source here)
perf script -i "$T/hot.data" -F +srcline >"$T/src.txt" 2>/dev/null || fail "perf script -F +srcline failed"
"$TOOL" --from=perf-script "$T/src.txt" "$T/src.pb.gz" || fail "convert of srcline output failed"
stacks "$T/src.pb.gz" | sort >"$T/src.got"
diff "$T/hot.want" "$T/src.got" >&2 || fail "srcline conversion: per-stack totals differ"
perf script -i "$T/ls.data" -F +srcline >"$T/lssrc.txt" 2>/dev/null || fail "perf script -F +srcline (ls) failed"
"$TOOL" --from=perf-script "$T/lssrc.txt" "$T/lssrc.pb.gz" || fail "convert of srcline output (ls) failed"
stacks "$T/lssrc.pb.gz" | sort >"$T/lssrc.got"
diff "$T/ls.want" "$T/lssrc.got" >&2 || fail "srcline conversion (ls): per-stack totals differ"
FIRST=$(grep -n 'static void hot_leaf' "$SRC/perf_hot.c" | cut -d: -f1)
LAST=$(grep -n 'static void warm_leaf' "$SRC/perf_hot.c" | cut -d: -f1)
go tool pprof -raw "$T/src.pb.gz" 2>/dev/null | awk -v lo="$FIRST" -v hi="$LAST" '
    /^Locations/ { l = 1; next } /^Mappings/ { l = 0 }
    l && $4 == "hot_leaf" { n++; split($5, fl, ":"); if (fl[1] !~ /perf_hot\.c$/ || fl[2] <= lo || fl[2] >= hi) { print "bad position", $0; bad++ } }
    END { if (!n) print "no hot_leaf location"; exit (n && !bad) ? 0 : 1 }' >&2 ||
    fail "srcline conversion: hot_leaf positions are not inside hot_leaf in perf_hot.c"

echo "ok: hot: $N samples, $(wc -l <"$T/hot.want") stacks; ls: $(wc -l <"$T/ls.want") stacks"
