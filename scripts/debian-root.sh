#!/bin/bash
# Functions shared by the by-hand scripts that build a bare Debian 12 root
# (scripts/test-debian12.sh, scripts/test-package.sh). Sourced, not run.

# The host's Debian mirrors: every deb822 stanza or one-line "deb" entry whose
# suite is bookworm, bookworm-updates or bookworm-security.
host_sources() {
    local f
    for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
        [ -f "$f" ] || continue
        awk '$1 == "deb" { u = ""; for (i = 2; i <= NF; i++) if ($i ~ /^[a-z]+:\/\//) { u = $i; s = $(i + 1); break }
                           if (u != "" && s ~ /^bookworm(-updates|-security|\/updates)?$/) print u, s }' "$f"
    done
    for f in /etc/apt/sources.list.d/*.sources; do
        [ -f "$f" ] || continue
        awk 'BEGIN { RS = ""; FS = "\n" }
             { uris = ""; suites = ""; enabled = 1
               for (i = 1; i <= NF; i++) {
                   if ($i ~ /^URIs:/) { uris = $i; sub(/^URIs:[ \t]*/, "", uris) }
                   if ($i ~ /^Suites:/) { suites = $i; sub(/^Suites:[ \t]*/, "", suites) }
                   if ($i ~ /^Enabled:[ \t]*no/) enabled = 0 }
               if (!enabled) next
               nu = split(uris, U, /[ \t]+/); ns = split(suites, S, /[ \t]+/)
               for (a = 1; a <= nu; a++) for (b = 1; b <= ns; b++)
                   if (S[b] ~ /^bookworm(-updates|-security)?$/) print U[a], S[b] }' "$f"
    done
}
