#!/usr/bin/env bash
# scripts/build after a configure that failed: the failed configure leaves a CMakeCache.txt (here with a
# compiler that cannot compile, as a missing package or a wrong setting would), and the next scripts/build
# must configure again from a clean cache and build, instead of taking that cache for a finished configure.
set -euo pipefail
root=$1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export BUILD_DIR="$work/build"
fail() { echo "FAIL: $*" >&2; exit 1; }

if CXX=/bin/false "$root/scripts/build" --no-tests --target help > "$work/failed.log" 2>&1; then
  fail "the configure with CXX=/bin/false succeeded, so this test no longer makes it fail"
fi
[ -f "$BUILD_DIR/CMakeCache.txt" ] || fail "the failed configure left no CMakeCache.txt to recover from"
"$root/scripts/build" --no-tests --target help > "$work/again.log" 2>&1 ||
  { cat "$work/again.log" >&2; fail "scripts/build did not recover from the failed configure"; }
[ -f "$BUILD_DIR/build.ninja" ] || [ -f "$BUILD_DIR/Makefile" ] || fail "no build files after scripts/build"
grep -q "^CMAKE_CXX_COMPILER:.*=/bin/false" "$BUILD_DIR/CMakeCache.txt" && fail "the failed configure's compiler stayed"
echo "PASS: scripts/build configured again after a failed configure"
