#!/bin/sh
# Builds profd's Debian package with Debian's own tools (`make deb` runs it).
#
#   scripts/build-deb.sh [OUTDIR]      (default OUTDIR: build)
#
# dpkg-buildpackage writes its results beside the source directory, so the
# source is first copied into OUTDIR/deb/profd-<version>/ (git's tracked and
# untracked-but-not-ignored files when this is a git checkout: what a clean
# clone plus your uncommitted edits hold; no build trees, no node_modules).
# The copy has no .git: the commit and branch are passed to debian/rules as
# PD_REVISION/PD_BRANCH (set them yourself to override). Then
#   dpkg-buildpackage -us -uc -b     (unsigned, binary only)
#   lintian                          (fails the build on any error or warning)
# and OUTDIR/profd_<version>_<arch>.deb is the package.
set -eu

here=$(cd "$(dirname "$0")/.." && pwd)
out=${1:-build}
case $out in /*) ;; *) out="$here/$out" ;; esac
version=$(cat "$here/VERSION")
arch=$(dpkg --print-architecture)
stage="$out/deb"
src="$stage/profd-$version"

say() { echo "build-deb: $*"; }

rm -rf "$stage"
mkdir -p "$src"
if git -C "$here" rev-parse --show-toplevel >/dev/null 2>&1 &&
   [ "$(cd "$(git -C "$here" rev-parse --show-toplevel)" && pwd -P)" = "$(cd "$here" && pwd -P)" ]; then
    : "${PD_REVISION:=$(git -C "$here" rev-parse HEAD)}"
    : "${PD_BRANCH:=$(git -C "$here" rev-parse --abbrev-ref HEAD)}"
    (cd "$here" && git ls-files -z -co --exclude-standard |
        tar --null -T - --ignore-failed-read -cf - 2>/dev/null) | tar -xf - -C "$src"
else
    (cd "$here" && tar --exclude='./build*' --exclude=node_modules --exclude=./data -cf - .) |
        tar -xf - -C "$src"
fi
export PD_REVISION="${PD_REVISION:-}" PD_BRANCH="${PD_BRANCH:-}"
say "building profd $version (revision ${PD_REVISION:-unknown}, branch ${PD_BRANCH:-unknown}) in $src"

(cd "$src" && dpkg-buildpackage -us -uc -b) >"$stage/dpkg-buildpackage.log" 2>&1 || {
    tail -n 40 "$stage/dpkg-buildpackage.log" >&2
    echo "build-deb: dpkg-buildpackage failed (log: $stage/dpkg-buildpackage.log)" >&2
    exit 1
}
deb="$stage/profd_${version}_${arch}.deb"
[ -f "$deb" ] || { echo "build-deb: $deb was not made" >&2; exit 1; }
cp "$deb" "$out/"
say "lintian $(basename "$deb")"
lintian --fail-on error,warning --info "$stage/profd_${version}_${arch}.changes"
say "built $out/profd_${version}_${arch}.deb"
dpkg-deb --info "$out/profd_${version}_${arch}.deb" | sed -n '/Package:/,$p'
dpkg-deb --contents "$out/profd_${version}_${arch}.deb"
