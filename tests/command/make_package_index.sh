#!/usr/bin/env bash
# Builds the PEP 503 package index the command-mode tests serve with `python3 -m http.server`:
# wheels of the small packages in packages/ (built with pip wheel, as a package author would) and
# source distributions of those that must be built at install time. Usage: make_package_index.sh OUT
set -euo pipefail
packages="$(cd "$(dirname "${BASH_SOURCE[0]}")/packages" && pwd)"
out="$1"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
cp -r "$packages"/. "$work/"   # pip builds in the source tree: keep it out of the repository
rm -rf "$out.tmp" && mkdir -p "$out.tmp/simple"
env -u PIP_FIND_LINKS -u PIP_INDEX_URL -u PIP_EXTRA_INDEX_URL /usr/bin/python3 -m pip wheel -q --no-deps \
  --no-build-isolation -w "$work/wheels" "$work/tinypkg" "$work/torch" "$work/hungry"
for name in tinypkg torch hungry; do
  mkdir -p "$out.tmp/simple/$name"
  cp "$work/wheels/$name"-*.whl "$out.tmp/simple/$name/"
done
for name in brokenpkg slowpkg; do
  mkdir -p "$out.tmp/simple/$name" "$work/sdist/$name-1.0"
  cp -r "$work/$name"/. "$work/sdist/$name-1.0/"
  tar -C "$work/sdist" -czf "$out.tmp/simple/$name/$name-1.0.tar.gz" "$name-1.0"
done
rm -rf "$out" && mv "$out.tmp" "$out"
