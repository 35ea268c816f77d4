#!/usr/bin/env bash
# Distribution overhead on CPU with Gloo: 1 rank versus 2 ranks at the same per-rank batch, for
# trainpoint's engine and for Python PyTorch's DDP (PyTorch 2.11 from PyPI, bench/baseline-python;
# BENCH_PYTHON=/usr/bin/python3 for Debian's 1.13), in one run. Python runs twice:
# as users run it (torch.set_num_threads(1), OpenBLAS's pool at its default of one thread per core) and
# tuned as trainpoint runs (OPENBLAS_NUM_THREADS=1 as well).
# Usage: bench/dist/run.sh [STEPS] [BATCH] [REPEATS]   (builds tp-dist-bench first)
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
build_dir="${BUILD_DIR:-$root/build}"
steps="${1:-30}"
batch="${2:-64}"
repeats="${3:-3}"
# BENCH_PREBUILT=1: BUILD_DIR already holds it (a build configured otherwise, such as against the wheel line's LibTorch).
[ -n "${BENCH_PREBUILT:-}" ] || "$root/scripts/build" --target tp-dist-bench >/dev/null
bench="$build_dir/bench/dist/tp-dist-bench"
python=$("$root/bench/baseline-python")
echo "python DDP: $("$python" -c 'import torch; print(torch.__version__)'); load average $(cut -d' ' -f1-3 /proc/loadavg)"
port=$((20000 + RANDOM % 20000))

two_ranks() {  # COMMAND...: runs it as rank 0 and rank 1, prints rank 0's line
  RANK=1 LOCAL_RANK=1 WORLD_SIZE=2 LOCAL_WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port "$@" >/dev/null &
  RANK=0 LOCAL_RANK=0 WORLD_SIZE=2 LOCAL_WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port "$@"
  wait
  port=$((port + 1))
}

# Each configuration runs REPEATS times, alternating; the medians go into the summary (the 1-rank step swings
# by 30% between single runs on a shared 2-core machine).
results="$(mktemp /tmp/tp-bench-dist.XXXXXX.jsonl)"
record() {  # NAME JSON
  echo "$1: $2"
  printf '{"name": "%s", "run": %s}\n' "$1" "$2" >>"$results"
}
ddp="$root/bench/dist/python_ddp.py"
for _ in $(seq "$repeats"); do
  record tp1 "$("$bench" "$steps" "$batch")"
  record tp2 "$(two_ranks "$bench" "$steps" "$batch")"
  record py1 "$(env -u RANK -u WORLD_SIZE "$python" "$ddp" "$steps" "$batch")"
  record py2 "$(two_ranks "$python" "$ddp" "$steps" "$batch")"
  record py1t "$(OPENBLAS_NUM_THREADS=1 env -u RANK -u WORLD_SIZE "$python" "$ddp" "$steps" "$batch")"
  record py2t "$(OPENBLAS_NUM_THREADS=1 two_ranks "$python" "$ddp" "$steps" "$batch")"
done
"$python" - "$results" "$repeats" <<'PY'
import json, statistics, sys
runs = [json.loads(line) for line in open(sys.argv[1])]
med = lambda name, key: statistics.median(r["run"][key] for r in runs if r["name"] == name)
tp1, tp2 = med("tp1", "step_ms"), med("tp2", "step_ms")
exposed, alone = med("tp2", "exposed_allreduce_ms"), med("tp2", "allreduce_alone_ms")
print(f"\nmedians of {sys.argv[2]} runs")
print(f"trainpoint: step {tp1:.1f} ms (1 rank) -> {tp2:.1f} ms (2 ranks), +{tp2 - tp1:.1f} ms; "
      f"all-reduce alone {alone:.1f} ms, exposed after backward {exposed:.1f} ms")
print(f"  share of all-reduce hidden behind backward: {100 * (1 - exposed / alone):.0f}%")
print(f"  overhead beyond the exposed all-reduce: {100 * (tp2 - tp1 - exposed) / tp1:.1f}% of the 1-rank step")
for label, one, two in (("python DDP", "py1", "py2"), ("python DDP, OPENBLAS_NUM_THREADS=1", "py1t", "py2t")):
    p1, p2 = med(one, "step_ms"), med(two, "step_ms")
    print(f"{label}: step {p1:.1f} ms -> {p2:.1f} ms, +{p2 - p1:.1f} ms; 2-rank step / trainpoint's: {p2 / tp2:.2f}x")
PY
