#!/bin/sh
# The C sources keep .clang-format's layout (STYLE.md: "let tools hold the
# line"): clang-format --dry-run -Werror over the files `make format` formats.
# Exit 77 (skipped) without clang-format or outside a git checkout.
# Usage: style_format.sh SOURCE_DIR
set -eu
cd "$1"
if ! command -v clang-format >/dev/null 2>&1; then
    echo "SKIP: clang-format not found (scripts/install-deps.sh installs it)"
    exit 77
fi
if ! git rev-parse --git-dir >/dev/null 2>&1; then
    echo "SKIP: not a git checkout"
    exit 77
fi
files=$(git ls-files 'src/*.c' 'src/*.h' 'tests/*.c' 'fuzz/*.c')
if clang-format --dry-run -Werror $files 2>"${TMPDIR:-/tmp}/style_format.$$"; then
    rm -f "${TMPDIR:-/tmp}/style_format.$$"
    echo "PASS: $(echo "$files" | wc -l) files in .clang-format's layout"
    exit 0
fi
grep -o '^[^:]*\.[ch]' "${TMPDIR:-/tmp}/style_format.$$" | sort -u | sed 's/^/not formatted: /'
head -20 "${TMPDIR:-/tmp}/style_format.$$"
rm -f "${TMPDIR:-/tmp}/style_format.$$"
echo "FAIL: run 'make format' and commit"
exit 1
