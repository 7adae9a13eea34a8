#!/bin/sh
# go_pprof_raw.sh REENCODE TESTDATA_DIR
#
# For every *.pb.gz under TESTDATA_DIR: re-encode it with profd's codec
# (REENCODE IN OUT [raw], both gzip and raw protobuf) and check that
# `go tool pprof -raw` prints the same profile for the original and the
# re-encoded file.
#
# What is compared: pprof -raw prints a header (comments, period type,
# period, time, duration, sample types), one line per sample (values ":"
# location ids, then label lines), a Locations section ("id: addr M=mapping
# function file:line s=start", inlined frames on continuation lines) and a
# Mappings section ("id: start/limit/offset file buildid flags"). Ids are not
# meaningful, so each sample is rewritten with its location ids replaced by
# the location text (and the mapping id in it by the mapping text), the
# samples are sorted, and the header plus these sorted samples must be equal.
#
# Exit 0 when all match, 1 on a difference, 77 (skip) when go is absent.
set -u
if ! command -v go >/dev/null 2>&1; then
    echo "go not found: skipping"
    exit 77
fi
reencode=$1
dir=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT INT TERM
export GOCACHE="$tmp/gocache" HOME="$tmp" GOPATH="$tmp/gopath" PPROF_TMPDIR="$tmp"

# normalize FILE: pprof -raw output of FILE with ids resolved, samples sorted
normalize() {
    go tool pprof -raw "$1" >"$tmp/raw.txt" 2>"$tmp/raw.err" || {
        echo "go tool pprof -raw $1 failed:" >&2
        cat "$tmp/raw.err" >&2
        return 1
    }
    awk '
    function strip_id(s) { sub(/^ *[0-9]+: /, "", s); return s }
    BEGIN { sec = "head"; ns = 0 }
    sec == "head" && /^Samples:$/ { print; sec = "types"; next }
    sec == "head" { print; next }
    sec == "types" { print; sec = "samples"; next }
    /^Locations$/ { sec = "loc"; next }
    /^Mappings$/ { sec = "map"; next }
    sec == "samples" {
        if ($0 ~ /^ *-?[0-9]+( +-?[0-9]+)*:( |$)/) {
            ns++; line = $0
            split(line, parts, ":")
            vals[ns] = parts[1]; gsub(/ +/, " ", vals[ns]); sub(/^ /, "", vals[ns])
            ids[ns] = substr(line, index(line, ":") + 1)
            labs[ns] = ""
        } else {
            l = $0; sub(/^ +/, "", l); labs[ns] = labs[ns] " # " l
        }
        next
    }
    sec == "loc" {
        if ($0 ~ /^ *[0-9]+: /) {
            cur = $0; sub(/^ */, "", cur); cur = substr(cur, 1, index(cur, ":") - 1) + 0
            loc[cur] = strip_id($0)
        } else {
            l = $0; sub(/^ +/, "", l); loc[cur] = loc[cur] " / " l
        }
        next
    }
    sec == "map" {
        if ($0 ~ /^[0-9]+: /) {
            id = substr($0, 1, index($0, ":") - 1) + 0
            map[id] = strip_id($0)
        }
        next
    }
    END {
        for (i = 1; i <= ns; i++) {
            n = split(ids[i], a, " ")
            s = vals[i] " @"
            for (j = 1; j <= n; j++) {
                d = loc[a[j] + 0]
                if (match(d, /M=[0-9]+/)) {
                    m = substr(d, RSTART + 2, RLENGTH - 2) + 0
                    d = substr(d, 1, RSTART - 1) "M=[" map[m] "]" substr(d, RSTART + RLENGTH)
                }
                s = s " | " d
            }
            print s labs[i] | "LC_ALL=C sort"
        }
    }' "$tmp/raw.txt"
}

fail=0
n=0
for f in $(find "$dir" -name '*.pb.gz' | LC_ALL=C sort); do
    n=$((n + 1))
    normalize "$f" >"$tmp/orig.txt" || { fail=1; continue; }
    if [ "$(grep -c ' @' "$tmp/orig.txt")" = 0 ] && [ "$(grep -c . "$tmp/orig.txt")" -lt 3 ]; then
        echo "FAIL $f: pprof -raw printed no header (normalizer broken?)"
        fail=1
        continue
    fi
    for mode in gzip raw; do
        out="$tmp/re.$mode.pb"
        if ! "$reencode" "$f" "$out" $([ $mode = raw ] && echo raw); then
            echo "FAIL $f: re-encode ($mode) failed"
            fail=1
            continue
        fi
        normalize "$out" >"$tmp/re.txt" || { fail=1; continue; }
        if ! cmp -s "$tmp/orig.txt" "$tmp/re.txt"; then
            echo "FAIL $f ($mode): go tool pprof -raw differs:"
            diff "$tmp/orig.txt" "$tmp/re.txt" | head -20
            fail=1
        fi
    done
done
# negative control: a re-encoding with one value changed must be caught
f=$(find "$dir" -name 'heap*.pb.gz' | LC_ALL=C sort | head -1)
if [ -n "$f" ]; then
    normalize "$f" >"$tmp/orig.txt" &&
        "$reencode" "$f" "$tmp/mut.pb" gzip mutate &&
        normalize "$tmp/mut.pb" >"$tmp/mut.txt" || fail=1
    if cmp -s "$tmp/orig.txt" "$tmp/mut.txt"; then
        echo "FAIL: the comparison did not notice a changed sample value in $f"
        fail=1
    fi
fi
if [ "$n" = 0 ]; then
    echo "FAIL: no *.pb.gz under $dir"
    exit 1
fi
[ $fail = 0 ] && echo "ok: $n profiles, pprof -raw identical after gzip and raw re-encoding"
exit $fail
