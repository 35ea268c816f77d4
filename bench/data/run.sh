#!/usr/bin/env bash
# Data-loading benchmark (not a test): 5,000 generated JPEGs of 500x375 to 224x224 random-resized-crop + flip +
# ImageNet normalization in batches of 64, one epoch each, by trainpoint's loader (tp-bench-data) and by
# torchvision's DataLoader (torchvision 0.26 over PyTorch 2.11 from PyPI, bench/baseline-python;
# BENCH_PYTHON=/usr/bin/python3 for Debian's python3-torchvision), with the same worker
# counts, in one run. Prints a Markdown table: images/s, CPU seconds, images per CPU-second (images/s per
# core, robust to other load on the machine) and trainpoint's ratio to torchvision in that figure.
#
# usage: bench/data/run.sh BUILD_DIR [WORKERS...]   (default workers: 1 2; BUILD_DIR holds
#        bench/data/tp-bench-data and tests/tools/tp-make-dataset; TP_BENCH_REPEATS=N runs each N times,
#        alternating, and reports medians)
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
build="$(cd "${1:?usage: run.sh BUILD_DIR [WORKERS...]}" && pwd)"
shift
workers=("$@")
[ ${#workers[@]} -eq 0 ] && workers=(1 2)
images="${TP_BENCH_IMAGES:-5000}"
data="${TP_BENCH_DATA:-/tmp/tp-bench-data-$images}"

# The dataset is generated once and kept (it takes a few minutes); delete it to regenerate.
if [ ! -f "$data/.complete" ]; then
  rm -rf "$data"
  "$build/tests/tools/tp-make-dataset" images --out "$data" --classes 8 --count "$images" --size 500x375 \
    --format jpeg --seed 1
  touch "$data/.complete"
fi
cat "$data"/*/* >/dev/null  # both loaders read from the page cache

python=$("$root/bench/baseline-python")
echo "torchvision: $("$python" -c 'import torch, torchvision; print(torchvision.__version__, "over torch", torch.__version__)'); load average $(cut -d' ' -f1-3 /proc/loadavg)"
results="$(mktemp /tmp/tp-bench-data.XXXXXX.jsonl)"
for _ in $(seq "${TP_BENCH_REPEATS:-1}"); do
  for w in "${workers[@]}"; do
    "$build/bench/data/tp-bench-data" "$data" --workers "$w" | tee -a "$results"
    "$python" "$root/bench/data/torchvision_loader.py" "$data" "$w" | tee -a "$results"
  done
done
python3 - "$results" <<'PY'
import json, statistics, sys
runs = [json.loads(line) for line in open(sys.argv[1]) if line.startswith("{")]  # the loader logs too
print(f"medians of {len(runs) // len({(r['loader'], r['workers']) for r in runs})} run(s)")
print("| workers | loader | images/s | CPU s | images per CPU-second | trainpoint / torchvision |")
print("|---|---|---|---|---|---|")
for workers in dict.fromkeys(r["workers"] for r in runs):
    med = {}
    for loader in ("trainpoint", "torchvision"):
        mine = [r for r in runs if r["workers"] == workers and r["loader"] == loader]
        med[loader] = (statistics.median(r["images"] / r["seconds"] for r in mine),
                       statistics.median(r["cpu_seconds"] for r in mine),
                       statistics.median(r["images"] / r["cpu_seconds"] for r in mine))
    for loader, (per_s, cpu, per_cpu_s) in med.items():
        ratio = f"{per_cpu_s / med['torchvision'][2]:.2f}x" if loader == "trainpoint" else ""
        print(f"| {workers} | {loader} | {per_s:.0f} | {cpu:.1f} | {per_cpu_s:.0f} | {ratio} |")
PY
