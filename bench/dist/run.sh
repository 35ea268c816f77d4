#!/usr/bin/env bash
# Distribution overhead on CPU with Gloo: 1 rank versus 2 ranks at the same per-rank batch, for
# trainpoint's engine and for Python PyTorch's DDP (Debian's python3-torch), in one run.
# Usage: bench/dist/run.sh [STEPS] [BATCH]   (builds tp-dist-bench first)
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
build_dir="${BUILD_DIR:-$root/build}"
steps="${1:-30}"
batch="${2:-64}"
"$root/scripts/build" --target tp-dist-bench >/dev/null
bench="$build_dir/bench/dist/tp-dist-bench"
python=/usr/bin/python3
port=$((20000 + RANDOM % 20000))

two_ranks() {  # COMMAND...: runs it as rank 0 and rank 1, prints rank 0's line
  RANK=1 LOCAL_RANK=1 WORLD_SIZE=2 LOCAL_WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port "$@" >/dev/null &
  RANK=0 LOCAL_RANK=0 WORLD_SIZE=2 LOCAL_WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port "$@"
  wait
  port=$((port + 1))
}

tp1=$("$bench" "$steps" "$batch")
tp2=$(two_ranks "$bench" "$steps" "$batch")
py1=$(env -u RANK -u WORLD_SIZE "$python" "$root/bench/dist/python_ddp.py" "$steps" "$batch")
py2=$(two_ranks "$python" "$root/bench/dist/python_ddp.py" "$steps" "$batch")
echo "trainpoint 1 rank:  $tp1"
echo "trainpoint 2 ranks: $tp2"
echo "python     1 rank:  $py1"
echo "python DDP 2 ranks: $py2"
"$python" - "$tp1" "$tp2" "$py1" "$py2" <<'PY'
import json, sys
tp1, tp2, py1, py2 = (json.loads(a) for a in sys.argv[1:])
extra = tp2["step_ms"] - tp1["step_ms"]
exposed = tp2["exposed_allreduce_ms"]
alone = tp2["allreduce_alone_ms"]
print(f"trainpoint: step {tp1['step_ms']:.1f} ms (1 rank) -> {tp2['step_ms']:.1f} ms (2 ranks), "
      f"+{extra:.1f} ms; all-reduce alone {alone:.1f} ms, exposed after backward {exposed:.1f} ms")
print(f"  share of all-reduce hidden behind backward: {100 * (1 - exposed / alone):.0f}%")
print(f"  overhead beyond the exposed all-reduce: {100 * (extra - exposed) / tp1['step_ms']:.1f}% of the 1-rank step")
print(f"python DDP: step {py1['step_ms']:.1f} ms -> {py2['step_ms']:.1f} ms, +{py2['step_ms'] - py1['step_ms']:.1f} ms")
print(f"2-rank step time, python DDP / trainpoint: {py2['step_ms'] / tp2['step_ms']:.2f}x")
PY
