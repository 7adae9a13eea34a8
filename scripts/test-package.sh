#!/bin/bash
# Tests profd's Debian package on a bare Debian 12 (run by hand, as root; not by CI).
#
#   1. clones the repository (a clean clone) and builds the package there with
#      `scripts/build-deb.sh` (dpkg-buildpackage + lintian), then a second,
#      newer one: VERSION and debian/changelog bumped to <version>+pkgtest1 and
#      committed in the clone (an upgrade with a new commit);
#   2. makes a bare Debian 12 root (`debootstrap --variant=minbase bookworm`,
#      nothing else; cached in BASE and copied afresh for each run) and
#      installs the package there with `apt-get install ./profd_<version>_<arch>.deb`;
#   3. edits both conffiles as a user would (the listen port in
#      /etc/default/profd's ARGS and the self-scrape target in
#      /etc/profd/profd.yml, plus a marker comment);
#   4. runs profd as the unit would, without systemd (none in a chroot): the
#      unit's ExecStart, as its User, with its EnvironmentFile, parsed from the
#      installed profd.service; checks that profd serves (/-/ready, version,
#      profd_build_info) and stores its own heap and CPU profiles (query_range
#      and files under /var/lib/profd owned by the user);
#   5. `systemd-analyze verify` of the installed unit on the host (--root);
#   6. upgrades to the newer package with apt-get: the edited conffiles and
#      the stored profiles must stay (the same points answered by query_range
#      after a restart of the new binary, which must say the new version);
#   7. `dpkg --purge profd` and `apt-get autoremove --purge` (its
#      dependencies): every path of the root must be as before the install,
#      with the same owner and mode (dpkg/apt state, caches and logs aside);
#      /etc/passwd and /etc/group differ by the profd lines only (the user is
#      kept on purge by design: debian/profd.postrm).
# Prints each step; exits 0 only if every check passed.
#
# Usage: scripts/test-package.sh [-B BASE] [-w WORK] [-b BRANCH] [REPO]
#   REPO  the git repository to clone (default: the one holding this script)
#   -b    branch to clone (default: REPO's current branch)
#   -B    where the debootstrapped root is cached (default /var/tmp/profd-pkg-base/root)
#   -w    work directory: clone, packages, the test root (default /var/tmp/profd-pkgtest;
#         emptied first)
# Needs the host's `make deb` packages (scripts/install-deps.sh --deb),
# curl and jq, and the Debian mirrors of the host's apt sources.
set -euo pipefail

here=$(cd "$(dirname "$0")/.." && pwd)
base=/var/tmp/profd-pkg-base/root
work=/var/tmp/profd-pkgtest
branch=""
while getopts "B:w:b:" opt; do
    case $opt in
    B) base=$OPTARG ;;
    w) work=$OPTARG ;;
    b) branch=$OPTARG ;;
    *) sed -n '2,35p' "$0" >&2; exit 2 ;;
    esac
done
shift $((OPTIND - 1))
repo=$(cd "${1:-$here}" && pwd)
[ -n "$branch" ] || branch=$(git -C "$repo" rev-parse --abbrev-ref HEAD)

say() { echo "test-package: $*"; }
die() { echo "test-package: FAIL: $*" >&2; exit 1; }
pass() { echo "test-package: ok: $*"; }

[ "$(id -u)" = 0 ] || die "needs root (debootstrap, chroot, apt-get in the root)"
for t in git dpkg-buildpackage lintian debootstrap curl jq systemd-analyze setpriv; do
    command -v "$t" >/dev/null || die "$t is missing (scripts/install-deps.sh --deb; apt-get install curl jq)"
done

. "$here/scripts/debian-root.sh"
sources=$(host_sources | sort -u)
mirror=$(echo "$sources" | awk '$2 == "bookworm" { print $1; exit }')
[ -n "$mirror" ] || die "no bookworm entry in the host's apt sources: which Debian mirror?"

root="$work/root"
mounted=()
profd_pid=""
cleanup() {
    if [ -n "$profd_pid" ]; then kill -TERM "$profd_pid" 2>/dev/null || true; wait "$profd_pid" 2>/dev/null || true; fi
    unmount_all test-package
}
trap cleanup EXIT
trap 'exit 130' INT TERM
t0=$(date +%s)

# ---- 1. two packages from a clean clone ----
if [ -d "$root" ]; then
    for m in dev/shm dev/pts dev sys proc; do umount "$root/$m" 2>/dev/null || true; done
