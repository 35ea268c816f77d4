#!/usr/bin/env bash
# Builds tp-train-bench against Debian 13's LibTorch 2.6 (what a cpu image on Debian 13 would ship) in the
# Debian 13 root of scripts/test-libtorch2, into build-bench-debian13/. bench/train/resnet.sh runs a build dir
# holding the `debian13-root` mark in that root (scripts/in-debian13).
#   bench/train/build-debian13.sh      # then: bench/train/resnet.sh 5 build build-bench-debian13
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
build="$root/build-bench-debian13"
"$root/scripts/configure-debian13" "$build" -DTRAINPOINT_BUILD_TESTS=OFF -DTRAINPOINT_BUILD_BENCH=ON
"$root/scripts/in-debian13" cmake --build "$build" -j "${JOBS:-$(nproc)}" --target tp-train-bench
touch "$build/debian13-root"
