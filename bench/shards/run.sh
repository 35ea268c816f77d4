#!/usr/bin/env bash
# Packed-shards benchmark (issue 34; not a test): trainpoint against LitData, Mosaic Streaming, WebDataset and the
# AWS s3torchconnector, on MinIO on loopback, over one image folder of small JPEGs made by tp-make-dataset
# (TP_BENCH_IMAGES, default 100,000 of 64x64 in 8 classes, kept in $TRAINPOINT_CACHE/bench-shards).
#   Packing: `trainpoint pack` vs litdata.optimize vs Mosaic's MDSWriter vs WebDataset's ShardWriter, each from
#   the local folder to its own fresh S3 prefix, shards of the same size, the JPEG bytes as they are.
#   Loading: one epoch by 2 ranks at once (2 processes on this machine), batch 64, the same decode and
#   augmentation (random resized crop to 64, flip, ImageNet normalization), each rank with TP_BENCH_WORKERS
#   decoding workers: trainpoint's tp-bench-data --shards over its pack, LitData's, Mosaic's and WebDataset's
#   readers over theirs, and s3torchconnector over the unpacked images.
# Every command is measured from outside by bench/shards/measure.py (wall, CPU of the process tree, peak RSS and
# PSS of the tree, the disk of its cache). TP_BENCH_REPEATS rounds (default 5), the tools' order rotated each
# round; medians as Markdown tables, with the versions and the load average.
#
# usage: bench/shards/run.sh [BUILD_DIR]      (default: the repository's build/; it holds entrypoint/trainpoint,
#                                              bench/data/tp-bench-data and tests/tools/tp-make-dataset)
# Environment: TP_BENCH_IMAGES (100000), TP_BENCH_REPEATS (5), TP_BENCH_WORKERS (1: decoding workers per rank),
#   TP_BENCH_PACK_WORKERS (2: trainpoint pack --workers, litdata num_workers, Mosaic's upload threads),
#   TP_BENCH_SHARD_MB (default: the images' size / 8, 1 to 64, so that every tool writes at least 8 shards),
#   TP_BENCH_SHUFFLE_BUFFER (1000: the samples shuffled together, trainpoint's data.shuffle_buffer and
#   WebDataset's .shuffle(N); the other tools shuffle their own way),
#   TP_BENCH_TOOLS (a subset, e.g. "litdata mosaic webdataset s3torch"), TP_BENCH_SKIP_TRAINPOINT=1,
#   TP_BENCH_TRAINPOINT (the trainpoint binary), TP_BENCH_LOGS (default /tmp/tp-bench-shards-logs.DATE).
# The Python tools run in bench/shards/python's venv; MinIO, mc and s5cmd come from scripts/install-go-tools.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
build="$(cd "${1:-$root/build}" && pwd)"
images="${TP_BENCH_IMAGES:-100000}"
repeats="${TP_BENCH_REPEATS:-5}"
workers="${TP_BENCH_WORKERS:-1}"
pack_workers="${TP_BENCH_PACK_WORKERS:-2}"
shuffle_buffer="${TP_BENCH_SHUFFLE_BUFFER:-1000}"
batch=64
size=64
cache="${TRAINPOINT_CACHE:-/var/cache/trainpoint}"
data="$cache/bench-shards/images-$images"
logs="${TP_BENCH_LOGS:-/tmp/tp-bench-shards-logs.$(date +%Y%m%d-%H%M%S)}"
mkdir -p "$logs"
results="$logs/results.jsonl"
: >"$results"
echo "# logs and results in $logs" >&2

# --- trainpoint: its pack command and its loader's --shards, or skipped with the reason.
trainpoint="${TP_BENCH_TRAINPOINT:-$build/entrypoint/trainpoint}"
[ -x "$trainpoint" ] || trainpoint="$build/trainpoint"
tp_bench_data="$build/bench/data/tp-bench-data"
skip_trainpoint=""
if [ -n "${TP_BENCH_SKIP_TRAINPOINT:-}" ]; then
  skip_trainpoint="TP_BENCH_SKIP_TRAINPOINT is set"