fi
rm -rf "$work"
mkdir -p "$work"
git clone -q --branch "$branch" "$repo" "$work/src"
say "cloned $repo ($branch): $(git -C "$work/src" log -1 --format='%h %s' | cut -c1-70)"
v1=$(cat "$work/src/VERSION")
arch=$(dpkg --print-architecture)
(cd "$work/src" && ./scripts/build-deb.sh "$work/out1") >"$work/build1.log" 2>&1 || { tail -n 30 "$work/build1.log" >&2; die "building $v1"; }
deb1="$work/out1/profd_${v1}_${arch}.deb"
[ -f "$deb1" ] || die "no $deb1"
pass "built $(basename "$deb1") (lintian clean: build-deb.sh fails on warnings)"

v2="$v1+pkgtest1"
echo "$v2" >"$work/src/VERSION"
{
    printf 'profd (%s) unstable; urgency=medium\n\n  * test-package.sh: a newer build to upgrade to.\n\n' "$v2"
    printf ' -- %s  %s\n\n' "$(dpkg-parsechangelog -l "$work/src/debian/changelog" -SMaintainer)" "$(date -R)"
    cat "$work/src/debian/changelog"
} >"$work/changelog.new"
mv "$work/changelog.new" "$work/src/debian/changelog"
git -C "$work/src" -c user.name=test-package -c user.email=test-package@localhost commit -qam "test-package: version $v2"
(cd "$work/src" && ./scripts/build-deb.sh "$work/out2") >"$work/build2.log" 2>&1 || { tail -n 30 "$work/build2.log" >&2; die "building $v2"; }
deb2="$work/out2/profd_${v2}_${arch}.deb"
[ -f "$deb2" ] || die "no $deb2"
rev2=$(git -C "$work/src" rev-parse HEAD)
pass "built $(basename "$deb2") (commit ${rev2:0:12})"

# ---- 2. a bare Debian 12 root, the package installed with apt-get ----
if [ -x "$base/bin/sh" ] && [ -f "$base/etc/debian_version" ]; then
    say "bare root: a copy of $base (debootstrap --variant=minbase bookworm, cached)"
else
    say "debootstrap --variant=minbase bookworm into $base (log: $base.log)"
    mkdir -p "$base"
    debootstrap --variant=minbase bookworm "$base" "$mirror" >"$base.log" 2>&1 || { tail -n 20 "$base.log" >&2; die "debootstrap"; }
fi
cp -a "$base" "$root"
echo "$sources" | awk '{ print "deb", $1, $2, "main" }' >"$root/etc/apt/sources.list"
printf '127.0.0.1\tlocalhost\n::1\t\tlocalhost ip6-localhost ip6-loopback\n' >"$root/etc/hosts"
cp -L /etc/resolv.conf "$root/etc/resolv.conf"
mount_root_fs "$root"
in_root() {
    chroot "$root" /usr/bin/env -i HOME=/root LANG=C.UTF-8 DEBIAN_FRONTEND=noninteractive \
        PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin "$@"
}
in_root apt-get update -q >"$work/apt-update.log" 2>&1 || { tail "$work/apt-update.log" >&2; die "apt-get update in the root"; }
say "root: $(in_root dpkg-query -W -f='.\n' | wc -l) packages, $(du -sxm "$root" | cut -f1) MB"
in_root dpkg-query -W -f='${Package}\n' | sort >"$work/pkgs.before"

# what the root holds before profd (paths, and owner/mode/size of each)
snapshot() {
    (cd "$root" && find . -xdev \( -path ./proc -o -path ./sys -o -path ./dev -o -path ./tmp \
        -o -path ./var/lib/dpkg -o -path ./var/lib/apt -o -path ./var/cache -o -path ./var/log \
        -o -path ./run -o -path ./etc/ld.so.cache -o -path ./etc/passwd- -o -path ./etc/group- \
        -o -path ./etc/shadow- -o -path ./etc/gshadow- \) -prune -o -printf '%p %U:%G %m\n' | sort)
}
snapshot >"$work/before.txt"
cp "$root/etc/passwd" "$work/passwd.before"
cp "$root/etc/group" "$work/group.before"

cp "$deb1" "$deb2" "$root/tmp/"
in_root sh -c "cd /tmp && apt-get install -y ./$(basename "$deb1")" >"$work/install1.log" 2>&1 \
    || { tail -n 30 "$work/install1.log" >&2; die "apt-get install ./$(basename "$deb1")"; }
