#!/usr/bin/env bash
# A CUDA build of trainpoint reports itself: the LibTorch it was built with, the CUDA runtime it loaded (of
# the toolkit's major version), the NCCL it loaded, and the GPUs it sees, by name: none on a machine without one,
# where the CUDA LibTorch still runs on the CPU.
# Usage: cuda_version.sh TRAINPOINT_BINARY LIBTORCH_VERSION CUDA_MAJOR_VERSION
set -euo pipefail
trainpoint="$1"
libtorch="$2"
cuda_major="$3"

output=$("$trainpoint" --version)
echo "$output"
gpus=0
if command -v nvidia-smi >/dev/null; then gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ' || true); fi
if [ "$gpus" -eq 0 ]; then seen="no GPU visible"; else seen="[0-9]+ GPU\\(s\\) visible: .+"; fi

failed=0
expect() {
  grep -qE "$1" <<< "$output" || { echo "FAIL: trainpoint --version has no line matching '$1'" >&2; failed=1; }
}
expect "^libtorch ${libtorch//./\\.}$"
expect "^cuda ${cuda_major}\.[0-9]+, ${seen}$"
expect "^nccl 2\.[0-9]+\.[0-9]+$"
exit "$failed"