elif ! "$trainpoint" pack --help >/dev/null 2>&1; then
  skip_trainpoint="\`$trainpoint pack --help\` failed: no trainpoint with a pack command in $build (build it)"
elif [ ! -x "$tp_bench_data" ] || ! grep -q -a -- "--shards: the ranks" "$tp_bench_data"; then
  skip_trainpoint="no tp-bench-data with --shards in $build/bench/data (build the bench target)"
fi
if [ -n "$skip_trainpoint" ]; then
  echo "# trainpoint SKIPPED: $skip_trainpoint" >&2
fi
all_tools=(trainpoint litdata mosaic webdataset s3torch)
read -r -a tools <<<"${TP_BENCH_TOOLS:-${all_tools[*]}}"
if [ -n "$skip_trainpoint" ]; then
  read -r -a tools <<<"$(printf '%s\n' "${tools[@]}" | grep -vx trainpoint | tr '\n' ' ')"
fi
pack_tools=()
for tool in "${tools[@]}"; do [ "$tool" != s3torch ] && pack_tools+=("$tool"); done

python=$("$root/bench/shards/python")
"$root/scripts/install-go-tools" minio mc s5cmd >&2
export PATH="$cache/go-tools/bin:$PATH"

# --- The dataset, generated once and kept (the stamp beside it: nothing but classes inside the folder).
if [ ! -f "$data.complete" ]; then
  echo "# generating $images images into $data" >&2
  rm -rf "$data"
  mkdir -p "$(dirname "$data")"
  "$build/tests/tools/tp-make-dataset" images --out "$data" --classes 8 --count "$images" --size 64x64 \
    --format jpeg --seed 1 >&2
  touch "$data.complete"
fi
data_bytes=$(find "$data" -type f -name '*.jpg' -printf '%s\n' | awk '{s += $1} END {print s}')
shard_mb="${TP_BENCH_SHARD_MB:-$(awk -v b="$data_bytes" 'BEGIN {m = int(b / 8 / 1048576); print (m < 1 ? 1 : (m > 64 ? 64 : m))}')}"
classes=$(find "$data" -mindepth 1 -maxdepth 1 -type d -printf '%f\n' | sort | paste -sd,)
echo "# $images images, $((data_bytes / 1048576)) MiB of JPEG; shards of $shard_mb MiB" >&2

