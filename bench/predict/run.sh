#!/usr/bin/env bash
# Prediction throughput (not a test): `trainpoint predict` against the same model.pt in Python
# (bench/predict/python_predict.py: torch.jit.load and a torchvision DataLoader, PyTorch 2.11 and torchvision
# 0.26 from PyPI, bench/baseline-python; BENCH_PYTHON=/usr/bin/python3 for Debian's 1.13), on generated JPEGs of
# 160x120, with the same worker counts and batch, alternating runs in one call. The models are trained for one
# epoch by trainpoint itself first (their weights do not matter here). Prints each run and a Markdown table of
# medians: images/s, CPU seconds, images per CPU-second and trainpoint's ratio to Python in it.
# usage: bench/predict/run.sh [REPEATS] [WORKERS]   (BUILD_DIR overrides build/; TP_BENCH_IMAGES, default 2000)
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
build_dir="${BUILD_DIR:-$root/build}"
repeats="${1:-5}"
workers="${2:-2}"
images="${TP_BENCH_IMAGES:-2000}"
work="${TP_BENCH_WORK:-/tmp/tp-bench-predict-$images}"
trainpoint="$build_dir/entrypoint/trainpoint"
python=$("$root/bench/baseline-python")

# Data and models are made once and kept; delete $work to make them again.
if [ ! -f "$work/.complete" ]; then
  rm -rf "$work"
  "$build_dir/tests/tools/tp-make-dataset" images --out "$work/images" --classes 4 --count "$images" \
    --size 160x120 --format jpeg --seed 2
  "$build_dir/tests/tools/tp-make-dataset" images --out "$work/small" --classes 4 --per-class 16 --size 160x120 \
    --format jpeg --seed 3
  for config in "small_cnn 64" "resnet18 112"; do
    set -- $config
    cat > "$work/$1.toml" <<TOML
[job]
name = "$1"
output = "out-$1"
[data]
source = "small"
format = "image_folder"
image_size = $2
normalize = "imagenet"
[model]
arch = "$1"
[train]
epochs = 1
batch_size = 16
TOML
    "$trainpoint" run --spec "$work/$1.toml" --workdir "$work" --log-level warn
  done
  touch "$work/.complete"
fi
cat "$work"/images/*/* > /dev/null  # both read from the page cache
echo "python: $("$python" -c 'import torch, torchvision; print("torch", torch.__version__, "torchvision", torchvision.__version__)'); $("$trainpoint" version | head -n 2 | tr '\n' ' ')"
results="$(mktemp /tmp/tp-bench-predict.XXXXXX.jsonl)"
for arch in small_cnn resnet18; do
  model="$work/out-$arch/model.pt"
  for _ in $(seq "$repeats"); do
    echo "load average $(cut -d' ' -f1-3 /proc/loadavg)" >&2
    # /usr/bin/time's %e %U %S: wall, user and system seconds of trainpoint and its threads.
    measured=$( { /usr/bin/time -f "%e %U %S" "$trainpoint" predict --model "$model" --data "$work/images" \
                    --out "$work/trainpoint.csv" --workers "$workers" --log-level warn; } 2>&1 | tail -n 1)
    read -r wall user system <<< "$measured"
    echo "{\"engine\": \"trainpoint\", \"arch\": \"$arch\", \"images\": $images, \"seconds\": $wall, \"cpu_seconds\": $(awk "BEGIN { print $user + $system }")}" | tee -a "$results"
    "$python" "$root/bench/predict/python_predict.py" "$model" "$work/images" "$work/python.csv" \
      --workers "$workers" | sed "s/^{/{\"arch\": \"$arch\", /" | tee -a "$results"
  done
done
python3 - "$results" "$workers" <<'PY'
import json, statistics, sys
runs = [json.loads(line) for line in open(sys.argv[1])]
print(f"\n{sys.argv[2]} worker(s); medians of {len(runs) // 4} runs each")
print("| model | engine | images/s | CPU s | images per CPU-second | trainpoint / Python (per CPU-second) |")
print("|---|---|---|---|---|---|")
for arch in dict.fromkeys(r["arch"] for r in runs):
    med = {}
    for engine in ("trainpoint", "python"):
        mine = [r for r in runs if r["arch"] == arch and r["engine"] == engine]
        med[engine] = (statistics.median(r["images"] / r["seconds"] for r in mine),
                       statistics.median(r["cpu_seconds"] for r in mine),
                       statistics.median(r["images"] / r["cpu_seconds"] for r in mine))
    for engine, (per_s, cpu, per_cpu_s) in med.items():
        ratio = f"{per_cpu_s / med['python'][2]:.2f}x" if engine == "trainpoint" else ""
        print(f"| {arch} | {engine} | {per_s:.0f} | {cpu:.1f} | {per_cpu_s:.0f} | {ratio} |")
PY
