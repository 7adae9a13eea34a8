#!/bin/bash
# Pushes N active series to a running profd: one small folded CPU profile per
# series (Pyroscope's /ingest, name fleet.cpu{instance=i-K}), at T0 + 1 s
# each, over one keep-alive curl per 4 parts of the range (4 at once).
# With PPROF=file, that real pprof instead (profefe's /api/0/profiles,
# service fleet, type heap, instance_id i-K).
#   bench/fleet_queries/push.sh PORT N [FIRST=0] [T0=now-60]
set -euo pipefail
PORT=$1 N=$2 FIRST=${3:-0} T0=${4:-$(($(date +%s) - 60))}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
printf 'main;serve;handle;work 7\nmain;serve;gc 3\n' >"$tmp/body"
for part in 0 1 2 3; do
    awk -v p="$part" -v pprof="${PPROF:-}" -v n="$N" -v f="$FIRST" -v port="$PORT" -v t0="$T0" -v body="$tmp/body" 'BEGIN {
        for (i = f + p; i < f + n; i += 4) {
            if (i > f + p) print "next"
            if (pprof != "") {
                printf "url = \"http://127.0.0.1:%d/api/0/profiles?service=fleet&type=heap&instance_id=i-%d&created_at=%d\"\n", port, i, t0
                printf "data-binary = \"@%s\"\nheader = \"Content-Type: application/octet-stream\"\noutput = \"/dev/null\"\n", pprof
                continue
            }
            printf "url = \"http://127.0.0.1:%d/ingest?name=fleet.cpu%%7Binstance%%3Di-%d,zone%%3Dz%d%%7D&format=folded&sampleRate=100&from=%d&until=%d\"\n", port, i, i % 16, t0, t0 + 10
            printf "data-binary = \"@%s\"\noutput = \"/dev/null\"\n", body
        }}' >"$tmp/$part.curl"
    curl -sS -f -K "$tmp/$part.curl" &
done
wait