# --- MinIO on loopback, its data in a temporary directory (on disk, as a server's), gone at the end.
work="$(mktemp -d /tmp/tp-bench-shards.XXXXXX)"
minio_pid=""
cleanup() {
  [ -n "$minio_pid" ] && kill "$minio_pid" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT
if [ -z "$skip_trainpoint" ]; then
  # A copy of the two binaries (they link only system libraries): a rebuild during the benchmark changes nothing.
  mkdir -p "$work/bin"
  cp "$trainpoint" "$work/bin/trainpoint"
  cp "$tp_bench_data" "$work/bin/tp-bench-data"
  trainpoint="$work/bin/trainpoint"
  tp_bench_data="$work/bin/tp-bench-data"
fi
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
port=$(free_port)
# shellcheck source=scripts/minio.sh
source "$root/scripts/minio.sh"
start_minio "$work/server" "$port" bench
export AWS_ACCESS_KEY_ID=$minio_access_key AWS_SECRET_ACCESS_KEY=$minio_secret_key AWS_DEFAULT_REGION=us-east-1
export AWS_REGION=us-east-1 AWS_ENDPOINT_URL="http://127.0.0.1:$port"
export S3_ENDPOINT_URL="$AWS_ENDPOINT_URL"  # Mosaic Streaming's
export LITDATA_DISABLE_VERSION_CHECK=1       # LitData would ask PyPI for its newest version
export AWS_ALLOW_HTTP=true  # obstore, LitData's S3 client for chunks, refuses an http:// endpoint without it
s5cmd=(s5cmd --endpoint-url "$AWS_ENDPOINT_URL")  # (--log error would hide ls's listing too)

# The unpacked images, once, for s3torchconnector (and nothing else): s3://bench/images/CLASS/FILE.jpg.
echo "# uploading the unpacked images (s5cmd)" >&2
(cd "$data" && "${s5cmd[@]}" --numworkers 64 cp './*' s3://bench/images/ >/dev/null)
uploaded=$("${s5cmd[@]}" ls 's3://bench/images/*' | wc -l)
[ "$uploaded" -eq "$images" ] || { echo "uploaded $uploaded objects of $images" >&2; exit 1; }
# Every packer reads the folder from the page cache. (Clearing the page cache between runs needs root and a
# machine of our own: MinIO's objects and the folder are as cached as the machine leaves them, alike for all.)
find "$data" -type f -exec cat {} + >/dev/null

tool_versions=$("$python" - <<'PY'
import importlib.metadata as m
print(", ".join(f"{n} {m.version(n)}" for n in ("torch", "torchvision", "pillow", "litdata", "mosaicml-streaming",
                                                 "webdataset", "s3torchconnector")))
PY
)
trainpoint_version="not run"
[ -z "$skip_trainpoint" ] && trainpoint_version=$("$trainpoint" version 2>/dev/null | head -n 2 | paste -sd';' | sed 's/;/; /' || true)

# run_measured LOG JSON_FIELDS CACHE_DIR -- COMMAND...: COMMAND under measure.py, its JSON line (with the
# fields added) appended to the results; its output in LOG. Fails only the tool, not the benchmark.
run_measured() {
  local log=$1 fields=$2 cache_dir=$3
  shift 4
  local sets=()
  for field in $fields; do sets+=(--set "$field"); done
  if ! timeout 3600 "$python" "$here/measure.py" --cache "$cache_dir" "${sets[@]}" -- "$@" >>"$results" 2>"$log"; then
    echo "# FAILED ($log): $*" >&2
    tail -n 15 "$log" | sed 's/^/#   /' >&2
    return 1
  fi
}

# pack TOOL ROUND: the tool's pack of the folder into s3://bench/packed/TOOL-ROUND.
pack() {
  local tool=$1 round=$2 url="s3://bench/packed/$1-$2" log="$logs/pack-$1-$2.log"
  local fields="phase=pack tool=$tool round=$round" command
  case $tool in
    trainpoint)
      command=("$trainpoint" pack "$data" "$url" --format image_folder --shard-size-mb "$shard_mb" --valid 0
               --seed 42 --workers "$pack_workers" --workdir "$work/pack-work") ;;
    # TMPDIR: where LitData stages its chunks and Mosaic its shards before the upload, measured as the pack's disk.
    *) mkdir -p "$work/pack-work"
       command=(env TMPDIR="$work/pack-work" "$python" "$here/pack.py" "$tool" "$data" "$url" --shard-mb "$shard_mb"
                --workers "$pack_workers") ;;
  esac
  echo "# round $round: pack $tool" >&2
  if ! run_measured "$log" "$fields" "$work/pack-work" -- "${command[@]}"; then
    rm -rf "$work/pack-work"
    return 0
  fi
  rm -rf "$work/pack-work"
  # What the pack left on S3: its shards (the data files) and all its bytes.
  "${s5cmd[@]}" ls "$url/*" | awk -v tool="$tool" -v round="$round" '
    { bytes += $(NF-1); if ($NF ~ /\.(tar|bin|mds)$/) shards++ }
    END { printf "{\"phase\": \"packed\", \"tool\": \"%s\", \"round\": %d, \"shards\": %d, \"s3_mb\": %.1f}\n",
          tool, round, shards, bytes / 1048576 }' >>"$results"
}

