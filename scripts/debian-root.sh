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

# Mounts /proc, /sys, /dev, /dev/pts and /dev/shm into the root $1 and
# appends each to the caller's array `mounted` (unmount_all undoes them);
# the /dev mounts are bind mounts made slaves, so that nothing done under the
# root reaches the host's /dev.
mount_root_fs() {
    local m
    for m in proc sys dev dev/pts dev/shm; do
        mkdir -p "$1/$m"
        case $m in
        proc) mount -t proc proc "$1/proc" ;;
        sys) mount -t sysfs sysfs "$1/sys" ;;
        *) mount --bind "/$m" "$1/$m"; mount --make-rslave "$1/$m" ;;
        esac
        mounted+=("$1/$m")
    done
}

# Unmounts what the caller's array `mounted` holds, newest first (lazily when
# busy), and empties it; $1 names the caller in the message of one that stays.
unmount_all() {
    local i
    for ((i = ${#mounted[@]} - 1; i >= 0; i--)); do
        umount "${mounted[i]}" 2>/dev/null || umount -l "${mounted[i]}" 2>/dev/null || echo "$1: could not unmount ${mounted[i]}" >&2
    done
    mounted=()
}