pass "apt-get install ./$(basename "$deb1") into the bare root ($(grep -oE '[0-9]+ newly installed' "$work/install1.log"))"
in_root getent passwd profd >/dev/null || die "no profd user after the install"
# names resolved in the root (the host's passwd may give uid 100 another name)
[ "$(in_root stat -c %U:%G /var/lib/profd)" = profd:profd ] || die "/var/lib/profd is not profd's"
pass "user $(in_root getent passwd profd); /var/lib/profd $(in_root stat -c '%U:%G %a' /var/lib/profd)"
[ -f "$root/usr/share/man/man1/profd.1.gz" ] || die "no man page"
in_root dpkg-query -W -f='${Conffiles}\n' profd | sed 's/^/    conffile:/'

# ---- 3. edit both conffiles ----
port=0
for _ in $(seq 1 50); do
    p=$((20000 + RANDOM % 40000))
    if ! (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then port=$p; break; fi
done
[ "$port" != 0 ] || die "no free port"
sed -i "s/127\.0\.0\.1:10902/127.0.0.1:$port/" "$root/etc/profd/profd.yml"
echo "# edited by test-package.sh" >>"$root/etc/profd/profd.yml"
sed -i "s/^ARGS=.*/ARGS=\"--web.listen-address=127.0.0.1:$port --log.level=info\"/" "$root/etc/default/profd"
cfg_sum=$(md5sum <"$root/etc/profd/profd.yml")
def_sum=$(md5sum <"$root/etc/default/profd")
say "edited /etc/profd/profd.yml (target 127.0.0.1:$port) and /etc/default/profd (ARGS)"

# ---- 4. run the unit's ExecStart as its User with its EnvironmentFile ----
unit="$root/lib/systemd/system/profd.service"
[ -f "$unit" ] || die "no $unit"
unit_get() { sed -n "s/^$1=//p" "$unit" | tail -n 1; }
u_user=$(unit_get User)
u_group=$(unit_get Group)
u_env=$(unit_get EnvironmentFile)
u_exec=$(unit_get ExecStart)
u_state=$(unit_get StateDirectory)
say "unit: User=$u_user Group=${u_group:-} EnvironmentFile=$u_env StateDirectory=$u_state"
u_uid=$(in_root id -u "$u_user")
say "unit: ExecStart=$u_exec"
[ -d "$root/var/lib/$u_state" ] || die "StateDirectory /var/lib/$u_state does not exist"
start_profd() { # $1: log file
    # systemd's ExecStart: the EnvironmentFile's variables, $ARGS split on
    # white space (unbraced), the User's uid, gid and groups, a clean env
    setsid chroot "$root" /usr/bin/setpriv --reuid="$u_user" --regid="${u_group:-$u_user}" --init-groups \
        /usr/bin/env -i LANG=C.UTF-8 PATH=/usr/sbin:/usr/bin:/sbin:/bin \
        /bin/sh -c "set -a; . '${u_env#-}'; set +a; cd /; exec $u_exec" >"$1" 2>&1 </dev/null &
    profd_pid=$!
    local i
    for i in $(seq 1 60); do
        curl -fsS -o /dev/null --max-time 2 "http://127.0.0.1:$port/-/ready" 2>/dev/null && return 0
        kill -0 "$profd_pid" 2>/dev/null || { cat "$1" >&2; die "profd exited"; }
        sleep 1
    done
    cat "$1" >&2
    die "profd not ready on 127.0.0.1:$port within 60 s"
}
stop_profd() {
    kill -TERM "$profd_pid"
    wait "$profd_pid" || true
    profd_pid=""
}
# the points stored for job="profd" in [0, $1] ms, per type: "heap 3 cpu 2"
points() {
    local t
    for t in heap cpu; do
        printf '%s %s ' "$t" "$(curl -fsS --max-time 10 -G "http://127.0.0.1:$port/api/v1/query_range" \
            --data-urlencode "query=$t{job=\"profd\"}" --data-urlencode from=0 --data-urlencode "to=$1" |
            jq '[.data[].timestamps | length] | add // 0')"
    done
}
start_profd "$work/run1.log"
[ "$(ps -o comm= -p "$profd_pid")" = profd ] || die "the unit's process is $(ps -o comm= -p "$profd_pid"), not profd"
[ "$(ps -o uid= -p "$profd_pid" | tr -d ' ')" = "$u_uid" ] || die "profd runs as uid $(ps -o uid= -p "$profd_pid"), not $u_user's $u_uid"
pass "profd (pid $profd_pid) runs as uid/gid $(ps -o uid=,gid= -p "$profd_pid" | tr -s ' ') = $u_user in the root, serving http://127.0.0.1:$port/"
curl -fsS "http://127.0.0.1:$port/api/v1/status/flags" | jq -c '.data | {"config.file":."config.file","storage.path":."storage.path","web.listen-address":."web.listen-address"}'
ver_line=$(in_root /usr/bin/profd --version | head -n 1)
say "installed: $ver_line"
curl -fsS "http://127.0.0.1:$port/metrics" | grep '^profd_build_info{' | grep -q "version=\"$v1\"" || die "profd_build_info does not say $v1"
pass "/metrics: $(curl -fsS "http://127.0.0.1:$port/metrics" | grep '^profd_build_info{')"
say "waiting for profd to store its own heap and cpu profiles (scrape_interval 15s, cpu window 10s)"
ok=""
for _ in $(seq 1 90); do
    now=$(($(date +%s) * 1000))
    p=$(points "$now")
    if [ "$(echo "$p" | awk '{ print ($2 >= 2 && $4 >= 1) }')" = 1 ]; then ok=1; break; fi
    sleep 2