# load TOOL ROUND: one epoch of the tool by ranks 0 and 1 at once.
load() {
  local tool=$1 round=$2 url="s3://bench/packed/$1-$2" rank pids=() shared=false master_port
  local cache_dir="$work/cache/$tool-$round"
  case $tool in litdata | mosaic) shared=true ;; esac  # the ranks of a node share one cache, as these libraries do
  [ "$tool" = s3torch ] && url="s3://bench/images"
  master_port=$(free_port)
  if [ "$tool" = mosaic ]; then
    # A Mosaic run that was killed leaves its shared memory behind; its own clean-up, before the clock.
    "$python" -c 'from streaming.base.util import clean_stale_shared_memory; clean_stale_shared_memory()' 2>/dev/null || true
  fi
  echo "# round $round: load $tool (2 ranks)" >&2
  for rank in 0 1; do
    local dir="$cache_dir"
    [ "$shared" = false ] && dir="$cache_dir/rank-$rank"
    mkdir -p "$dir"
    local command
    case $tool in
      trainpoint)
        command=("$tp_bench_data" --shards "$url" --rank "$rank" --world-size 2 --workers "$workers" --batch "$batch"
                 --size "$size" --shuffle-buffer "$shuffle_buffer" --workdir "$dir") ;;
      *)
        command=(env RANK="$rank" WORLD_SIZE=2 LOCAL_RANK="$rank" LOCAL_WORLD_SIZE=2 GLOBAL_RANK="$rank" NODE_RANK=0
                 NNODES=1 MASTER_ADDR=127.0.0.1 MASTER_PORT="$master_port"
                 "$python" "$here/load.py" "$tool" "$url" --cache "$dir" --workers "$workers" --batch "$batch"
                 --size "$size" --classes "$classes" --shuffle-buffer "$shuffle_buffer") ;;
    esac
    run_measured "$logs/load-$tool-$round-rank$rank.log" "phase=load tool=$tool round=$round rank=$rank shared_cache=$shared" \
      "$dir" -- "${command[@]}" &
    pids+=($!)
  done
  for pid in "${pids[@]}"; do wait "$pid" || true; done
  rm -rf "$cache_dir"
}

load_start=$(cut -d' ' -f1-3 /proc/loadavg)
echo "# load average at the start: $load_start" >&2
for round in $(seq "$repeats"); do
  shift_by=$(((round - 1) % ${#tools[@]}))
  order=("${tools[@]:$shift_by}" "${tools[@]:0:$shift_by}")
  for tool in "${order[@]}"; do
    [ "$tool" = s3torch ] || pack "$tool" "$round"
  done
  for tool in "${order[@]}"; do
    load "$tool" "$round"
  done
  # This round's shards are done with: keep MinIO's disk to one round's.
  "${s5cmd[@]}" rm "s3://bench/packed/*" >/dev/null 2>&1 || true
done
load_end=$(cut -d' ' -f1-3 /proc/loadavg)

{
  echo "trainpoint: $trainpoint_version"
  [ -n "$skip_trainpoint" ] && echo "trainpoint SKIPPED: $skip_trainpoint"
  echo "Python tools: $tool_versions; MinIO $(sed 's/.*@//' "$minio_bin/minio.version"), s5cmd $(sed 's/.*@//' "$minio_bin/s5cmd.version")"
  echo "$(nproc) cores; $images JPEGs of 64x64 ($((data_bytes / 1048576)) MiB) in 8 classes; shards of $shard_mb MiB;" \
       "pack workers $pack_workers; loading: 2 ranks, $workers worker(s) each, batch $batch, shuffle buffer $shuffle_buffer; $repeats round(s)," \
       "order rotated; page caches not cleared (the folder and MinIO's files as the machine caches them)"
  echo
  python3 "$here/summary.py" "$results"
  echo
  echo "load average at the start: $load_start; at the end: $load_end"
} | tee "$logs/summary.md"
