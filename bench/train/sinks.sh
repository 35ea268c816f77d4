#!/usr/bin/env bash
# What the run's sinks cost (issue 33): images/s of one 2-rank `trainpoint run` on CPU with both sinks on
# (log.tensorboard = true, log.mlflow_uri = an `mlflow server` on loopback, sqlite, artifacts proxied) against
# both off, alternating in one call. Each run: small_cnn on 2 classes x 400 generated 32x32 PNGs (640 to
# train), batch 32 per rank, 4 epochs, read from each epoch line's images/s (samples over step time) and the
# run's wall time; the first epoch (warm-up) is left out. Prints each run, the load average, and a Markdown
# table of medians.
# usage: bench/train/sinks.sh [REPEATS]   (BUILD_DIR overrides build/; TRAINPOINT_PYTHON_TOOLS: a python3
# with mlflow, default the venv of scripts/install-python-tools)
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
build_dir="${BUILD_DIR:-$root/build}"
repeats="${1:-3}"
python="${TRAINPOINT_PYTHON_TOOLS:-${TRAINPOINT_CACHE:-/var/cache/trainpoint}/python-tools/venv/bin/python3}"
"$root/scripts/build" --target trainpoint tp-make-dataset >/dev/null
dir="$(mktemp -d /tmp/tp-bench-sinks.XXXXXX)"
server_pid=""
cleanup() {
  [ -z "$server_pid" ] || kill "$server_pid" 2>/dev/null || true
  rm -rf "$dir"
}
trap cleanup EXIT

"$build_dir/tests/tools/tp-make-dataset" images --out "$dir/repo/data" --classes 2 --per-class 400 --size 32 \
  --format png --seed 5 >/dev/null
cat > "$dir/repo/train.toml" <<'TOML'
[job]
name = "sinks-bench"
output = "out"

[data]
source = "data"
image_size = 32
valid = 0.2
workers = 1

[model]
arch = "small_cnn"

[train]
epochs = 4
batch_size = 32
TOML
git -C "$dir/repo" init -q -b main
git -C "$dir/repo" -c user.name=bench -c user.email=bench@example.invalid add -A
git -C "$dir/repo" -c user.name=bench -c user.email=bench@example.invalid commit -q -m data

port=$("$python" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
"$python" -m mlflow server --backend-store-uri "sqlite:///$dir/mlflow.db" --artifacts-destination "$dir/artifacts" \
  --host 127.0.0.1 --port "$port" --workers 1 >"$dir/mlflow.log" 2>&1 &
server_pid=$!
for _ in $(seq 600); do
  curl -sf "http://127.0.0.1:$port/health" >/dev/null && break
  sleep 0.1
done
curl -sf "http://127.0.0.1:$port/health" >/dev/null || { echo "mlflow server did not start:"; cat "$dir/mlflow.log"; exit 1; }

results="$dir/results.txt"
run() {  # run SINKS(on|off) SETTINGS...
  local sinks="$1"
  shift
  rm -rf "$dir/work"
  local started ended output
  started=$(date +%s.%N)
  output=$(MASTER_PORT=$((29500 + RANDOM % 1000)) MLFLOW_EXPERIMENT_NAME=sinks-bench "$build_dir/entrypoint/trainpoint" \
    run --repo "$dir/repo" --ref main --spec train.toml --set dist.nproc_per_node=2 --workdir "$dir/work" "$@" 2>&1) \
    || { echo "$output"; exit 1; }
  ended=$(date +%s.%N)
  # The epoch lines' images/s after the first epoch, averaged.
  local per_second
  per_second=$(echo "$output" | sed -n 's/.*epoch \([0-9]*\)\/[0-9]*: .*; \([0-9]*\) images\/s.*/\1 \2/p' |
               awk '$1 > 1 { sum += $2; n++ } END { printf "%.0f", sum / n }')
  echo "$sinks $per_second $(echo "$ended - $started" | bc)" | tee -a "$results"
}
echo "sinks images/s wall_s"
for _ in $(seq "$repeats"); do
  run on --set log.tensorboard=true --set "log.mlflow_uri=http://127.0.0.1:$port"
  run off --set log.tensorboard=false
done
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg)"
/usr/bin/python3 - "$results" "$repeats" <<'PY'
import statistics, sys
runs = [line.split() for line in open(sys.argv[1])]
print(f"\nmedians of {sys.argv[2]} alternating runs each")
print("| sinks | images/s (epochs 2-4) | run wall s | images/s of each run |")
print("|---|---:|---:|---|")
for sinks in ("on", "off"):
    mine = [r for r in runs if r[0] == sinks]
    rates = [float(r[1]) for r in mine]
    walls = [float(r[2]) for r in mine]
    print(f"| {sinks} | {statistics.median(rates):.0f} | {statistics.median(walls):.1f} | "
          f"{', '.join(f'{x:.0f}' for x in rates)} |")
PY