done
[ -n "$ok" ] || { tail -n 20 "$work/run1.log" >&2; die "profd did not store its own profiles in 180 s: $p"; }
pass "profd stored its own profiles: $p"
t_stop=$(($(date +%s) * 1000))
before_points=$(points "$t_stop")
stop_profd
stored=$(find "$root/var/lib/profd" -type f | wc -l)
[ -z "$(find "$root/var/lib/profd" ! -uid "$u_uid")" ] || die "files under /var/lib/profd not owned by $u_user"
pass "/var/lib/profd: $stored files, $(du -sk "$root/var/lib/profd" | cut -f1) KiB, all owned by $u_user; stopped by SIGTERM: $(grep -c 'profd stopped' "$work/run1.log") clean stop"

# ---- 5. systemd-analyze verify on the host ----
# The host's systemd-analyze checks the installed unit against a root that
# has systemd (the bare root has none: no sysinit.target to order against).
# That root is a copy of the test root plus Debian's systemd, so the bare
# root itself stays bare for the purge check. The man: reference is checked
# by rendering the package's page (man -l), not by verify's man(1) lookup.
vroot="$work/verify-root"
cp -a --one-file-system "$root" "$vroot"
for m in proc dev; do mkdir -p "$vroot/$m"; done
mount -t proc proc "$vroot/proc"; mounted+=("$vroot/proc")
chroot "$vroot" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin DEBIAN_FRONTEND=noninteractive \
    apt-get install -y -q --no-install-recommends systemd >"$work/verify-systemd.log" 2>&1 \
    || { tail "$work/verify-systemd.log" >&2; die "installing systemd into the copy for verify"; }
umount "$vroot/proc"; unset 'mounted[${#mounted[@]}-1]'
if systemd-analyze verify --root="$vroot" --man=no profd.service >"$work/verify.log" 2>&1; then
    pass "systemd-analyze verify --root=<the root + systemd> profd.service: accepted$( [ -s "$work/verify.log" ] && echo " (notes: $(tr '\n' ' ' <"$work/verify.log"))")"
else
    cat "$work/verify.log" >&2
    die "systemd-analyze verify refused the unit"
fi
say "systemd-analyze security: $(systemd-analyze security --root="$vroot" --offline=true profd.service 2>/dev/null | tail -n 1 || echo n/a)"
man -l "$root/usr/share/man/man1/profd.1.gz" 2>/dev/null | head -n 4 | grep -q 'profd' || die "man -l profd.1.gz does not render"
pass "man page profd(1): $(zcat "$root/usr/share/man/man1/profd.1.gz" | grep -c '^\.TP') options (help2man from profd --help)"
rm -rf "$vroot"

# ---- 6. upgrade ----
in_root sh -c "cd /tmp && apt-get install -y ./$(basename "$deb2")" >"$work/install2.log" 2>&1 \
    || { tail -n 30 "$work/install2.log" >&2; die "apt-get install ./$(basename "$deb2")"; }
