#!/usr/bin/env bash
# Training throughput on CPU: trainpoint's engine (tp-train-bench) against Python PyTorch eager (PyTorch 2.11
# from PyPI, bench/baseline-python; BENCH_PYTHON=/usr/bin/python3 for Debian's 1.13 with trainpoint's BLAS) on
# the same architecture, batch and synthetic data, alternating runs in one call. Python also runs "tuned" as
# trainpoint runs by default: channels_last for the convolutional nets and OpenBLAS's thread pool sized as
# LibTorch's (OPENBLAS_NUM_THREADS, which only Debian's OpenBLAS build reads), to show where the difference
# comes from. Prints each run and a Markdown table of medians with the ratio trainpoint / Python (per
# CPU-second).
# usage: bench/train/run.sh [REPEATS] [THREADS]   (BUILD_DIR overrides build/)
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
build_dir="${BUILD_DIR:-$root/build}"
repeats="${1:-3}"
threads="${2:-1}"
# BENCH_PREBUILT=1: BUILD_DIR already holds it (a build configured otherwise, such as against the wheel line's LibTorch).
[ -n "${BENCH_PREBUILT:-}" ] || "$root/scripts/build" --target tp-train-bench >/dev/null
python=$("$root/bench/baseline-python")
echo "python eager: $("$python" -c 'import torch; print(torch.__version__)'); load average $(cut -d' ' -f1-3 /proc/loadavg)"
results="$(mktemp /tmp/tp-bench-train.XXXXXX.jsonl)"
# arch batch size channels steps
configs=("small_cnn 64 28 1 60" "small_cnn 64 32 3 40" "resnet18 16 64 3 10")
for config in "${configs[@]}"; do
  for _ in $(seq "$repeats"); do
    "$build_dir/bench/train/tp-train-bench" $config "$threads" | tee -a "$results"
    "$python" "$root/bench/train/python_eager.py" $config "$threads" | tee -a "$results"
    OPENBLAS_NUM_THREADS="$threads" "$python" "$root/bench/train/python_eager.py" $config "$threads" \
      --channels-last | tee -a "$results"
  done
done
python3 - "$results" "$threads" <<'PY'
import json, statistics, sys
runs = [json.loads(line) for line in open(sys.argv[1])]
print(f"\n{sys.argv[2]} thread(s); medians of the runs above")
print("| model, batch, input | engine | images/s | images per CPU-second | trainpoint / this (per CPU-second) |")
print("|---|---|---|---|---|")
for config in dict.fromkeys(r["config"] for r in runs):
    med = {}
    for engine in dict.fromkeys(r["engine"] for r in runs):
        mine = [r for r in runs if r["config"] == config and r["engine"] == engine]
        med[engine] = (statistics.median(r["images_per_s"] for r in mine),
                       statistics.median(r["images_per_cpu_s"] for r in mine))
    for engine, (per_s, per_cpu_s) in med.items():
        ratio = "" if engine == "trainpoint" else f"{med['trainpoint'][1] / per_cpu_s:.2f}x"
        print(f"| {config} | {engine} | {per_s:.0f} | {per_cpu_s:.0f} | {ratio} |")
PY
