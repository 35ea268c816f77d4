#!/usr/bin/env bash
# The ResNets fastai users train, on the CPU (issue 47): trainpoint's training step (tp-train-bench, as the
# trainer runs it: channels_last by default) on each LibTorch a trainpoint image ships, against Python PyTorch
# 2.11 (bench/baseline-python) eager as a user writes it (NCHW), eager with channels_last ("tuned"), and
# torch.compile (reported, not a goal). One thread per engine; images per CPU-second; the engines alternate
# within each repeat; medians over the repeats (torch.compile runs once per configuration after them: its
# compilation is minutes). Prints each run as a JSON line and a Markdown table of medians with ratios
# (bench/train/resnet_table.py).
# usage: bench/train/resnet.sh [REPEATS (5)] [BUILD_DIR...]
#   BUILD_DIRs hold bench/train/tp-train-bench (default: build, Debian's LibTorch 1.13 as the cpu image has it,
#   and build-bench-wheel, the wheel's 2.11 as the gpu image has it: scripts/configure-torch-wheel PYTHON
#   build-bench-wheel -DTRAINPOINT_BUILD_TESTS=OFF -DTRAINPOINT_BUILD_BENCH=ON, then its tp-train-bench target;
#   build-bench-debian13 from bench/train/build-debian13.sh, Debian 13's LibTorch 2.6, runs in its Debian 13 root).
# RESNET_CONFIGS overrides the configurations: "ARCH BATCH SIZE STEPS WARMUP PRECISION;..."; RESNET_COMPILE=0
# leaves out torch.compile (its compilation takes minutes per configuration).
# The GPU leg: RESNET_DEVICE=cuda runs every engine on the GPU and the table gives images per second (the GPU's
# work, not the host's); RESNET_PYTHON names a Python with torch and torchvision instead of bench/baseline-python
# (the GPU machine has its own and no network). scripts/gpu-check runs it so, after its own benchmarks.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
repeats="${1:-5}"
shift || true
builds=("$@")
[ ${#builds[@]} -gt 0 ] || builds=("$root/build" "$root/build-bench-wheel")
for i in "${!builds[@]}"; do builds[i]=$(cd "${builds[i]}" && pwd); done  # absolute: one may run in the Debian 13 root
device="${RESNET_DEVICE:-cpu}"
python="${RESNET_PYTHON:-$("$root/bench/baseline-python")}"
IFS=';' read -r -a configs <<< "${RESNET_CONFIGS:-resnet18 16 224 3 1 fp32;resnet34 16 224 2 1 fp32;resnet50 16 224 2 1 fp32;resnet50 16 224 2 1 bf16;resnet18 32 64 8 2 fp32;resnet18 32 64 8 2 bf16;resnet34 32 64 6 2 fp32;resnet50 32 64 4 2 fp32}"
results="$(mktemp /tmp/tp-bench-resnet.XXXXXX.jsonl)"
echo "python: torch $("$python" -c 'import torch; print(torch.__version__)'); load average $(cut -d' ' -f1-3 /proc/loadavg); results in $results"

# One JSON line tagged with the engine's name as the table shows it.
tagged() {
  local engine="$1"
  shift
  "$@" 2>/dev/null | tail -n 1 | python3 -c 'import json, sys
line = json.load(sys.stdin); line["engine"] = sys.argv[1]; print(json.dumps(line))' "$engine" | tee -a "$results"
}

# Each build's runner and label, once. A build dir made in the Debian 13 root (bench/train/build-debian13.sh) runs
# there, and its LibTorch is that root's.
runners=()
labels=()
for build in "${builds[@]}"; do
  runner=""
  [ ! -e "$build/debian13-root" ] || runner="$root/scripts/in-debian13"
  torch_dir=$(grep -m1 '^Torch_DIR:' "$build/CMakeCache.txt" | cut -d= -f2)
  # shellcheck disable=SC2086  # runner: nothing, or the one word of the root's runner
  labels+=("trainpoint (LibTorch $($runner sed -n 's/^set(PACKAGE_VERSION "\(.*\)")/\1/p' "$torch_dir/TorchConfigVersion.cmake"))")
  runners+=("$runner")
done

for config in "${configs[@]}"; do
  read -r arch batch size steps warmup precision <<< "$config"
  for _ in $(seq "$repeats"); do
    for i in "${!builds[@]}"; do
      # shellcheck disable=SC2086  # runner: nothing, or the one word of the root's runner
      tagged "${labels[i]}" ${runners[i]} "${builds[i]}/bench/train/tp-train-bench" "$arch" "$batch" "$size" 3 "$steps" 1 \
        --device "$device" --precision "$precision" --warmup "$warmup"
    done
    tagged "python eager" "$python" "$root/bench/train/python_eager.py" "$arch" "$batch" "$size" 3 "$steps" 1 \
      --device "$device" --precision "$precision" --warmup "$warmup"
    tagged "python eager, channels_last" "$python" "$root/bench/train/python_eager.py" "$arch" "$batch" "$size" 3 \
      "$steps" 1 --device "$device" --precision "$precision" --warmup "$warmup" --channels-last
  done
  [ "${RESNET_COMPILE:-1}" = 0 ] ||
    tagged "python torch.compile (1 run)" "$python" "$root/bench/train/python_eager.py" "$arch" "$batch" "$size" 3 \
      "$steps" 1 --device "$device" --precision "$precision" --warmup 2 --compile
done
echo "load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
python3 "$root/bench/train/resnet_table.py" "$results" "$device"