[ "$(in_root dpkg-query -W -f='${Version}' profd)" = "$v2" ] || die "profd is not $v2 after the upgrade"
pass "upgraded to $v2 with apt-get install ./$(basename "$deb2")"
[ "$(md5sum <"$root/etc/profd/profd.yml")" = "$cfg_sum" ] || die "/etc/profd/profd.yml changed by the upgrade"
[ "$(md5sum <"$root/etc/default/profd")" = "$def_sum" ] || die "/etc/default/profd changed by the upgrade"
pass "edited /etc/profd/profd.yml and /etc/default/profd kept (no prompt, /etc/profd holds: $(ls "$root/etc/profd"))"
start_profd "$work/run2.log"
after_ver=$(curl -fsS "http://127.0.0.1:$port/api/v1/status/buildinfo" | jq -r '.data.version + " " + .data.revision')
[ "$after_ver" = "$v2 $rev2" ] || die "after the upgrade profd says $after_ver, not $v2 $rev2"
pass "the new profd serves: buildinfo $after_ver"
after_points=$(points "$t_stop")
# each type: at least as many points as before (a scrape in flight when the
# count was taken may have landed before the stop: more, never fewer)
[ "$(echo "$before_points $after_points" | awk '{ print ($6 >= $2 && $8 >= $4 && $2 > 0) }')" = 1 ] ||
    die "stored profiles up to the upgrade: before $before_points, after $after_points"
pass "profiles stored before the upgrade all there after it: before: $before_points; after: $after_points"
stop_profd

# ---- 7. purge ----
in_root dpkg --purge profd >"$work/purge.log" 2>&1 || { cat "$work/purge.log" >&2; die "dpkg --purge profd"; }
# the dependencies apt installed for profd (Recommends of its Depends too:
# ca-certificates and openssl recommend each other, so they go only when
# Recommends do not keep packages)
in_root apt-get autoremove --purge -y -o APT::AutoRemove::RecommendsImportant=false >"$work/autoremove.log" 2>&1 || { tail "$work/autoremove.log" >&2; die "apt-get autoremove"; }
pass "dpkg --purge profd; apt-get autoremove --purge: $(grep -oE '[0-9]+ to remove' "$work/autoremove.log" || echo '0 to remove')"
# apt never autoremoves a package of Priority important or required (e.g.
# sensible-utils, which libdebuginfod-common's chain pulls in): those left are
# named and purged here; any other package left is a failure (the diff below)
left=$(in_root dpkg-query -W -f='${Package}\n' | sort | comm -13 "$work/pkgs.before" -)
for p in $left; do
    prio=$(in_root dpkg-query -W -f='${Priority}' "$p")
    case $prio in
    important | required)
        in_root apt-get purge -y "$p" >>"$work/autoremove.log" 2>&1 || die "apt-get purge $p"
        say "note: $p (Priority: $prio) is kept by apt-get autoremove; purged by hand" ;;
    esac
done
snapshot >"$work/after.txt"
# /etc/passwd, group, shadow and gshadow change in content (the profd user
# stays by design: debian/profd.postrm), not in the list, and their "-"
# backups are written by adduser: left out of the snapshots; passwd and group
# must differ by the profd lines only
[ "$(diff "$work/passwd.before" "$root/etc/passwd" | grep '^[<>]' | cut -d: -f1)" = "> profd" ] ||
    die "/etc/passwd after the purge: $(diff "$work/passwd.before" "$root/etc/passwd")"
[ "$(diff "$work/group.before" "$root/etc/group" | grep '^[<>]' | cut -d: -f1)" = "> profd" ] ||
    die "/etc/group after the purge: $(diff "$work/group.before" "$root/etc/group")"
if ! diff "$work/before.txt" "$work/after.txt" >"$work/left.diff"; then
    cat "$work/left.diff" >&2
    die "the root after the purge differs from the root before the install (above)"
fi
left=$(cd "$root" && find . -xdev \( -path ./proc -o -path ./sys -o -path ./dev \) -prune -o \( -name '*profd*' -print \) | grep -v '^./tmp/profd_' || true)
[ -z "$left" ] || die "left after the purge: $left"
pass "after the purge the root holds the same files as before the install (owners, modes); nothing named profd"
say "kept by design: $(in_root getent passwd profd) (debian/profd.postrm says why)"
say "PASS: all checks in $(($(date +%s) - t0)) s"
