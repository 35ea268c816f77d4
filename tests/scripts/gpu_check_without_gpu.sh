#!/usr/bin/env bash
# scripts/gpu-check on a machine without a GPU: it stops at once (before building anything), exit 2, and says
# why and what CI runs instead. On a machine with a GPU there is nothing to check here: exit 77 (skipped).
set -uo pipefail
root=$1
if gpus=$(nvidia-smi -L 2>/dev/null) && [ -n "$gpus" ]; then exit 77; fi
cache=$(mktemp -d)
trap 'rm -rf "$cache"' EXIT
output=$(TRAINPOINT_CACHE="$cache" timeout 60 "$root/scripts/gpu-check" 2>&1)
code=$?
echo "$output"
[ "$code" -eq 2 ] || { echo "FAIL: exit $code, expected 2"; exit 1; }
[[ $output == *"no GPU visible"* && $output == *"scripts/test-torch-wheel"* ]] || { echo "FAIL: message"; exit 1; }
# It stopped before the wheel line made anything in its cache (a venv, a compiler cache).
[ -z "$(ls -A "$cache")" ] || { echo "FAIL: it went on: $(ls -A "$cache")"; exit 1; }
echo PASS
